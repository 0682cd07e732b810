"""The reference training job, planned from `workloads.training` (pure, no Pulumi): a JobSet of torchrun workers,
one per node, each taking every GPU, EFA device and huge page of its node, NCCL over EFA, the Lustre claim for its
checkpoints (the data is synthetic), submitted to the namespace's LocalQueue and placed by network topology.

The stack never starts GPU work by itself: it creates the script's ConfigMap only, and `blueprint training-job`
prints `jobset_manifest` for the user to apply. The failure policy restarts the whole job from its last checkpoint;
a node failure (a pod's `DisruptionTarget` condition) fails the Job with reason `PodFailurePolicy`, which restarts
the JobSet without counting against `maxRestarts`; any other failure (backoffLimit 0) counts ([JOBSETAPI] v0.12.0
`FailurePolicyRule`, [K8SPFP]). Each worker serves the script's metrics, which the stack's PodMonitor has Prometheus
scrape (`pod_monitor`). Why and the figures: docs/training.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from components.catalog.images import image
from components.config import StackConfig, TrainingModel, TrainingWorkload
from components.planning.addons.placement import tolerations_for
from components.planning.dra import (
    allocates_through_dra,
    claim_template_name,
    claim_template_spec,
    container_claims,
    pod_claims,
)
from components.planning.hugepages import HUGEPAGES_RESOURCE, hugepages_quantity
from components.planning.lustre import throughput_mbps
from components.planning.nccl_environment import nccl_environment
from components.planning.pools import GPU_RESOURCE, PoolPlan
from components.planning.storage import claim_name
from components.planning.training_platform import LOCAL_QUEUE_NAME, PREFERRED_TOPOLOGY_LEVEL, QUEUE_NAME_LABEL
from components.tags import POOL

JOBSET_API_VERSION = "jobset.x-k8s.io/v1alpha2"
EFA_RESOURCE = "vpc.amazonaws.com/efa"
#: The one replicated job: its pods are `<job>-workers-0-<index>`, reachable as `<pod>.<job>` through the headless
#: Service JobSet creates (`network.enableDNSHostnames`, subdomain the JobSet's name by default).
REPLICATED_JOB = "workers"
#: The annotation that asks Kueue to place a pod set within one domain of a topology level, relaxing to a coarser one
#: when none holds it (Kueue topology-aware scheduling).
PREFERRED_TOPOLOGY_ANNOTATION = "kueue.x-k8s.io/podset-preferred-topology"
#: torchrun's rendezvous port on worker 0.
RENDEZVOUS_PORT = 29500
#: Where each worker's first process serves `/metrics` (`programs.train_reference --metrics-port`): a port nothing
#: else in the pod listens on (the rendezvous port above; gloo's and NCCL's are ephemeral, above 32767), named so
#: the PodMonitor finds it.
METRICS_PORT = 9464
METRICS_PORT_NAME = "metrics"
METRICS_PATH = "/metrics"
#: What the script serves (`programs.train_reference.METRICS`, which a test holds to this list): the job's step and
#: loss, each node's steps, step time and samples, checkpoint saves and their time, the step a run resumed from and
#: the JobSet's restart attempt. The training dashboard reads them.
TRAINING_METRICS: tuple[str, ...] = tuple(
    f"train_reference_{key}"
    for key in (
        "step",
        "loss",
        "steps_total",
        "step_seconds_total",
        "samples_total",
        "checkpoint_saves_total",
        "checkpoint_save_seconds",
        "resumed_step",
        "restarts",
    )
)
#: Labels the JobSet controller puts on every pod of a JobSet: its name, and the restart attempt the pod belongs to
#: ([JOBSETAPI] `JobSetNameKey`; pkg/constants `RestartsKey`, "an annotation and label key").
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
RESTART_ATTEMPT_LABEL = "jobset.sigs.k8s.io/restart-attempt"
#: The variable the script reads the restart attempt from (`programs.train_reference.RESTART_ATTEMPT_ENV`).
RESTART_ATTEMPT_ENV = "JOBSET_RESTART_ATTEMPT"
#: The label every scraped training sample carries: the JobSet's name, which the dashboard groups by.
JOBSET_METRIC_LABEL = "jobset"
#: Where the container finds the script (the ConfigMap) and the Lustre claim.
SCRIPT_DIR = "/opt/train"
SCRIPT_FILE = "train_reference.py"
LUSTRE_MOUNT = "/mnt/lustre"
#: Memory each worker requests besides its huge pages, as AWS's EFA NCCL workers do ([ADTNCCL]).
WORKER_MEMORY = "32000Mi"
#: The failure policy's rules ([JOBSETAPI] v0.12.0): the first that matches a failed Job acts.
NODE_FAILURE_RULE = "nodeFailure"
JOB_FAILURE_RULE = "jobFailure"
#: What a Job's `podFailurePolicy` `FailJob` action sets as the failed Job's reason ([K8SPFP]).
POD_FAILURE_POLICY_REASON = "PodFailurePolicy"
#: The script's input and output features (`programs.train_reference` INPUT_SIZE, OUTPUT_SIZE).
SCRIPT_INPUTS = 64
SCRIPT_OUTPUTS = 8
#: A checkpoint holds the fp32 weights and Adam's two fp32 moments per parameter (torch.optim.Adam state
#: `exp_avg`, `exp_avg_sq`, each the parameter's shape): 3 x 4 bytes.
CHECKPOINT_BYTES_PER_PARAMETER = 12


@dataclass(frozen=True)
class TrainingJobPlan:
    """The reference job: its config, the pool it runs on, and what it needs from the stack."""

    workload: TrainingWorkload
    pool: PoolPlan
    namespace: str
    claim: str
    uid: int
    gid: int
    #: The Lustre file system's aggregate throughput, MB/s (`components.planning.lustre.throughput_mbps`).
    lustre_mbps: float
    #: Whether the pool's ResourceFlavor names the Topology: only then may the job ask for topology placement
    #: (Kueue finds no flavor for a pod set that asks for it on a flavor without one).
    topology: bool = False

    @property
    def name(self) -> str:
        return self.workload.name

    @property
    def gpus(self) -> int:
        return self.workload.nodes * self.pool.gpus_per_node

    @property
    def efa_devices(self) -> int:
        return self.workload.nodes * self.pool.efa_devices

    @property
    def checkpoint_bytes(self) -> int:
        return checkpoint_bytes(self.workload.model)

    @property
    def checkpoint_write_seconds(self) -> float:
        return checkpoint_write_seconds(self.checkpoint_bytes, self.lustre_mbps)

    @property
    def image(self) -> str:
        return self.workload.image or image("pytorch-training").reference

    @property
    def directory(self) -> str:
        """The job's directory in the container: under the namespace's own directory on Lustre, the only one its
        non-root user may write (`components.planning.lustre_directories`)."""
        return f"{LUSTRE_MOUNT}/{self.name}"

    @property
    def checkpoint_dir(self) -> str:
        return f"{self.directory}/checkpoints"


def model_parameters(model: TrainingModel) -> int:
    """The script's MLP (`programs.train_reference.build_model`): a linear layer from its inputs to `hiddenSize`,
    `layers - 1` square ones, one to its outputs, each with a bias."""
    h = model.hidden_size
    return (SCRIPT_INPUTS + 1) * h + (model.layers - 1) * (h * h + h) + (h + 1) * SCRIPT_OUTPUTS


def checkpoint_bytes(model: TrainingModel) -> int:
    return model_parameters(model) * CHECKPOINT_BYTES_PER_PARAMETER


def checkpoint_write_seconds(size_bytes: int, throughput_mbps: float) -> float:
    """Seconds to write a checkpoint at the file system's aggregate throughput (MB/s, 10^6 bytes)."""
    return round(size_bytes / (throughput_mbps * 1e6), 1) if throughput_mbps > 0 else float("inf")


