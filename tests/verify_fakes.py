"""A fake Kubernetes API for `blueprint verify` tests: nodes and pods as the API's JSON, test pods that end the
way a test says (phase, log, pod IP), and a record of what was created, deleted and cordoned."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from blueprint.verify.kube import KubeError
from components.catalog.node_software import ami_release_software
from components.config import ClusterConfig
from components.planning.addons.node_monitoring import AGENT_CONDITIONS
from tests.json_documents import fresh

DATA = Path(__file__).parent / "data" / "verify"

#: What GPU feature discovery labels a node of the default AMI release with (the catalog's pins for that release;
#: the on-prem runbook pins the same driver branch and CUDA version).
_DEFAULT_IMAGE = ami_release_software(ClusterConfig.model_fields["ami_release"].default)
assert _DEFAULT_IMAGE is not None
GFD_LABELS = {
    "nvidia.com/cuda.driver-version.full": _DEFAULT_IMAGE.nvidia_driver,
    "nvidia.com/cuda.runtime-version.full": _DEFAULT_IMAGE.cuda,
}


def sample(name: str) -> str:
    return (DATA / name).read_text()


def node(
    name: str,
    pool: str,
    instance_type: str | None = None,
    gpus: int = 0,
    efa: int = 0,
    ready: bool = True,
    hybrid: bool = False,
    resources: dict[str, int] | None = None,
    extra_labels: dict[str, str] | None = None,
    health: dict[str, str] | None = None,
    gfd: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A node as the API returns it; `resources` adds allocatable extended resources (`nvidia.com/mig-3g.40gb`).
    `health`: the node monitoring agent's conditions by type and status; by default a healthy cloud GPU node
    reports all of them True, and other nodes none (the agent watches cloud GPU nodes only).
    `gfd`: GPU feature discovery's version labels; by default a GPU node has the pinned ones (`GFD_LABELS`)."""
    if gfd is None:
        gfd = GFD_LABELS if gpus or resources else {}
    labels = {"gpu-clusters/pool": pool, "kubernetes.io/hostname": name, **gfd, **(extra_labels or {})}
    if instance_type:
        labels["node.kubernetes.io/instance-type"] = instance_type
    if hybrid:
        labels["eks.amazonaws.com/compute-type"] = "hybrid"
    allocatable = {"cpu": "191450m"}
    if gpus:
        allocatable["nvidia.com/gpu"] = str(gpus)
    if efa:
        allocatable["vpc.amazonaws.com/efa"] = str(efa)
    allocatable.update({resource: str(count) for resource, count in (resources or {}).items()})
    if health is None:
        health = dict.fromkeys(AGENT_CONDITIONS, "True") if gpus and not hybrid else {}
    conditions = [{"type": "Ready", "status": "True" if ready else "False"}]
    conditions += [{"type": kind, "status": status} for kind, status in health.items()]
    return {
        "metadata": {"name": name, "labels": labels},
        "status": {"allocatable": allocatable, "conditions": conditions},
    }


