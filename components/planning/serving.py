"""The serving example (pure, no Pulumi): an OpenAI-compatible vLLM server per `workloads.serving` entry, as the
Kubernetes objects' specs: Deployment, Service and PodDisruptionBudget (the ScaledObject comes from
`components.planning.serving_autoscaling`).

Invariant: scale-in never drops a request: readiness on `/health` ([VLLM]), a `preStop` pause before SIGTERM
([K8SLIFE]) and a PodDisruptionBudget of one ([CA]). See docs/addons.md#serving-autoscaling.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import floor
from typing import Any

from components.catalog.images import image
from components.config import ServingWorkload
from components.planning.addons.placement import tolerations_for
from components.planning.dra import (
    allocates_through_dra,
    claim_template_name,
    claim_template_spec,
    container_claims,
    pod_claims,
)
from components.planning.gpu_runtime import NVIDIA_RUNTIME_CLASS, runtime_class_plans
from components.planning.mig import advertised_gpus
from components.planning.pools import GPU_RESOURCE, PoolPlan
from components.planning.tolerations import outage_tolerations, unreachable_toleration_seconds
from components.tags import POOL

#: The vLLM OpenAI-compatible server image by tag and digest, past the advisories the catalog refuses
#: (`components/catalog/images.yaml`).
VLLM_IMAGE = image("vllm-openai").reference
SERVING_PORT = 8000
#: Where Prometheus scrapes a vLLM server: its API port, path `/metrics` ([VLLMMETRICS]: the OpenAI-compatible
#: server exposes its metrics on the port it serves on). The one place the scrape port is derived from: the
#: PodMonitor, the NetworkPolicy and any firewall on the way (a hybrid pool's site link) read it here.
METRICS_PORT = SERVING_PORT
METRICS_PATH = "/metrics"
#: The server's numeric user: the image sets no USER ([VLLMDOCKER]), and Pod Security `restricted` needs a non-root
#: one the kubelet can check without reading the image.
SERVER_UID = 1000
#: Writable places for a read-only-free, non-root server: its home (Hugging Face and vLLM caches live under it,
#: [VLLMSEC] "Cache Directory Security": private to the pod) and /tmp, both pod-local emptyDirs.
HOME_PATH = "/home/vllm"
SCRATCH_SIZE = "8Gi"
HEALTH_PATH = "/health"
#: Where the NFS claim (model weights) is mounted, read-only.
MODELS_PATH = "/models"
#: Readiness and startup probes ask every this many seconds.
PROBE_PERIOD_SECONDS = 10
#: vLLM's tensor-parallel workers share tensors through /dev/shm, which a container gets 64 MiB of by default.
SHM_SIZE = "16Gi"
#: Of a replica's slice of the node (one node's worth of replicas share it), the CPU and memory it requests: half,
#: leaving the rest to the node's daemons, the kubelet's reserve and a surging replica during a rollout.
HOST_SHARE_REQUESTED = 0.5
#: A hybrid server's CPU and memory are not in the catalog: a floor any GPU server meets.
HYBRID_HOST_REQUESTS = {"cpu": "4", "memory": "32Gi"}
#: vLLM reports anonymous usage statistics unless told not to ([VLLM] "Usage Stats Collection": either variable).
NO_USAGE_STATS = [{"name": "VLLM_NO_USAGE_STATS", "value": "1"}, {"name": "DO_NOT_TRACK", "value": "1"}]


#: The label the API server sets on every namespace to its name ([K8SNS]), so a policy can name a namespace.
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


def serving_labels(workload: ServingWorkload) -> dict[str, str]:
    """The selector of the Deployment, Service and PodDisruptionBudget."""
    return {"app.kubernetes.io/name": workload.name, "app.kubernetes.io/managed-by": "gpu-clusters"}


def server_args(workload: ServingWorkload) -> list[str]:
    """`vllm serve` arguments: the weights from the claim, offline, the name clients use, one replica's GPUs and,
    when set, its share of each GPU's memory."""
    return [
        f"{MODELS_PATH}/{workload.model}",
        "--served-model-name",
        workload.model_name,
        "--host",
        "0.0.0.0",
        "--port",
        str(SERVING_PORT),
        "--tensor-parallel-size",
        str(workload.gpus_per_replica),
        *(
            ["--gpu-memory-utilization", f"{workload.gpu_memory_utilization:g}"]
            if workload.gpu_memory_utilization is not None
            else []
        ),
        *workload.extra_args,
    ]


#: Pod Security `restricted` ([PSS]): a non-root numeric user, the runtime's default seccomp profile. No `fsGroup`:
#: the emptyDirs are writable by any user, and the weights need only be world-readable (no recursive chown of them).
POD_SECURITY: dict[str, Any] = {
    "runAsNonRoot": True,
    "runAsUser": SERVER_UID,
    "runAsGroup": SERVER_UID,
    "seccompProfile": {"type": "RuntimeDefault"},
}
#: ... and per container: no privilege escalation, every capability dropped.
CONTAINER_SECURITY: dict[str, Any] = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
}