def script_config_map(name: str) -> str:
    """The ConfigMap holding the script's source."""
    return f"{name}-script"


def plan_training_job(
    spec: StackConfig, pools: list[PoolPlan], topology_flavors: frozenset[str] = frozenset()
) -> TrainingJobPlan | None:
    """The job from a validated stack (validation guarantees the pool, the Lustre claim and its directory)."""
    workload, lustre = spec.workloads.training, spec.storage.lustre
    if workload is None or lustre is None:
        return None
    pool = next(p for p in pools if p.name == workload.pool)
    directories = lustre.workload_directories
    return TrainingJobPlan(
        workload=workload,
        pool=pool,
        namespace=workload.namespace or lustre.kubernetes.namespace,
        claim=claim_name(lustre.kubernetes, lustre.name),
        uid=directories.uid,
        gid=directories.gid,
        lustre_mbps=throughput_mbps(lustre),
        topology=pool.name in topology_flavors,
    )


def failure_policy(max_restarts: int) -> dict[str, Any]:
    """Restart the whole JobSet on any failure; a node failure restarts it without counting against
    `maxRestarts`, a failure of the job itself counts."""
    return {
        "maxRestarts": max_restarts,
        "rules": [
            {
                "name": NODE_FAILURE_RULE,
                "action": "RestartJobSetAndIgnoreMaxRestarts",
                "onJobFailureReasons": [POD_FAILURE_POLICY_REASON],
            },
            {"name": JOB_FAILURE_RULE, "action": "RestartJobSet"},
        ],
    }


