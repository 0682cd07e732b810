"""Run-once check pods, built one way for `blueprint verify`'s probes and the health loop's node checks (pure).

A pod pinned to nodes, tolerating their taints, with limits equal to requests (extended resources such as GPUs,
EFA devices and huge pages must be given as limits, and requests must equal them), and the DCGM diagnostic command
both run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from components.planning.pools import GPU_RESOURCE

#: The capability `dcgmi diag` needs beyond a default container's (its GPU tests read and reset counters through
#: the driver's privileged interfaces); Pod Security `baseline` refuses it ([PSS]).
DCGM_CAPABILITIES = ("SYS_ADMIN",)


def dcgm_diag(level: int) -> str:
    """The shell command of a DCGM diagnostic at `level` in NVIDIA's DCGM image: its own host engine, then
    `dcgmi diag -r LEVEL -j` (JSON results, [DCGMDIAG])."""
    return f"nv-hostengine >/dev/null 2>&1; sleep 2; dcgmi diag -r {level} -j"


def restricted_security(run_as: tuple[int, int]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The pod and container security contexts Pod Security `restricted` admits: a non-root user and group, the
    runtime's default seccomp profile, no privilege escalation and every capability dropped (Kubernetes, "Pod
    Security Standards", https://kubernetes.io/docs/concepts/security/pod-security-standards/#restricted)."""
    uid, gid = run_as
    pod = {"runAsNonRoot": True, "runAsUser": uid, "runAsGroup": gid, "seccompProfile": {"type": "RuntimeDefault"}}
    container = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    return pod, container


def pod_spec(
    name: str,
    labels: Mapping[str, str],
    image: str,
    command: Sequence[str],
    node_selector: Mapping[str, str],
    tolerations: Sequence[Mapping[str, str]],
    resources: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
    volumes: Sequence[Mapping[str, Any]] = (),
    mounts: Sequence[Mapping[str, Any]] = (),
    capabilities: Sequence[str] = (),
    active_deadline_seconds: int | None = None,
    *,
    run_as: tuple[int, int] | None,
    runtime_class: str | None = None,
) -> dict[str, Any]:
    """A run-once pod on the selected nodes: tolerations of the pool's taints, limits equal to requests (extended
    resources such as GPUs, EFA devices and huge pages must be given as limits, and requests must equal them).

    `run_as` (uid, gid) gives it the `restricted` security context, which a workload namespace admits; None leaves
    it root, for the probes that need root or capabilities (NCCL's sshd, DCGM's SYS_ADMIN), which then need a
    namespace that admits them (`--namespace`). `runtime_class` names the pool's RuntimeClass: on a hybrid pool with
    `gpuRuntime: runtime-class` a GPU pod without it runs under runc and sees no GPU."""
    if run_as is not None and capabilities:
        raise ValueError("a restricted pod cannot add capabilities")
    container: dict[str, Any] = {"name": "check", "image": image, "command": list(command)}
    if resources:
        container["resources"] = {"limits": dict(resources), "requests": dict(resources)}
    if env:
        container["env"] = [{"name": k, "value": v} for k, v in env.items()]
    if mounts:
        container["volumeMounts"] = list(mounts)
    if capabilities:
        container["securityContext"] = {"capabilities": {"add": list(capabilities)}}
    pod_security: dict[str, Any] | None = None
    if run_as is not None:
        pod_security, container["securityContext"] = restricted_security(run_as)
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "nodeSelector": dict(node_selector),
        "tolerations": [dict(t) for t in tolerations],
        "containers": [container],
        "terminationGracePeriodSeconds": 0,
    }
    if pod_security is not None:
        spec["securityContext"] = pod_security
    if runtime_class:
        spec["runtimeClassName"] = runtime_class
    if volumes:
        spec["volumes"] = list(volumes)
    if active_deadline_seconds:
        spec["activeDeadlineSeconds"] = active_deadline_seconds
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": dict(labels)}, "spec": spec}


def gpu_resources(gpus: int, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    return {GPU_RESOURCE: str(gpus), **(extra or {})}
