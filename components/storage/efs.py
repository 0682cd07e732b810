"""Amazon EFS for inference: one regional file system with a mount target in every private subnet, and a claim.

Regional because inference pools spread over AZs ([BC] §4); encrypted with the cluster's KMS key; Elastic
throughput unless the stack says otherwise (the API default, Bursting, follows the amount stored). Pods get a
volume through the `aws-efs-csi-driver` add-on, one access point per claim. See
docs/storage.md#efs-storagenfs-kind-efs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_aws as aws

from components import tags
from components.addons.helm import service_account_role
from components.config import NfsConfig
from components.context import ClusterContext, stateful_options
from components.planning.efs_policy import efs_file_system_policy
from components.planning.pools import PoolPlan
from components.planning.storage import EFS_CSI_DRIVER, NFS_TCP_PORT, claim_name, nfs_pools
from components.planning.tolerations import key_tolerations
from components.storage import volumes

ADDON = "aws-efs-csi-driver"
#: The controller's service account in the add-on (aws-efs-csi-driver chart values, `controller.serviceAccount`).
CONTROLLER_SERVICE_ACCOUNT = "efs-csi-controller-sa"
#: The AWS managed policy the EKS user guide attaches to the EFS CSI controller role
#: (https://docs.aws.amazon.com/eks/latest/userguide/efs-csi.html); the Pod Identity helper qualifies it with the
#: stack's partition.
CONTROLLER_POLICY = "service-role/AmazonEFSCSIDriverPolicy"
#: AWS recommends General Purpose for every file system; Max I/O has higher latency (§4).
PERFORMANCE_MODE = "generalPurpose"
#: Access point root directories the driver creates per claim (aws-efs-csi-driver StorageClass `directoryPerms`).
DIRECTORY_PERMS = "700"


def addon_configuration(pool_plans: Sequence[PoolPlan]) -> dict[str, Any]:
    """Add-on configuration values (the driver chart's `node.tolerations`): the node plugin tolerates the pools'
    taints, so it runs on the tainted GPU nodes whose pods mount the claim."""
    return {"node": {"tolerations": key_tolerations(pool_plans)}}


def lifecycle_policies(config: NfsConfig) -> list[aws.efs.FileSystemLifecyclePolicyArgs]:
    """Move files not read for a while to Infrequent Access, and back on their first read: model weights are read
    in bursts when a model is (re)loaded, then sit."""
    if config.transition_to_ia == "NONE":
        return []
    return [
        aws.efs.FileSystemLifecyclePolicyArgs(transition_to_ia=config.transition_to_ia),
        aws.efs.FileSystemLifecyclePolicyArgs(transition_to_primary_storage_class="AFTER_1_ACCESS"),
    ]


class EfsStorage(pulumi.ComponentResource):
    """An EFS file system for the inference pools, mount targets in every private subnet, and the claim."""

    def __init__(
        self,
        name: str,
        ctx: ClusterContext,
        config: NfsConfig,
        pool_plans: Sequence[PoolPlan],
        namespaces: Mapping[str, pulumi.Resource] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpu-clusters:index:EfsStorage", name, None, opts)
        self.config = config
        self.pools = nfs_pools(config, pool_plans)
        base = f"{ctx.cluster_name_plain}-{config.name}"
        child = pulumi.ResourceOptions(parent=self)
        self.tags = {**ctx.tags, "Name": base}

        self.security_group = aws.ec2.SecurityGroup(
            f"{base}-sg",
            vpc_id=ctx.vpc_id,
            description=f"EFS {base}: NFS from the nodes",
            tags=self.tags,
            opts=child,
        )
        aws.vpc.SecurityGroupIngressRule(
            f"{base}-in-nodes-tcp-{NFS_TCP_PORT}",
            security_group_id=self.security_group.id,
            referenced_security_group_id=ctx.node_security_group_id,
            ip_protocol="tcp",
            from_port=NFS_TCP_PORT,
            to_port=NFS_TCP_PORT,
            description="NFS from the cluster's nodes",
            tags=self.tags,
            opts=child,
        )

        self.file_system = aws.efs.FileSystem(
            base,
            encrypted=True,
            kms_key_id=ctx.key_arn("inference-data"),
            performance_mode=PERFORMANCE_MODE,
            throughput_mode=config.throughput_mode,
            provisioned_throughput_in_mibps=(
                config.provisioned_throughput_mibps if config.throughput_mode == "provisioned" else None
            ),
            lifecycle_policies=lifecycle_policies(config) or None,
            tags={**self.tags, tags.STATEFUL: "true"},
            opts=stateful_options(ctx.stateful["file-system"], self),
        )
        self.file_system_id: pulumi.Output[str] = self.file_system.id
        # TLS only, through the mount targets only, and no client as root (`components.planning.efs_policy`).
        self.file_system_policy = aws.efs.FileSystemPolicy(
            f"{base}-policy",
            file_system_id=self.file_system.id,
            policy=self.file_system.arn.apply(lambda arn: json.dumps(efs_file_system_policy(arn))),
            opts=child,
        )
        self.mount_targets = {
            zone: aws.efs.MountTarget(
                f"{base}-{zone}",
                file_system_id=self.file_system.id,
                subnet_id=subnet,
                security_groups=[self.security_group.id],
                opts=child,
            )
            for zone, subnet in sorted(ctx.private_subnet_ids.items())
        }

        identity = service_account_role(
            ctx, "efs-csi-driver", volumes.KUBE_SYSTEM, CONTROLLER_SERVICE_ACCOUNT, None, [CONTROLLER_POLICY], self
        )
        self.role = identity[0]
        self.addon = volumes.csi_addon(
            ADDON, ctx=ctx, configuration=addon_configuration(pool_plans), identity=identity, parent=self
        )

        volume = config.kubernetes
        self.namespace = volume.namespace
        self.claim_name = claim_name(volume, config.name)
        self.storage_class_name = f"{config.name}-efs"
        waits: list[pulumi.Resource] = [self.addon, *self.mount_targets.values()]
        if self.namespace in (namespaces or {}):
            waits.append((namespaces or {})[self.namespace])
        self.storage_class = volumes.storage_class(
            f"{base}-sc",
            name=self.storage_class_name,
            provisioner=EFS_CSI_DRIVER,
            parameters={
                "provisioningMode": "efs-ap",
                "fileSystemId": self.file_system.id,
                "directoryPerms": DIRECTORY_PERMS,
            },
            file_system=config.name,
            opts=volumes.k8s_options(ctx, self, [self.addon]),
        )
        self.claim = volumes.claim(
            f"{base}-pvc",
            claim_name=self.claim_name,
            namespace=self.namespace,
            capacity_gib=config.capacity_gib,
            storage_class=self.storage_class_name,
            file_system=config.name,
            opts=volumes.k8s_options(ctx, self, [*waits, self.storage_class]),
        )
        self.register_outputs(
            {"fileSystemId": self.file_system_id, "claimName": self.claim_name, "namespace": self.namespace}
        )
