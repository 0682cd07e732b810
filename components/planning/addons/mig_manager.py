"""NVIDIA k8s-mig-manager, the DaemonSet that partitions a MIG pool's GPUs (pure, no Pulumi).

The standalone manager of mig-parted ([MIGPARTED]), not the GPU Operator's, with the operator's narrower RBAC
([GPUOP]); it runs only on MIG pools (label `nvidia.com/mig.config` present). Why and sources:
docs/design-notes.md#the-standalone-mig-manager; the user view: docs/gpu-sharing.md#design-choices-and-trade-offs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import yaml

from components.catalog.images import image
from components.planning.addons.placement import NODE_CRITICAL, tolerations_for
from components.planning.mig import mig_parted_config, mig_plans
from components.planning.pools import GPU_PRESENT_LABEL, MIG_CONFIG_LABEL, PoolPlan

NAMESPACE = "nvidia-mig-manager"
#: A namespace of its own: it runs one privileged, host-PID pod per MIG node and nothing else, so it alone is
#: labelled `privileged` for it (components.planning.namespaces).
NAME = "nvidia-mig-manager"
#: The manager image: v0.15.0 is the newest mig-parted release and the one GPU Operator v26.7.0 pins
#: ([MIGPARTED] tag v0.15.0; [GPUOP] deployments/gpu-operator/values.yaml `migManager.version`). Pinned in the
#: catalog (`images.yaml`), by tag only: no digest of it could be confirmed offline.
IMAGE = image("k8s-mig-manager").reference
CONFIG_MAP = "mig-parted-config"
CLIENTS_CONFIG_MAP = "gpu-clients"
CONFIG_DIR = "/mig-parted-config"
CLIENTS_DIR = "/gpu-clients"
#: Host services that hold GPUs and are stopped while MIG mode changes: the list the GPU Operator passes for
#: preinstalled drivers ([GPUOP] assets/state-mig-manager/0410_configmap.yaml); services a host lacks are skipped.
HOST_GPU_CLIENTS = (
    "nvsm.service",
    "nvsm-mqtt.service",
    "nvsm-core.service",
    "nvsm-api-gateway.service",
    "nvsm-notifier.service",
    "nv_peer_mem.service",
    "nvidia-dcgm.service",
    "dcgm.service",
    "dcgm-exporter.service",
)


def config_file(plans: Sequence[PoolPlan]) -> str:
    """`config.yaml` of the mig-parted ConfigMap: one named config per MIG pool (components.planning.mig)."""
    return yaml.safe_dump(mig_parted_config(plans), sort_keys=False)


def clients_file() -> str:
    """`clients.yaml` of the gpu-clients ConfigMap ([MIGPARTED] example: `version: v1`, `systemd-services:`)."""
    return yaml.safe_dump({"version": "v1", "systemd-services": list(HOST_GPU_CLIENTS)}, sort_keys=False)


def environment() -> dict[str, str]:
    """The manager's settings beyond the pod's own name and namespace ([MIGPARTED] cmd/nvidia-mig-manager flags).

    `WITH_SHUTDOWN_HOST_GPU_CLIENTS` as the operator sets it for a host driver. `WITH_REBOOT=true`: turning MIG
    mode on needs every process holding the GPU gone (MIG user guide, "Deployment Considerations"), and on a fresh
    node DCGM exporters (Container Insights', or the Prometheus path's) may already hold it; the mode then stays
    pending, and the manager reboots the node once so the driver applies it at load, as NVIDIA advises for cloud
    instances ([GPUOP] "GPU Operator with MIG": `WITH_REBOOT=true` in a cloud environment). The node keeps its name
    and labels across the reboot; the manager then creates the MIG devices, which needs no reset.

    `HOST_KUBELET_SYSTEMD_SERVICE` is empty: with a name, the manager adds the kubelet to the host services it stops
    and restarts around a MIG mode change (pkg/mig/reconfigure `checkMigModeChangeRequired` appends it only when
    the value is not empty; an empty variable does set the string flag to empty, [MIGMGR] vendored urfave/cli v3
    `flag_impl.go`). Restarting the kubelet that way on the AL2023 EKS AMIs (cgroup v2) is reported to leave
    containerd's cgroup state corrupt and the node NotReady for good ([MIGKUBELET]); without it a mode change
    that a GPU client blocks takes the reboot path above instead."""
    return {
        "CONFIG_FILE": f"{CONFIG_DIR}/config.yaml",
        "GPU_CLIENTS_FILE": f"{CLIENTS_DIR}/clients.yaml",
        "HOST_ROOT_MOUNT": "/host",
        "HOST_NVIDIA_DIR": "/usr/local/nvidia",
        "HOST_KUBELET_SYSTEMD_SERVICE": "",
        "DEFAULT_GPU_CLIENTS_NAMESPACE": NAMESPACE,
        "WITH_SHUTDOWN_HOST_GPU_CLIENTS": "true",
        "WITH_REBOOT": "true",
    }


def placement(plans: Sequence[PoolPlan]) -> dict[str, Any]:
    """Where the manager runs: GPU nodes that carry a MIG config label, tolerating every MIG pool's taints, at
    node-critical priority like the device plugin."""
    pools = mig_plans(plans)
    return {
        "priorityClassName": NODE_CRITICAL,
        "tolerations": tolerations_for(pools),
        "matchExpressions": [
            {"key": GPU_PRESENT_LABEL, "operator": "In", "values": ["true"]},
            {"key": MIG_CONFIG_LABEL, "operator": "Exists"},
        ],
    }


#: RBAC, as the GPU Operator grants its manager: read and label its own node, list pods cluster-wide (it waits for
#: GPU clients to leave), and in its own namespace read and delete pods and write its per-node ConfigMap.
CLUSTER_RULES: tuple[dict[str, Any], ...] = (
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "update", "patch"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
)
NAMESPACE_RULES: tuple[dict[str, Any], ...] = (
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "delete"]},
    {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create", "get", "list", "update", "patch"]},
)