#: A pod that fails after Kubernetes marked it a disruption target (eviction, node loss, preemption, graceful node
#: shutdown) fails its Job at once with reason `PodFailurePolicy` ([K8SPFP]).
POD_FAILURE_POLICY: dict[str, Any] = {
    "rules": [{"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]
}


def worker_command(plan: TrainingJobPlan) -> list[str]:
    """torchrun: one process per GPU, static rendezvous on worker 0, this worker's rank from its completion index."""
    w = plan.workload
    master = f"{plan.name}-{REPLICATED_JOB}-0-0.{plan.name}"
    return [
        "torchrun",
        f"--nnodes={w.nodes}",
        f"--nproc-per-node={plan.pool.gpus_per_node}",
        "--node-rank=$(NODE_RANK)",
        f"--master-addr={master}",
        f"--master-port={RENDEZVOUS_PORT}",
        f"{SCRIPT_DIR}/{SCRIPT_FILE}",
        f"--steps={w.steps}",
        f"--checkpoint-interval={w.checkpoint_interval}",
        f"--checkpoint-dir={plan.checkpoint_dir}",
        f"--layers={w.model.layers}",
        f"--hidden-size={w.model.hidden_size}",
        f"--metrics-port={METRICS_PORT}",
    ]


def worker_env(plan: TrainingJobPlan) -> list[dict[str, Any]]:
    instance = plan.pool.instance
    fabric = nccl_environment(instance) if instance is not None and plan.pool.efa else {}
    index = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    return [
        {"name": "NODE_RANK", "valueFrom": {"fieldRef": {"fieldPath": index}}},
        {
            "name": RESTART_ATTEMPT_ENV,
            "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{RESTART_ATTEMPT_LABEL}']"}},
        },
        {"name": "PYTHONUNBUFFERED", "value": "1"},
        # No passwd entry for the numeric user: getpass.getuser() (torch's caches) reads USER first.
        {"name": "USER", "value": "trainer"},
        {"name": "HOME", "value": "/tmp"},
        {"name": "NCCL_DEBUG", "value": "INFO"},
        *({"name": k, "value": v} for k, v in fabric.items()),
    ]


def worker_resources(plan: TrainingJobPlan) -> dict[str, Any]:
    """Every GPU, EFA device and huge page of the node; extended resources as limits equal to requests. On a DRA
    pool the GPUs come through the pod's claim instead (`claim_template`); EFA stays the EFA device plugin's."""
    dra = allocates_through_dra(plan.pool)
    devices = {} if dra else {GPU_RESOURCE: str(plan.pool.gpus_per_node)}
    if plan.pool.efa:
        devices[EFA_RESOURCE] = str(plan.pool.efa_devices)
        devices[HUGEPAGES_RESOURCE] = hugepages_quantity(plan.pool)
    resources: dict[str, Any] = {"requests": {**devices, "memory": WORKER_MEMORY}}
    if devices:
        resources["limits"] = dict(devices)
    if dra:
        resources["claims"] = container_claims()
    return resources


def claim_template(plan: TrainingJobPlan) -> dict[str, Any] | None:
    """The ResourceClaimTemplate spec of the workers on a DRA pool (every GPU of the node, one claim per worker),
    which the stack creates beside the script (`components.training`); None on a device-plugin pool."""
    return claim_template_spec(plan.pool.gpus_per_node) if allocates_through_dra(plan.pool) else None


