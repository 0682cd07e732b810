"""Kueue: the job queueing controller the training platform's queues, gang admission and topology-aware placement
run on (pure, no Pulumi). Its queues are planned in `components.planning.queues`; this module is the release.

Invariants, each confirmed at Kueue v0.19.2 ([KUEUE] tag v0.19.2, commit 8eab6877; chart kueue-0.19.2):
- the controller runs on the system pool (chart values `controllerManager.nodeSelector` / `tolerations`), at Pod
  Security `restricted` (its chart's pod and container security contexts);
- the integrations are the job kinds the platform submits: `batch/job` and `jobset.x-k8s.io/jobset`. No pods,
  Deployments or StatefulSets: serving workloads are not queued;
- `waitForPodsReady` is always on in v0.19 (pkg/features `DisableWaitForPodsReady`, alpha, default false, says
  so); its timeout, recovery timeout and requeueing come from `workloads.queues.admission`;
- resources a ClusterQueue does not cover (cpu, memory, hugepages, ephemeral-storage) are ignored
  (`resources.quotaCheckStrategy: IgnoreUndeclared`). Without it Kueue's default, `BlockUndeclared`
  (cmd/kueue/main.go `quotaCheckStrategy`), leaves every job that asks for CPU inadmissible: the flavor assigner
  reports "resource cpu unavailable in ClusterQueue" for any requested resource no resource group covers
  (pkg/scheduler/flavorassigner). The queues limit the scarce devices (GPUs, EFA); cpu and memory are bounded by
  the nodes a flavor's pods land on;
- feature gates: `TopologyAwareScheduling` (beta, default on since 0.14) and `QuotaCheckStrategy` (beta, default
  on since 0.19) are named explicitly, so an upgrade that changes a default cannot turn them off silently.
  `ProvisioningACC` (the ProvisioningRequest admission check) and `LocalQueueDefaulting` (a job without a queue
  label goes to the namespace's LocalQueue `default`) graduated and were removed from the gate list (commits
  efda8192 and 48812543): both are always on, and naming them would stop the controller (an unknown gate).
Why these choices: docs/training.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import yaml

from components.config import GangAdmission
from components.planning.addons.placement import SYSTEM_NODE_SELECTOR, system_plans, tolerations_for
from components.planning.pools import PoolPlan

KUEUE_RELEASE = "kueue"
#: The chart's default image is a staging build of the release branch, pulled `Always` ([KUEUE] chart values
#: `controllerManager.manager.image`); the release's own image is pinned instead.
KUEUE_IMAGE_REPOSITORY = "registry.k8s.io/kueue/kueue"
KUEUE_CONFIG_API = "config.kueue.x-k8s.io/v1beta2"
#: Job kinds Kueue manages ([KUEUE] apis/config/v1beta2 `Integrations.Frameworks`).
KUEUE_INTEGRATIONS: tuple[str, ...] = ("batch/job", "jobset.x-k8s.io/jobset")
#: Gates named on the controller's command line, with the value the platform relies on.
KUEUE_FEATURE_GATES: dict[str, bool] = {"TopologyAwareScheduling": True, "QuotaCheckStrategy": True}
#: Kueue's webhook port: the API server calls it for every Job and JobSet created (chart values `webhook.port`,
#: `webhookService.ports`).
KUEUE_WEBHOOK_PORT = 9443


def wait_for_pods_ready(admission: GangAdmission) -> dict[str, Any]:
    """Kueue's `waitForPodsReady` ([KUEUE] apis/config/v1beta2 `WaitForPodsReady`, `RequeuingStrategy`): an admitted
    job whose pods are not all ready within `timeout` is evicted (its pods deleted) and requeued after a backoff;
    `blockAdmission` stays off, so one job waiting for nodes does not stop every other queue."""
    requeuing: dict[str, Any] = {
        "timestamp": "Eviction",
        "backoffBaseSeconds": admission.backoff_base_seconds,
        "backoffMaxSeconds": admission.backoff_max_seconds,
    }
    if admission.backoff_limit_count is not None:
        requeuing["backoffLimitCount"] = admission.backoff_limit_count
    return {
        "timeout": admission.timeout,
        "recoveryTimeout": admission.recovery_timeout or admission.timeout,
        "blockAdmission": False,
        "requeuingStrategy": requeuing,
    }


def manager_config(admission: GangAdmission) -> dict[str, Any]:
    """The controller's Configuration, the chart's defaults for health, metrics, webhook and leader election kept."""
    return {
        "apiVersion": KUEUE_CONFIG_API,
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": ":8081"},
        "metrics": {"bindAddress": ":8443"},
        "webhook": {"port": KUEUE_WEBHOOK_PORT},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        "waitForPodsReady": wait_for_pods_ready(admission),
        "integrations": {"frameworks": list(KUEUE_INTEGRATIONS)},
        "resources": {"quotaCheckStrategy": "IgnoreUndeclared"},
    }


def kueue_values(plans: Sequence[PoolPlan], admission: GangAdmission, app_version: str) -> dict[str, Any]:
    """Helm values: the controller on the system pool with the release's image, the feature gates and the manager
    configuration above."""
    return {
        "controllerManager": {
            "featureGates": [{"name": name, "enabled": on} for name, on in KUEUE_FEATURE_GATES.items()],
            "manager": {
                "image": {"repository": KUEUE_IMAGE_REPOSITORY, "tag": app_version, "pullPolicy": "IfNotPresent"}
            },
            "nodeSelector": dict(SYSTEM_NODE_SELECTOR),
            "tolerations": tolerations_for(system_plans(plans)),
        },
        "managerConfig": {"controllerManagerConfigYaml": yaml.safe_dump(manager_config(admission), sort_keys=False)},
    }