def workload_pod(namespace: str, name: str, node_name: str, gpus: int) -> dict[str, Any]:
    """A pod that is not the tool's, holding `gpus` GPUs on a node (a serving replica, a training job)."""
    return {
        "metadata": {"namespace": namespace, "name": name},
        "spec": {"nodeName": node_name, "containers": [{"resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]},
        "status": {"phase": "Running"},
    }


def daemon_pod(daemonset: str, node_name: str, ready: bool = True) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"{daemonset}-{node_name[-5:]}",
            "ownerReferences": [{"kind": "DaemonSet", "name": daemonset}],
        },
        "spec": {"nodeName": node_name},
        "status": {"phase": "Running", "containerStatuses": [{"ready": ready}]},
    }


#: What a test pod does: given its body, the phase it ends in and its log.
Behaviour = Callable[[dict[str, Any]], tuple[str, str]]


class FakeApi:
    def __init__(
        self,
        nodes: list[dict[str, Any]],
        pods: dict[str, list[dict[str, Any]]] | None = None,
        behaviour: Behaviour | None = None,
        claims: dict[tuple[str, str], dict[str, Any]] | None = None,
        slices: list[dict[str, Any]] | None = None,
    ) -> None:
        self.nodes = nodes
        self.slices = slices or []
        self.pods = pods or {}
        self.behaviour = behaviour or (lambda body: ("Succeeded", ""))
        self.claims = claims or {}
        self.created: dict[tuple[str, str], dict[str, Any]] = {}
        self.deleted: list[tuple[str, str]] = []
        self.secrets: dict[tuple[str, str], dict[str, Any]] = {}
        self.deleted_secrets: list[tuple[str, str]] = []
        self.cordoned: list[str] = []
        #: Every label write, in order: (node, key, value or None for a removal).
        self.labelled: list[tuple[str, str, str | None]] = []
        #: Called after each label write, as a controller would react to it (e.g. the DaemonSet controller).
        self.on_label: Callable[[FakeApi, str], None] = lambda api, node: None
        self.fail_reads: BaseException | None = None
        self.reads: list[str] = []

    # ------------------------------------------------------------------ reads
    def list_nodes(self) -> list[dict[str, Any]]:
        return fresh(self.nodes)

    def list_pods(self, namespace: str | None = None, label_selector: str = "") -> list[dict[str, Any]]:
        if namespace is not None:
            return fresh(self.pods.get(namespace, []))
        # Every namespace, as the API lists them: each pod carries its namespace, the tool's own pods included.
        listed = [
            {**pod, "metadata": {"namespace": ns, **pod["metadata"]}} for ns, pods in self.pods.items() for pod in pods
        ]
        return fresh(listed + [body for (ns, _), body in self.created.items() if (ns, _) not in self.deleted])

    def read_pod(self, namespace: str, name: str) -> dict[str, Any]:
        """The pod as the API shows it in the phase its behaviour gives; `ImagePullBackOff`, `Unschedulable` and
        `ContainerCreating` are Pending pods with the status the kubelet or scheduler gives them. The pod IP is the
        node's name, so a launcher's `-H` list says which nodes it runs on."""
        if self.fail_reads is not None:
            raise self.fail_reads
        body = fresh(self.created[(namespace, name)])
        phase, _ = self.behaviour(body)
        node = body["spec"]["nodeSelector"].get("kubernetes.io/hostname") or "node-from-selector"
        body["spec"]["nodeName"] = node
        container: dict[str, Any] = {"ready": phase == "Running"}
        status: dict[str, Any] = {"phase": phase, "podIP": node, "containerStatuses": [container]}
        if phase in ("ImagePullBackOff", "ContainerCreating"):
            status["phase"] = "Pending"
            message = f'Back-off pulling image "{body["spec"]["containers"][0]["image"]}"'
            container["state"] = {
                "waiting": {"reason": phase, "message": message if phase != "ContainerCreating" else ""}
            }
        elif phase == "Unschedulable":
            status = {"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                 "message": "0/4 nodes are available: 1 Insufficient nvidia.com/gpu."}]}  # fmt: skip
        elif phase in ("Running", "Succeeded", "Failed"):
            container["state"] = {"running" if phase == "Running" else "terminated": {}}
        body["status"] = status
        self.reads.append(name)
        return body

    def pod_log(self, namespace: str, name: str) -> str:
        return self.behaviour(self.created[(namespace, name)])[1]

    def read_claim(self, namespace: str, name: str) -> dict[str, Any] | None:
        return fresh(self.claims.get((namespace, name)))

    def list_resource_slices(self) -> list[dict[str, Any]]:
        return fresh(self.slices)

    # ------------------------------------------------------------------ writes
    def create_pod(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        self.created[(namespace, body["metadata"]["name"])] = fresh(body)
        return body

    def delete_pod(self, namespace: str, name: str) -> None:
        self.deleted.append((namespace, name))

    def create_secret(self, namespace: str, body: dict[str, Any]) -> None:
        self.secrets[(namespace, body["metadata"]["name"])] = fresh(body)

    def delete_secret(self, namespace: str, name: str) -> None:
        self.deleted_secrets.append((namespace, name))

    def cordon(self, node: str) -> None:
        self.cordoned.append(node)

    def label_node(self, node: str, key: str, value: str | None) -> None:
        self.labelled.append((node, key, value))
        for found in self.nodes:
            if found["metadata"]["name"] == node:
                labels = found["metadata"]["labels"]
                if value is None:
                    labels.pop(key, None)
                else:
                    labels[key] = value
        self.on_label(self, node)

    # ------------------------------------------------------------------ assertions
    def leftovers(self) -> list[tuple[str, str]]:
        """Pods and secrets created and never deleted."""
        pods = [k for k in self.created if k not in self.deleted]
        secrets = [k for k in self.secrets if k not in self.deleted_secrets]
        return pods + secrets


def failing(error: str = "connection refused") -> KubeError:
    return KubeError(error)
