"""An existing NFS server (on-prem, next to hybrid GPU nodes) as the shared inference volume, bound statically.

Invariants: the stack provisions nothing on the server (a PersistentVolume names server and export, the claim binds
it by name); csi-driver-nfs's node plugin mounts it on every pool, tolerating every taint, resolving the server with
its node's resolver. Why and sources: docs/design-notes.md#an-existing-nfs-server-bound-statically; the user view:
docs/storage.md#an-existing-nfs-server-storagenfs-kind-existing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.addons.helm import helm_release
from components.catalog import versions
from components.config import NfsConfig
from components.context import ClusterContext
from components.planning.pools import PoolPlan
from components.planning.storage import (
    NFS_CSI_DRIVER,
    claim_name,
    nfs_mount_options,
    nfs_node_affinity,
    nfs_pools,
    nfs_volume_handle,
)
from components.planning.tolerations import key_tolerations
from components.storage import volumes

CHART = "csi-driver-nfs"


def chart_values(pool_plans: Sequence[PoolPlan]) -> dict[str, Any]:
    """csi-driver-nfs chart values (chart `values.yaml`: `controller.*`, `node.*`): the node plugin only.

    The controller creates and deletes sub-directories for dynamically provisioned volumes and snapshots; a static
    volume uses neither, so it gets no replica and nothing waits for it to reach the server. The node plugin's
    `dnsPolicy` (chart default `ClusterFirstWithHostNet`) becomes `Default`, the node's own resolver.
    """
    return {
        "controller": {"replicas": 0},
        "node": {"tolerations": key_tolerations(pool_plans), "dnsPolicy": "Default"},
    }


def volume_attributes(config: NfsConfig) -> dict[str, str]:
    """The static PersistentVolume's `csi.volumeAttributes`: `server` and `share` are required
    (csi-driver-nfs docs/driver-parameters.md, "PV/PVC usage (static provisioning)")."""
    if not config.server or not config.share:
        raise ValueError("storage.nfs: an existing NFS server needs `server` and `share`")
    return {"server": config.server, "share": config.share}


def _node_affinity_args(affinity: Mapping[str, Any]) -> k8s.core.v1.VolumeNodeAffinityArgs:
    """The planned `VolumeNodeAffinity` as the provider's typed arguments."""
    terms = [
        k8s.core.v1.NodeSelectorTermArgs(
            match_expressions=[
                k8s.core.v1.NodeSelectorRequirementArgs(key=e["key"], operator=e["operator"], values=list(e["values"]))
                for e in term["matchExpressions"]
            ]
        )
        for term in affinity["required"]["nodeSelectorTerms"]
    ]
    return k8s.core.v1.VolumeNodeAffinityArgs(required=k8s.core.v1.NodeSelectorArgs(node_selector_terms=terms))


class ExistingNfsStorage(pulumi.ComponentResource):
    """csi-driver-nfs's node plugin, a PersistentVolume on an existing server's export, and the claim bound to it."""

    def __init__(
        self,
        name: str,
        ctx: ClusterContext,
        config: NfsConfig,
        pool_plans: Sequence[PoolPlan],
        namespaces: Mapping[str, pulumi.Resource] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpu-clusters:index:ExistingNfsStorage", name, None, opts)
        self.config = config
        self.pools = nfs_pools(config, pool_plans)
        base = f"{ctx.cluster_name_plain}-{config.name}"
        attributes = volume_attributes(config)
        self.server = f"{attributes['server']}:{attributes['share']}"

        self.release = helm_release(
            f"{base}-{CHART}",
            CHART,
            versions.chart(CHART),
            volumes.KUBE_SYSTEM,
            chart_values(pool_plans),
            ctx,
            self,
        )
        volume = config.kubernetes
        self.namespace = volume.namespace
        self.claim_name = claim_name(volume, config.name)
        self.mount_options = nfs_mount_options(config.mount, config.mount_options)
        # Cluster-scoped, so named after the claim it is reserved for, as the Lustre volume is.
        self.volume_name = f"{self.namespace}-{self.claim_name}"
        waits: list[pulumi.Resource] = []
        if self.namespace in (namespaces or {}):
            waits.append((namespaces or {})[self.namespace])
        # Binding a static volume is the API server's own work (no CSI call); the node plugin is needed only when
        # a pod mounts, so neither object waits for the chart.
        self.persistent_volume = k8s.core.v1.PersistentVolume(
            f"{base}-pv",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=self.volume_name, labels=volumes.storage_labels(config.name)),
            spec=k8s.core.v1.PersistentVolumeSpecArgs(
                capacity={"storage": volumes.quantity(config.capacity_gib)},
                volume_mode="Filesystem",
                access_modes=volumes.ACCESS_MODES,
                persistent_volume_reclaim_policy=volumes.RECLAIM_POLICY,
                storage_class_name="",
                mount_options=self.mount_options,
                # Only nodes of the pools that reach the server (they carry the volume's node label): another
                # pool's pod claiming it stays Pending, visibly. A label, so pool changes never touch the volume.
                node_affinity=_node_affinity_args(nfs_node_affinity(config.name)),
                # Reserved for our claim: no other claim in the cluster can bind the share by accident.
                claim_ref=k8s.core.v1.ObjectReferenceArgs(namespace=self.namespace, name=self.claim_name),
                csi=k8s.core.v1.CSIPersistentVolumeSourceArgs(
                    driver=NFS_CSI_DRIVER,
                    volume_handle=nfs_volume_handle(attributes["server"], attributes["share"]),
                    volume_attributes=attributes,
                ),
            ),
            opts=volumes.k8s_options(ctx, self, waits),
        )
        self.claim = volumes.claim(
            f"{base}-pvc",
            claim_name=self.claim_name,
            namespace=self.namespace,
            capacity_gib=config.capacity_gib,
            storage_class="",
            volume_name=self.volume_name,
            file_system=config.name,
            opts=volumes.k8s_options(ctx, self, [*waits, self.persistent_volume]),
        )
        self.register_outputs({"server": self.server, "claimName": self.claim_name, "namespace": self.namespace})
