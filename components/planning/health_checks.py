"""The health gate's check pod of each gated pool (pure): what the health loop starts on a new or idle GPU node.

One pod per node, tolerating the pool's taints and the startup taint, asking for every GPU and EFA device the node
advertises (a DRA pool's GPUs through a claim), so no work lands beside it; its script checks the GPU count and
state (`nvidia-smi`), the NVLink links where the catalog says the type has NVLink, the EFA devices against the
catalog, and DCGM's diagnostic at the pool's level, then ends with exit code 0 or 1 and a one-line JSON termination
message the loop reads
(`{"result", "step", "detail"}`). docs/operations.md, "The health loop".
"""

from __future__ import annotations

import re
from typing import Any

from components.catalog.images import image
from components.planning.autoscaler_tags import EFA_RESOURCE
from components.planning.check_pods import DCGM_CAPABILITIES, dcgm_diag, pod_spec
from components.planning.dra import (
    allocates_through_dra,
    claim_template_name,
    claim_template_spec,
    container_claims,
    pod_claims,
)
from components.planning.gpu_runtime import NVIDIA_RUNTIME_CLASS, runtime_class_plans
from components.planning.mig import advertised_resources
from components.planning.node_health import NODE_HEALTH_NAMESPACE
from components.planning.pools import PoolPlan
from components.planning.tolerations import toleration

#: NVIDIA's DCGM image (dcgmi, nv-hostengine; nvidia-smi comes from the driver through the container toolkit), the
#: one `blueprint verify --checks dcgm` runs too.
DCGM_IMAGE = image("dcgm").reference
#: The labels of every check pod (the loop adds the kind and the node).
CHECK_POD_LABELS = {"app.kubernetes.io/managed-by": NODE_HEALTH_NAMESPACE, "app.kubernetes.io/component": "check"}
#: Where the kubelet reads a container's termination message (the pod default, `terminationMessagePath`).
TERMINATION_LOG = "/dev/termination-log"
_LINKS_PER_GPU = re.compile(r"(\d+)\s+links/GPU")


def nvlink_links_per_gpu(plan: PoolPlan) -> int | None:
    """NVLink links per GPU from the catalog's `nvlink` entry (`18 links/GPU` on p5), None without NVLink; the
    check counts the links `nvidia-smi nvlink --status` shows up ([NVSMI])."""
    nvlink = plan.instance.nvlink if plan.instance else None
    found = _LINKS_PER_GPU.search(nvlink) if nvlink else None
    return int(found.group(1)) if found else None


def check_resources(plan: PoolPlan) -> dict[str, str]:
    """Every device the node advertises: its GPUs (time-sliced replicas included) and EFA devices. A DRA pool's GPUs
    come through the pod's claim instead (`check_claim_templates`)."""
    gpus = {} if allocates_through_dra(plan) else advertised_resources(plan, plan.mig_strategy)
    resources = {name: str(count) for name, count in gpus.items() if count}
    if plan.efa_devices:
        resources[EFA_RESOURCE] = str(plan.efa_devices)
    return resources


def check_script(plan: PoolPlan) -> str:
    """The check's shell script (POSIX sh in the DCGM image): each step fails fast with its own message."""
    level = plan.pool.health_gate.dcgm_level
    gpus = plan.gpus_per_node
    lines = [
        "set -u",
        'report() { printf \'{"result":"%s","step":"%s","detail":"%s"}\' "$1" "$2" "$3" '
        f'> {TERMINATION_LOG}; echo "$1 $2: $3"; }}',
        'fail() { report failed "$1" "$2"; exit 1; }',
        "found=$(nvidia-smi --query-gpu=index --format=csv,noheader) || fail gpus 'nvidia-smi failed'",
        'count=$(printf "%s\\n" "$found" | grep -c .)',
        f'[ "$count" -eq {gpus} ] || fail gpus "nvidia-smi lists $count GPUs, expected {gpus}"',
    ]
    links = nvlink_links_per_gpu(plan)
    if links:
        expected = links * gpus
        lines += [
            "status=$(nvidia-smi nvlink --status) || fail nvlink 'nvidia-smi nvlink failed'",
            'down=$(printf "%s\\n" "$status" | grep -ci inactive)',
            'up=$(printf "%s\\n" "$status" | grep -c "GB/s")',
            f'[ "$down" -eq 0 ] && [ "$up" -ge {expected} ] || '
            f'fail nvlink "$up NVLink links up and $down inactive, expected {expected} up"',
        ]
    if plan.efa_devices:
        lines += [
            "efa=$(ls /sys/class/infiniband 2>/dev/null | grep -c .)",
            f'[ "$efa" -ge {plan.efa_devices} ] || fail efa "$efa EFA devices, expected {plan.efa_devices}"',
        ]
    lines += [
        f"( {dcgm_diag(level)} ) > /tmp/diag.json 2>&1; code=$?",
        'grep -Eiq \'"(status)"[[:space:]]*:[[:space:]]*"(fail|failed|error)"|runtime_error\' /tmp/diag.json '
        f'&& fail dcgm "level {level}: a test failed"',
        f'[ "$code" -eq 0 ] || fail dcgm "level {level}: dcgmi exited $code"',
        f'report passed all "{gpus} GPUs'
        + (f", NVLink up, {plan.efa_devices} EFA devices" if plan.efa_devices else "")
        + f', DCGM level {level}"',
    ]
    return "\n".join(lines) + "\n"


def check_pod_template(plan: PoolPlan, check_timeout_seconds: int) -> dict[str, Any]:
    """The pool's check pod, without a name or a node (the loop adds both): the shared run-once pod
    (`components.planning.check_pods`) with the DCGM capability, the pool's and the startup taints tolerated, every
    device requested, and a deadline so a hung check ends even if the loop is down."""
    pod = pod_spec(
        "",
        CHECK_POD_LABELS,
        DCGM_IMAGE,
        ["sh", "-c", check_script(plan)],
        {},
        [toleration(t) for t in plan.registration_taints],
        check_resources(plan),
        capabilities=DCGM_CAPABILITIES,
        active_deadline_seconds=check_timeout_seconds,
        run_as=None,
        runtime_class=NVIDIA_RUNTIME_CLASS if runtime_class_plans([plan]) else None,
    )
    del pod["metadata"]["name"]
    del pod["spec"]["nodeSelector"]
    pod["spec"]["automountServiceAccountToken"] = False
    if allocates_through_dra(plan):
        pod["spec"]["resourceClaims"] = pod_claims(check_claim_template_name(plan.name))
        for container in pod["spec"]["containers"]:
            container.setdefault("resources", {})["claims"] = container_claims()
    return pod


def check_claim_template_name(pool: str) -> str:
    """The ResourceClaimTemplate of a DRA pool's check pods, in the loop's namespace: `check-<pool>-gpus`."""
    return claim_template_name(f"check-{pool}")


def check_claim_templates(plans: list[PoolPlan]) -> dict[str, dict[str, Any]]:
    """Each gated DRA pool's check claim template (every GPU of the node), by template name: the check pod is
    scheduled onto its node by affinity, so the scheduler allocates the claim there."""
    return {
        check_claim_template_name(p.name): claim_template_spec(p.gpus_per_node)
        for p in plans
        if p.health_gated and allocates_through_dra(p)
    }


def check_pod_templates(plans: list[PoolPlan], check_timeout_seconds: int) -> dict[str, dict[str, Any]]:
    """The check pod of every gated pool, by pool name."""
    return {p.name: check_pod_template(p, check_timeout_seconds) for p in plans if p.health_gated}