def server_env(workload: ServingWorkload) -> list[dict[str, Any]]:
    """Offline, no usage reports, a user name and caches under the pod's own home, and the API key from its Secret
    when set (`VLLM_API_KEY`, which vLLM reads like `--api-key` [VLLMSEC]; an env var keeps the key out of the
    args)."""
    env: list[dict[str, Any]] = [
        {"name": "HF_HUB_OFFLINE", "value": "1"},
        *NO_USAGE_STATS,
        {"name": "HOME", "value": HOME_PATH},
        # The image has no passwd entry for SERVER_UID: without USER, getpass.getuser() in torch's compile cache
        # raises at import and the server never starts [VLLMUSER].
        {"name": "USER", "value": "vllm"},
        {"name": "HF_HOME", "value": f"{HOME_PATH}/.cache/huggingface"},
        {"name": "VLLM_CACHE_ROOT", "value": f"{HOME_PATH}/.cache/vllm"},
        {"name": "TORCHINDUCTOR_CACHE_DIR", "value": f"{HOME_PATH}/.cache/torchinductor"},
    ]
    if workload.api_key is not None:
        secret = {"name": workload.api_key.secret_name, "key": workload.api_key.key}
        env.append({"name": "VLLM_API_KEY", "valueFrom": {"secretKeyRef": secret}})
    return env


def pinned_outage_tolerations(plan: PoolPlan) -> list[dict[str, Any]]:
    """Replicas pinned to a hybrid pool ride out a site-link outage for the pool's `unreachableTolerationSeconds`:
    nowhere else can take them, and an eviction would have the kubelet kill the replicas still serving on-prem
    clients when the link returns. Replicas on EC2 pools keep Kubernetes' 300 s, so a dead instance's replicas move."""
    return outage_tolerations(unreachable_toleration_seconds(plan)) if plan.kind == "hybrid" else []


def gpu_resources(workload: ServingWorkload, plan: PoolPlan) -> dict[str, Any]:
    """The server container's resources: its GPUs as `nvidia.com/gpu` (requests equal to limits), or on a DRA pool
    through the pod's claim (`components.planning.dra`), with its CPU and memory requests either way."""
    host = host_requests(workload, plan)
    if allocates_through_dra(plan):
        return {"requests": host, "claims": container_claims()}
    gpus = str(workload.gpus_per_replica)
    return {"requests": {GPU_RESOURCE: gpus, **host}, "limits": {GPU_RESOURCE: gpus}}


def claim_template(workload: ServingWorkload, plan: PoolPlan) -> dict[str, Any] | None:
    """The ResourceClaimTemplate spec of the workload's replicas (one claim of `gpusPerReplica` GPUs each) on a DRA
    pool; None on a device-plugin pool."""
    return claim_template_spec(workload.gpus_per_replica) if allocates_through_dra(plan) else None