def pod_spec(plan: TrainingJobPlan) -> dict[str, Any]:
    """Pod Security `restricted`: the namespace directory's numeric user and group, RuntimeDefault seccomp, every
    capability dropped. EFA needs no IPC_LOCK: containers get no such capability on the EKS AMI either, root or not
    (nodeadm's containerd base runtime spec, [EKSRUNTIME]), and AWS's own EFA NCCL workers add none ([ADTNCCL])."""
    pod: dict[str, Any] = {
        "restartPolicy": "Never",
        "nodeSelector": {POOL: plan.pool.name},
        "tolerations": tolerations_for([plan.pool], critical_addons=False, startup=False),
        "automountServiceAccountToken": False,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": plan.uid,
            "runAsGroup": plan.gid,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [
            {
                "name": "trainer",
                "image": plan.image,
                "command": worker_command(plan),
                "env": worker_env(plan),
                "ports": [
                    {"name": "rendezvous", "containerPort": RENDEZVOUS_PORT},
                    {"name": METRICS_PORT_NAME, "containerPort": METRICS_PORT},
                ],
                "resources": worker_resources(plan),
                "securityContext": {
                    "allowPrivilegeEscalation": False,
                    "capabilities": {"drop": ["ALL"]},
                    "runAsNonRoot": True,
                    "seccompProfile": {"type": "RuntimeDefault"},
                },
                "volumeMounts": [
                    {"name": "script", "mountPath": SCRIPT_DIR, "readOnly": True},
                    {"name": "lustre", "mountPath": LUSTRE_MOUNT, "subPath": plan.namespace},
                    {"name": "dshm", "mountPath": "/dev/shm"},
                ],
            }
        ],
        "volumes": [
            {"name": "script", "configMap": {"name": script_config_map(plan.name)}},
            {"name": "lustre", "persistentVolumeClaim": {"claimName": plan.claim}},
            {"name": "dshm", "emptyDir": {"medium": "Memory"}},
        ],
    }
    if allocates_through_dra(plan.pool):
        pod["resourceClaims"] = pod_claims(claim_template_name(plan.name))
    return pod


def jobset_manifest(plan: TrainingJobPlan) -> dict[str, Any]:
    """The JobSet the user applies: one Job of `nodes` indexed pods that fails on its first failed pod
    (`backoffLimit: 0`), so the JobSet's failure policy restarts every worker together from the last checkpoint."""
    nodes = plan.workload.nodes
    return {
        "apiVersion": JOBSET_API_VERSION,
        "kind": "JobSet",
        "metadata": {
            "name": plan.name,
            "namespace": plan.namespace,
            "labels": {QUEUE_NAME_LABEL: LOCAL_QUEUE_NAME},
        },
        "spec": {
            "network": {"enableDNSHostnames": True},
            "failurePolicy": failure_policy(plan.workload.max_restarts),
            "replicatedJobs": [
                {
                    "name": REPLICATED_JOB,
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "completionMode": "Indexed",
                            "parallelism": nodes,
                            "completions": nodes,
                            "backoffLimit": 0,
                            "podFailurePolicy": POD_FAILURE_POLICY,
                            "template": {
                                "metadata": {
                                    "annotations": (
                                        {PREFERRED_TOPOLOGY_ANNOTATION: PREFERRED_TOPOLOGY_LEVEL}
                                        if plan.topology
                                        else {}
                                    ),
                                },
                                "spec": pod_spec(plan),
                            },
                        }
                    },
                }
            ],
        },
    }


def pod_monitor(plan: TrainingJobPlan, labels: dict[str, str]) -> dict[str, Any]:
    """The PodMonitor that has Prometheus scrape every worker of the JobSet ([PROMOP] PodMonitor: `selector`,
    `podMetricsEndpoints[].port`, `relabelings`): in the job's namespace, selecting its pods by the JobSet's name
    label, each sample labelled `jobset` with it. `labels` is what Prometheus selects PodMonitors by
    (`monitoring.POD_MONITOR_LABELS`). It exists before the job does: Prometheus finds the workers when they start."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PodMonitor",
        "metadata": {"name": plan.name, "namespace": plan.namespace, "labels": dict(labels)},
        "spec": {
            "selector": {"matchLabels": {JOBSET_NAME_LABEL: plan.name}},
            "podMetricsEndpoints": [
                {
                    "port": METRICS_PORT_NAME,
                    "path": METRICS_PATH,
                    "relabelings": [
                        {
                            "sourceLabels": [
                                f"__meta_kubernetes_pod_label_{re.sub(r'[^a-zA-Z0-9_]', '_', JOBSET_NAME_LABEL)}"
                            ],
                            "targetLabel": JOBSET_METRIC_LABEL,
                        }
                    ],
                }
            ],
        },
    }


def training_summary(plan: TrainingJobPlan) -> dict[str, Any]:
    """The plan summary's figures of the job."""
    return {
        "name": plan.name,
        "namespace": plan.namespace,
        "pool": plan.pool.name,
        "nodes": plan.workload.nodes,
        "gpus": plan.gpus,
        "efaDevices": plan.efa_devices,
        "maxRestarts": plan.workload.max_restarts,
        "modelParameters": model_parameters(plan.workload.model),
        "checkpointBytes": plan.checkpoint_bytes,
        "lustreThroughputMBps": plan.lustre_mbps,
        "checkpointWriteSeconds": plan.checkpoint_write_seconds,
    }
