"""FSx for Lustre for training: the file system, its security group, its S3 data repositories, and a claim.

Sizing and validity come from `components.planning.lustre` (enforced by `components.validation`), placement and
security-group rules from `components.planning.storage`; this component only turns those decisions into resources:
the file system (Lustre 2.15, aws-gpu-facts.md §3a), its security group, the optional data bucket and repository
associations, the CSI driver add-on, the PersistentVolume and claim. See docs/storage.md#fsx-for-lustre-storagelustre.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components import tags
from components.addons.helm import service_account_role
from components.config import DataRepository, LustreConfig
from components.context import ClusterContext, stateful_options
from components.planning import compute_types
from components.planning.lustre import automatic_backup_retention_days, per_unit_throughput
from components.planning.lustre_directories import workload_directories, workload_directory_script
from components.planning.lustre_policies import (
    S3_ACCESS_KEY_OPERATIONS,
    bucket_key_grant_context,
    controller_policy,
    data_bucket_policy,
    fsx_s3_access_role_arn,
)
from components.planning.pools import PoolPlan
from components.planning.storage import (
    LUSTRE_CSI_DRIVER,
    bucket_prefix,
    claim_name,
    data_repository_path,
    lustre_availability_zone,
    lustre_pools,
    lustre_security_rules,
    needs_stack_bucket,
    path_slug,
)
from components.planning.tolerations import key_tolerations
from components.storage import volumes

#: Lustre version of every file system the stack creates (FSx API `FileSystemTypeVersion`, §3a).
LUSTRE_VERSION = "2.15"
#: Static Lustre volumes are mounted with `flock` so applications get coherent POSIX locks across clients
#: (aws-fsx-csi-driver examples/kubernetes/static_provisioning).
MOUNT_OPTIONS = ["flock"]
ADDON = "aws-fsx-csi-driver"
#: The controller's service account in the add-on (aws-fsx-csi-driver chart values, `controller.serviceAccount`).
CONTROLLER_SERVICE_ACCOUNT = "fsx-csi-controller-sa"
#: Lifecycle of the stack's data bucket: failed multipart uploads (interrupted checkpoint exports) stop costing
#: money after 7 days; overwritten checkpoint versions are kept 30 days for recovery.
ABORT_MULTIPART_AFTER_DAYS = 7
NONCURRENT_VERSIONS_EXPIRE_AFTER_DAYS = 30


def addon_configuration(pool_plans: Sequence[PoolPlan]) -> dict[str, Any]:
    """Add-on configuration values (the driver chart's `node.*` keys): the node plugin tolerates the pools' taints
    (GPU nodes are tainted) and stays off hybrid nodes and Fargate, where the driver "isn't supported" (EKS user
    guide, fsx-csi-create.html). With `tolerateAllTaints` off, the chart adds the driver's own start-up taint
    `fsx.csi.aws.com/agent-not-ready` to the list (chart template node-daemonset.yaml)."""
    return {
        "node": {
            "tolerateAllTaints": False,
            "tolerations": key_tolerations(pool_plans),
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [compute_types.in_vpc_only()]}]
                    }
                }
            },
        }
    }


def root_squash(config: LustreConfig) -> aws.fsx.LustreFileSystemRootSquashConfigurationArgs | None:
    """FSx root squash from `rootSquash`, or None (off)."""
    if config.root_squash is None:
        return None
    return aws.fsx.LustreFileSystemRootSquashConfigurationArgs(
        root_squash=config.root_squash.uid_gid, no_squash_nids=list(config.root_squash.no_squash_nids) or None
    )


def s3_policies(repository: DataRepository) -> aws.fsx.DataRepositoryAssociationS3Args:
    """Auto-import (S3 -> Lustre) and auto-export (Lustre -> S3) events of one association."""
    return aws.fsx.DataRepositoryAssociationS3Args(
        auto_import_policy=(
            aws.fsx.DataRepositoryAssociationS3AutoImportPolicyArgs(events=list(repository.import_events))
            if repository.import_events
            else None
        ),
        auto_export_policy=(
            aws.fsx.DataRepositoryAssociationS3AutoExportPolicyArgs(events=list(repository.export_events))
            if repository.export_events
            else None
        ),
    )


class LustreStorage(pulumi.ComponentResource):
    """An FSx for Lustre file system for the training pools, and the claim their pods mount."""

    def __init__(
        self,
        name: str,
        ctx: ClusterContext,
        config: LustreConfig,
        pool_plans: Sequence[PoolPlan],
        namespaces: Mapping[str, pulumi.Resource] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpu-clusters:index:LustreStorage", name, None, opts)
        self.config = config
        self.pools = lustre_pools(config, pool_plans)
        self.availability_zone = lustre_availability_zone(config, self.pools, ctx.zones)
        if self.availability_zone not in ctx.private_subnet_ids:
            raise ValueError(
                f"storage.lustre: no private subnet in {self.availability_zone}; "
                f"subnets: {', '.join(sorted(ctx.private_subnet_ids))}"
            )
        self.persistent = config.deployment_type == "PERSISTENT_2"
        base = f"{ctx.cluster_name_plain}-{config.name}"
        child = pulumi.ResourceOptions(parent=self)
        self.tags = {**ctx.tags, "Name": base}
        stateful_tags = {**self.tags, tags.STATEFUL: "true"}

        self.security_group = aws.ec2.SecurityGroup(
            f"{base}-sg",
            vpc_id=ctx.vpc_id,
            description=f"FSx for Lustre {base}: LNET from the nodes"
            + (" and EFA all-traffic" if config.efa_enabled else ""),
            tags=self.tags,
            opts=child,
        )
        rules = self._security_rules(base, ctx)

        persistent_only: dict[str, Any] = {}
        if self.persistent:
            persistent_only = {
                "per_unit_storage_throughput": config.per_unit_storage_throughput,
                "kms_key_id": ctx.key_arn("training-data"),
                "automatic_backup_retention_days": automatic_backup_retention_days(config),
                # Not available on file systems linked to S3 ([BC] fsx CopyTagsToBackups), which have no backups.
                "copy_tags_to_backups": automatic_backup_retention_days(config) > 0,
                "efa_enabled": config.efa_enabled,
            }
            if config.metadata is not None:
                persistent_only["metadata_configuration"] = aws.fsx.LustreFileSystemMetadataConfigurationArgs(
                    mode=config.metadata.mode, iops=config.metadata.iops
                )
        self.file_system = aws.fsx.LustreFileSystem(
            base,
            subnet_ids=ctx.private_subnet_ids[self.availability_zone],
            security_group_ids=[self.security_group.id],
            deployment_type=config.deployment_type,
            storage_type="SSD",
            storage_capacity=config.storage_capacity_gib,
            data_compression_type=config.compression,
            file_system_type_version=LUSTRE_VERSION,
            root_squash_configuration=root_squash(config),
            tags=stateful_tags,
            **persistent_only,
            # FSx checks the security group's rules when it creates the file system (§3c/3d).
            opts=stateful_options(ctx.stateful["file-system"], self, depends_on=rules),
        )
        self.file_system_id: pulumi.Output[str] = self.file_system.id
        self.dns_name: pulumi.Output[str] = self.file_system.dns_name
        self.mount_name: pulumi.Output[str] = self.file_system.mount_name

        self.bucket: aws.s3.Bucket | None = None
        if needs_stack_bucket(config):
            self.bucket = self._data_bucket(ctx, stateful_tags)
        self.bucket_name: pulumi.Output[str] | None = self.bucket.bucket if self.bucket is not None else None
        self.associations = self._data_repositories(base)
        self.bucket_key_grant: aws.kms.Grant | None = None
        if self.bucket is not None and self.associations:
            self.bucket_key_grant = self._bucket_key_grant(base, ctx, self.bucket)

        identity = service_account_role(
            ctx,
            "fsx-csi-driver",
            volumes.KUBE_SYSTEM,
            CONTROLLER_SERVICE_ACCOUNT,
            pulumi.Output.all(ctx.partition, ctx.account_id).apply(
                lambda ids: json.dumps(
                    controller_policy(config.kubernetes.storage_class, ctx.cluster_name_plain, ids[0], ids[1])
                )
            ),
            [],
            self,
        )
        self.role = identity[0]
        self.addon = volumes.csi_addon(
            ADDON, ctx=ctx, configuration=addon_configuration(pool_plans), identity=identity, parent=self
        )
        self._claim(ctx, namespaces or {})
        self.register_outputs(
            {"fileSystemId": self.file_system_id, "claimName": self.claim_name, "namespace": self.namespace}
        )

    def boot_script(self) -> pulumi.Output[str]:
        """The script every client node runs at boot to make the workload directories (empty when switched off)."""
        directories = workload_directories(self.config)
        return pulumi.Output.all(self.dns_name, self.mount_name).apply(
            lambda names: workload_directory_script(names[0], names[1], directories) if directories else ""
        )

    # ------------------------------------------------------------------------------------------------ network
    def _security_rules(self, base: str, ctx: ClusterContext) -> list[pulumi.Resource]:
        # The clients are the mounting pools' own group, not the group every node shares (docs/security.md#tenants).
        clients = ctx.lustre_client_security_group_id or ctx.node_security_group_id
        groups = {"filesystem": self.security_group.id, "nodes": clients}
        child = pulumi.ResourceOptions(parent=self)
        made: list[pulumi.Resource] = []
        for rule in lustre_security_rules(self.config.efa_enabled):
            peer = groups["filesystem" if rule.peer == "self" else rule.peer]
            args: dict[str, Any] = {
                "security_group_id": groups[rule.on],
                "referenced_security_group_id": peer,
                "ip_protocol": rule.protocol,
                "description": rule.description,
                "tags": self.tags,
            }
            if rule.protocol != "-1":
                args |= {"from_port": rule.from_port, "to_port": rule.to_port}
            kind = aws.vpc.SecurityGroupIngressRule if rule.direction == "ingress" else aws.vpc.SecurityGroupEgressRule
            made.append(kind(f"{base}-{rule.name}", **args, opts=child))
        return made

    # ------------------------------------------------------------------------------------------ data repositories
    def _data_bucket(self, ctx: ClusterContext, stateful_tags: Mapping[str, str]) -> aws.s3.Bucket:
        """The stack's bucket for datasets and checkpoints: versioned, encrypted with the cluster key (bucket key
        on, fewer KMS calls), never public, owner-enforced (no ACLs), TLS only, with a lifecycle that bounds its
        cost."""
        name = f"{ctx.cluster_name_plain}-{self.config.name}-data"
        bucket = aws.s3.Bucket(
            name,
            bucket_prefix=bucket_prefix(ctx.cluster_name_plain, self.config.name),
            force_destroy=False,
            tags={**stateful_tags, "Name": name},
            opts=stateful_options(ctx.stateful["bucket"], self),
        )
        child = pulumi.ResourceOptions(parent=self)
        aws.s3.BucketPublicAccessBlock(
            name,
            bucket=bucket.id,
            block_public_acls=True,
            block_public_policy=True,
            ignore_public_acls=True,
            restrict_public_buckets=True,
            opts=child,
        )
        aws.s3.BucketOwnershipControls(
            name,
            bucket=bucket.id,
            rule=aws.s3.BucketOwnershipControlsRuleArgs(object_ownership="BucketOwnerEnforced"),
            opts=child,
        )
        versioning = aws.s3.BucketVersioning(
            name,
            bucket=bucket.id,
            versioning_configuration=aws.s3.BucketVersioningVersioningConfigurationArgs(status="Enabled"),
            opts=child,
        )
        aws.s3.BucketServerSideEncryptionConfiguration(
            name,
            bucket=bucket.id,
            rules=[
                aws.s3.BucketServerSideEncryptionConfigurationRuleArgs(
                    apply_server_side_encryption_by_default=aws.s3.BucketServerSideEncryptionConfigurationRuleApplyServerSideEncryptionByDefaultArgs(
                        sse_algorithm="aws:kms", kms_master_key_id=ctx.key_arn("training-data")
                    ),
                    bucket_key_enabled=True,
                )
            ],
            opts=child,
        )
        aws.s3.BucketLifecycleConfiguration(
            name,
            bucket=bucket.id,
            rules=[
                aws.s3.BucketLifecycleConfigurationRuleArgs(
                    id="abort-incomplete-multipart-uploads",
                    status="Enabled",
                    filter=aws.s3.BucketLifecycleConfigurationRuleFilterArgs(prefix=""),
                    abort_incomplete_multipart_upload=aws.s3.BucketLifecycleConfigurationRuleAbortIncompleteMultipartUploadArgs(
                        days_after_initiation=ABORT_MULTIPART_AFTER_DAYS
                    ),
                ),
                aws.s3.BucketLifecycleConfigurationRuleArgs(
                    id="expire-noncurrent-versions",
                    status="Enabled",
                    filter=aws.s3.BucketLifecycleConfigurationRuleFilterArgs(prefix=""),
                    noncurrent_version_expiration=aws.s3.BucketLifecycleConfigurationRuleNoncurrentVersionExpirationArgs(
                        noncurrent_days=NONCURRENT_VERSIONS_EXPIRE_AFTER_DAYS
                    ),
                ),
            ],
            # S3 applies noncurrent-version rules only once versioning is on.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[versioning]),
        )
        aws.s3.BucketPolicy(
            name, bucket=bucket.id, policy=bucket.arn.apply(lambda arn: json.dumps(data_bucket_policy(arn))), opts=child
        )
        return bucket

    def _data_repositories(self, base: str) -> list[aws.fsx.DataRepositoryAssociation]:
        """One association per configured path, named after the path so reordering the list replaces nothing.

        They are created one after another, each waiting for the previous one: FSx fails associations created
        concurrently on one file system (hashicorp/terraform-provider-aws#24678, labelled upstream; the maintainers'
        workaround is to serialize them, https://github.com/hashicorp/terraform-provider-aws/issues/24678).
        """
        made: list[aws.fsx.DataRepositoryAssociation] = []
        for repository in self.config.data_repositories:
            path: pulumi.Input[str]
            if repository.data_repository_path is not None or self.bucket is None:
                path = data_repository_path(repository, None)
            else:
                path = self.bucket.bucket.apply(lambda b, r=repository: data_repository_path(r, b))  # type: ignore[misc]
            made.append(
                aws.fsx.DataRepositoryAssociation(
                    f"{base}-dra-{path_slug(repository.file_system_path)}",
                    file_system_id=self.file_system.id,
                    file_system_path=repository.file_system_path,
                    data_repository_path=path,
                    batch_import_meta_data_on_create=repository.batch_import_metadata_on_create,
                    s3=s3_policies(repository),
                    tags=self.tags,
                    opts=pulumi.ResourceOptions(parent=self, depends_on=made[-1:]),
                )
            )
        return made

    def _bucket_key_grant(self, base: str, ctx: ClusterContext, bucket: aws.s3.Bucket) -> aws.kms.Grant:
        """Let FSx read and write the stack's bucket, which is encrypted with the cluster's KMS key.

        FSx moves data through its per-file-system S3 access role, which a customer-managed key must allow ("Working
        with server-side encrypted Amazon S3 buckets", FSx for Lustre guide,
        https://docs.aws.amazon.com/fsx/latest/LustreGuide/s3-server-side-encryption-support.html). A grant keeps
        that permission here, next to the bucket, instead of in the cluster key's policy. FSx creates the role when
        the file system is linked to S3, so the grant follows the associations. It is limited to the cryptographic
        operations S3 performs, and only for this bucket: with bucket keys on, S3's encryption context is the
        bucket's ARN (same page).
        """
        grantee = pulumi.Output.all(ctx.partition, ctx.account_id, self.file_system.id).apply(
            lambda v: fsx_s3_access_role_arn(v[0], v[1], v[2])
        )
        return aws.kms.Grant(
            f"{base}-s3-access",
            key_id=ctx.key_arn("training-data"),
            grantee_principal=grantee,
            operations=list(S3_ACCESS_KEY_OPERATIONS),
            constraints=[
                aws.kms.GrantConstraintArgs(encryption_context_equals=bucket.arn.apply(bucket_key_grant_context))
            ],
            retire_on_delete=True,
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(self.associations)),
        )

    # ------------------------------------------------------------------------------------------------ Kubernetes
    def _claim(self, ctx: ClusterContext, namespaces: Mapping[str, pulumi.Resource]) -> None:
        """A static PersistentVolume on the file system and the claim bound to it (storage class "", so no
        provisioner is involved), plus the optional StorageClass for more file systems on demand."""
        volume = self.config.kubernetes
        self.namespace = volume.namespace
        self.claim_name = claim_name(volume, self.config.name)
        capacity = self.config.storage_capacity_gib
        self.volume_name = f"{self.namespace}-{self.claim_name}"
        waits: list[pulumi.Resource] = [self.addon]
        if self.namespace in namespaces:
            waits.append(namespaces[self.namespace])
        base = f"{ctx.cluster_name_plain}-{self.config.name}"
        self.persistent_volume = k8s.core.v1.PersistentVolume(
            f"{base}-pv",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=self.volume_name, labels=volumes.storage_labels(self.config.name)),
            spec=k8s.core.v1.PersistentVolumeSpecArgs(
                capacity={"storage": volumes.quantity(capacity)},
                volume_mode="Filesystem",
                access_modes=volumes.ACCESS_MODES,
                persistent_volume_reclaim_policy=volumes.RECLAIM_POLICY,
                storage_class_name="",
                mount_options=MOUNT_OPTIONS,
                # Reserved for our claim: no other claim in the cluster can bind the training data by accident.
                claim_ref=k8s.core.v1.ObjectReferenceArgs(namespace=self.namespace, name=self.claim_name),
                csi=k8s.core.v1.CSIPersistentVolumeSourceArgs(
                    driver=LUSTRE_CSI_DRIVER,
                    volume_handle=self.file_system.id,
                    volume_attributes={"dnsname": self.file_system.dns_name, "mountname": self.file_system.mount_name},
                ),
            ),
            opts=volumes.k8s_options(ctx, self, waits),
        )
        self.claim = volumes.claim(
            f"{base}-pvc",
            claim_name=self.claim_name,
            namespace=self.namespace,
            capacity_gib=capacity,
            storage_class="",
            volume_name=self.volume_name,
            file_system=self.config.name,
            opts=volumes.k8s_options(ctx, self, [*waits, self.persistent_volume]),
        )
        self.storage_class: k8s.storage.v1.StorageClass | None = None
        if volume.storage_class:
            self.storage_class = volumes.storage_class(
                f"{base}-sc",
                name=f"{self.config.name}-fsx",
                provisioner=LUSTRE_CSI_DRIVER,
                parameters=self._dynamic_parameters(ctx),
                mount_options=MOUNT_OPTIONS,
                file_system=self.config.name,
                opts=volumes.k8s_options(ctx, self, [self.addon]),
            )

    def _dynamic_parameters(self, ctx: ClusterContext) -> dict[str, pulumi.Input[str]]:
        """StorageClass parameters (aws-fsx-csi-driver docs/options.md): file systems the driver provisions get
        the same subnet, security group, encryption and tier as the stack's own."""
        config = self.config
        params: dict[str, pulumi.Input[str]] = {
            "subnetId": ctx.private_subnet_ids[self.availability_zone],
            "securityGroupIds": self.security_group.id,
            "deploymentType": config.deployment_type,
            "dataCompressionType": config.compression,
            "fileSystemTypeVersion": LUSTRE_VERSION,
            # The tag the controller's role requires on create and delete (`controller_policy`).
            "extraTags": f"{tags.CLUSTER}={ctx.cluster_name_plain}",
        }
        if self.persistent:
            params |= {
                "perUnitStorageThroughput": str(per_unit_throughput(config)),
                "kmsKeyId": ctx.key_arn("training-data"),
                "automaticBackupRetentionDays": str(config.backup_retention_days),
                "copyTagsToBackups": "true",
            }
            if config.metadata is not None:
                params["metadataConfigurationMode"] = config.metadata.mode
                if config.metadata.iops is not None:
                    params["metadataIops"] = str(config.metadata.iops)
            if config.efa_enabled:
                params["efaEnabled"] = "true"
        return params