def deployment_spec(workload: ServingWorkload, plan: PoolPlan, claim: str) -> dict[str, Any]:
    """The Deployment's spec. No `replicas`: the HPA that KEDA creates owns the count, and `pulumi up` must not
    reset it (the Deployment starts at one replica and the HPA raises it to `replicas.min`)."""
    labels = serving_labels(workload)
    pod: dict[str, Any] = {
        "nodeSelector": {POOL: plan.name},
        # the pool's taints but not the health gate's: a replica waits until its node passed the check
        "tolerations": [
            *tolerations_for([plan], critical_addons=False, startup=False),
            *pinned_outage_tolerations(plan),
        ],
        "terminationGracePeriodSeconds": workload.termination_grace_seconds,
        # The server calls no Kubernetes API: no token in the pod.
        "automountServiceAccountToken": False,
        "containers": [
            {
                "name": "server",
                "image": workload.image or VLLM_IMAGE,
                "args": server_args(workload),
                "env": server_env(workload),
                "securityContext": CONTAINER_SECURITY,
                "ports": [{"name": "http", "containerPort": SERVING_PORT}],
                "resources": gpu_resources(workload, plan),
                "startupProbe": _probe(failures=-(-workload.startup_seconds // PROBE_PERIOD_SECONDS)),
                "readinessProbe": _probe(failures=3),
                "lifecycle": {"preStop": {"sleep": {"seconds": workload.drain_seconds}}},
                "volumeMounts": [
                    {"name": "models", "mountPath": MODELS_PATH, "readOnly": True},
                    {"name": "shm", "mountPath": "/dev/shm"},
                    {"name": "home", "mountPath": HOME_PATH},
                    {"name": "tmp", "mountPath": "/tmp"},
                ],
            }
        ],
        "securityContext": POD_SECURITY,
        "volumes": [
            {"name": "models", "persistentVolumeClaim": {"claimName": claim, "readOnly": True}},
            {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": SHM_SIZE}},
            {"name": "home", "emptyDir": {"sizeLimit": SCRATCH_SIZE}},
            {"name": "tmp", "emptyDir": {"sizeLimit": SCRATCH_SIZE}},
        ],
    }
    if runtime_class_plans([plan]):
        pod["runtimeClassName"] = NVIDIA_RUNTIME_CLASS
    if allocates_through_dra(plan):
        pod["resourceClaims"] = pod_claims(claim_template_name(workload.name))
    return {
        "selector": {"matchLabels": labels},
        # Surge one replica and never take one away before its replacement is Ready: a rollout keeps capacity.
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
        "template": {"metadata": {"labels": labels}, "spec": pod},
    }


def _probe(failures: int) -> dict[str, Any]:
    return {
        "httpGet": {"path": HEALTH_PATH, "port": "http"},
        "periodSeconds": PROBE_PERIOD_SECONDS,
        "timeoutSeconds": 5,
        "failureThreshold": failures,
    }


def service_spec(workload: ServingWorkload) -> dict[str, Any]:
    """A ClusterIP Service on the OpenAI-compatible port."""
    return {
        "type": "ClusterIP",
        "selector": serving_labels(workload),
        "ports": [{"name": "http", "port": SERVING_PORT, "targetPort": "http"}],
    }


def host_requests(workload: ServingWorkload, plan: PoolPlan) -> dict[str, str]:
    """CPU and memory a replica requests, so it is Burstable rather than BestEffort (evicted first under node
    pressure, [K8SQOS]) and the scheduler counts what the model load and tokenizer need: half the replica's slice of
    the instance's vCPUs and memory, at least 1 CPU and 8 GiB."""
    if plan.instance is None:
        return dict(HYBRID_HOST_REQUESTS)
    per_node = max(1, advertised_gpus(plan) // workload.gpus_per_replica)
    cpu = max(1, floor(plan.instance.vcpu * HOST_SHARE_REQUESTED / per_node))
    memory = max(8, floor(plan.instance.memory_gib * HOST_SHARE_REQUESTED / per_node))
    return {"cpu": str(cpu), "memory": f"{memory}Gi"}


def disruption_budget_spec(workload: ServingWorkload) -> dict[str, Any]:
    """At most one replica voluntarily down at a time (drains, node scale-in, instance refresh)."""
    return {"maxUnavailable": 1, "selector": {"matchLabels": serving_labels(workload)}}


def network_policy_spec(
    workload: ServingWorkload,
    monitoring_namespace: str,
    ec2_pods: Sequence[str] = (),
    gateway: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Ingress to the server's ports (API and `/metrics`) only from its own namespace, the configured namespaces and
    CIDRs, Prometheus's namespace and, for a workload exposed through the inference Gateway, the Gateway's Envoy
    pods (`gateway`, the peer `components.planning.inference_routes.gateway_peer` gives). Additive to any
    default-deny: it selects only these pods.
    `ec2_pods`: on a hybrid pool, where EC2 pods take their addresses, which Cilium's selectors cannot match
    (`components.planning.network_policies.CrossCniSources`); those pods are admitted by address instead."""
    namespaces = sorted({monitoring_namespace, *workload.allow_from.namespaces})
    cidrs = list(dict.fromkeys([*workload.allow_from.cidrs, *ec2_pods]))
    sources: list[dict[str, Any]] = [
        {"podSelector": {}},
        *({"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: name}}} for name in namespaces),
        *([gateway] if gateway is not None else []),
        *({"ipBlock": {"cidr": cidr}} for cidr in cidrs),
    ]
    return {
        "podSelector": {"matchLabels": serving_labels(workload)},
        "policyTypes": ["Ingress"],
        "ingress": [{"from": sources, "ports": [{"protocol": "TCP", "port": port} for port in server_ports()]}],
    }


def server_ports() -> list[int]:
    """The ports clients and Prometheus reach a server on (one today: vLLM serves `/metrics` on its API port)."""
    return sorted({SERVING_PORT, METRICS_PORT})


def pod_monitor_spec(workload: ServingWorkload) -> dict[str, Any]:
    """The `monitoring.coreos.com/v1` PodMonitor spec that has Prometheus scrape the workload's vLLM servers
    ([PROMOP]): its own pods (the Deployment's selector), the named container port, `/metrics`. No `jobLabel`, so
    every sample's `job` is `<namespace>/<PodMonitor name>` (`serving_policies.scrape_job`), which the queue rule's
    query selects on."""
    return {
        "selector": {"matchLabels": serving_labels(workload)},
        "podMetricsEndpoints": [{"port": "http", "path": METRICS_PATH}],
    }
