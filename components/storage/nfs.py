"""An existing NFS server (on-prem, next to hybrid GPU nodes) as the shared inference volume.

The stack does not create the server; it installs `csi-driver-nfs` (pinned in the versions catalog), a
StorageClass pointing at the server's export, and a claim. Each claim becomes a sub-directory of the share
(dynamic provisioning in csi-driver-nfs, aws-gpu-facts.md §4 [NFS]); the class keeps it when the claim goes
(`Retain`), because on a shared server the data is usually someone else's too.

Placement matters more than for EFS:
* the node plugin (a DaemonSet) must run on every node that mounts, tainted GPU nodes and hybrid nodes included,
  so it tolerates the pools' taints;
* the controller mounts the share to create and remove those sub-directories, so it must reach the server; it
  prefers the pools that mount the volume (for an on-prem server, the hybrid pools beside it) and tolerates their
  taints. It uses the host network (chart default), so it reaches the server as its node does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components import tags
from components.addons.helm import helm_release
from components.catalog import versions
from components.config import NfsConfig
from components.context import ClusterContext
from components.planning.pools import PoolPlan
from components.planning.storage import NFS_CSI_DRIVER, claim_name, nfs_pools
from components.planning.tolerations import key_tolerations
from components.storage import volumes

CHART = "csi-driver-nfs"
#: Of the chart's default controller tolerations (csi-driver-nfs chart values, `controller.tolerations`), the ones
#: that mean something on EKS; setting the value replaces the whole list, so they are repeated here.
CONTROLLER_DEFAULT_TOLERATIONS: list[dict[str, str]] = [
    {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "CriticalAddonsOnly", "operator": "Exists", "effect": "NoSchedule"},
]


def chart_values(pool_plans: Sequence[PoolPlan], mounting: Sequence[PoolPlan]) -> dict[str, Any]:
    """csi-driver-nfs chart values (chart `values.yaml`: `controller.*`, `node.*`)."""
    tolerations = key_tolerations(pool_plans)
    controller: dict[str, Any] = {"tolerations": [*CONTROLLER_DEFAULT_TOLERATIONS, *tolerations]}
    if mounting:
        controller["affinity"] = {
            "nodeAffinity": {
                # The chart renders `controller.affinity` only when it contains `nodeSelectorTerms`
                # (kubernetes-csi/csi-driver-nfs @d3b27c00, charts/v4.13.4/csi-driver-nfs/templates/
                # csi-nfs-controller.yaml: `if tpl "{{ .Values.controller.affinity }}" . | contains
                # "nodeSelectorTerms"`) and silently drops a preference alone. The required term asks for what the
                # template's own nodeSelector already does (linux), so the preference below reaches the pod.
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]}
                    ]
                },
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "preference": {
                            "matchExpressions": [
                                {"key": tags.POOL, "operator": "In", "values": sorted(p.name for p in mounting)}
                            ]
                        },
                    }
                ],
            }
        }
    return {"controller": controller, "node": {"tolerations": tolerations}}


def storage_class_parameters(config: NfsConfig) -> dict[str, str]:
    """StorageClass parameters of csi-driver-nfs: `server` and `share` are required ([NFS] §4)."""
    if not config.server or not config.share:
        raise ValueError("storage.nfs: an existing NFS server needs `server` and `share`")
    return {"server": config.server, "share": config.share}


class ExistingNfsStorage(pulumi.ComponentResource):
    """csi-driver-nfs, a StorageClass on an existing server's export, and the claim pods mount."""

    def __init__(
        self,
        name: str,
        ctx: ClusterContext,
        config: NfsConfig,
        pool_plans: Sequence[PoolPlan],
        namespaces: Mapping[str, k8s.core.v1.Namespace] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpu-clusters:index:ExistingNfsStorage", name, None, opts)
        self.config = config
        self.pools = nfs_pools(config, pool_plans)
        base = f"{ctx.cluster_name_plain}-{config.name}"
        parameters = storage_class_parameters(config)
        self.server = f"{parameters['server']}:{parameters['share']}"

        self.release = helm_release(
            f"{base}-{CHART}",
            CHART,
            versions.chart(CHART),
            volumes.KUBE_SYSTEM,
            chart_values(pool_plans, self.pools),
            ctx,
            self,
        )
        volume = config.kubernetes
        self.namespace = volume.namespace
        self.claim_name = claim_name(volume, config.name)
        self.storage_class_name = f"{config.name}-nfs"
        self.storage_class = volumes.storage_class(
            f"{base}-sc",
            name=self.storage_class_name,
            provisioner=NFS_CSI_DRIVER,
            parameters=parameters,
            mount_options=config.mount_options,
            file_system=config.name,
            opts=volumes.k8s_options(ctx, self, [self.release]),
        )
        waits: list[pulumi.Resource] = [self.release, self.storage_class]
        if self.namespace in (namespaces or {}):
            waits.append((namespaces or {})[self.namespace])
        self.claim = volumes.claim(
            f"{base}-pvc",
            claim_name=self.claim_name,
            namespace=self.namespace,
            capacity_gib=config.capacity_gib,
            storage_class=self.storage_class_name,
            file_system=config.name,
            opts=volumes.k8s_options(ctx, self, waits),
        )
        self.register_outputs({"server": self.server, "claimName": self.claim_name, "namespace": self.namespace})
