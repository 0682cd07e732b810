"""Shared storage of a cluster: FSx for Lustre for training, EFS or an existing NFS server for inference.

`SharedStorage` builds whatever `storage:` in the stack config asks for, and nothing when it asks for nothing.
Each file system is its own component (`LustreStorage`, `EfsStorage`, `ExistingNfsStorage`); this one gathers the
stack outputs: file system ids and the claims pods mount. The claim namespaces are the stack's workload namespaces
(`components.namespaces`), created before any claim.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pulumi

from components.config import StorageConfig
from components.context import ClusterContext
from components.planning.pools import PoolPlan
from components.storage.efs import EfsStorage
from components.storage.lustre import LustreStorage
from components.storage.nfs import ExistingNfsStorage

__all__ = ["EfsStorage", "ExistingNfsStorage", "LustreStorage", "SharedStorage"]


class SharedStorage(pulumi.ComponentResource):
    """The file systems `storage:` asks for, built from that section of the config alone."""

    def __init__(
        self,
        name: str,
        ctx: ClusterContext,
        storage: StorageConfig,
        pool_plans: Sequence[PoolPlan],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpu-clusters:index:SharedStorage", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        # The claim namespaces are the stack's workload namespaces, created with their labels beforehand.
        self.namespaces = ctx.namespaces
        self.lustre: LustreStorage | None = None
        if storage.lustre is not None:
            self.lustre = LustreStorage(
                f"{name}-{storage.lustre.name}", ctx, storage.lustre, pool_plans, self.namespaces, child
            )
        self.nfs: EfsStorage | ExistingNfsStorage | None = None
        if storage.nfs is not None:
            kind = EfsStorage if storage.nfs.kind == "efs" else ExistingNfsStorage
            self.nfs = kind(f"{name}-{storage.nfs.name}", ctx, storage.nfs, pool_plans, self.namespaces, child)
        self.register_outputs({})

    def exports(self) -> dict[str, Any]:
        """Stack outputs: what a training or inference job needs to mount the volumes."""
        out: dict[str, Any] = {}
        if self.lustre is not None:
            out |= {
                "lustreFileSystemId": self.lustre.file_system_id,
                "lustreDnsName": self.lustre.dns_name,
                "lustreMountName": self.lustre.mount_name,
                "lustreClaim": f"{self.lustre.namespace}/{self.lustre.claim_name}",
            }
            if self.lustre.bucket_name is not None:
                out["lustreDataBucket"] = self.lustre.bucket_name
        if isinstance(self.nfs, EfsStorage):
            out |= {"efsFileSystemId": self.nfs.file_system_id}
        if isinstance(self.nfs, ExistingNfsStorage):
            out |= {"nfsServer": self.nfs.server}
        if self.nfs is not None:
            out["nfsClaim"] = f"{self.nfs.namespace}/{self.nfs.claim_name}"
        return out
