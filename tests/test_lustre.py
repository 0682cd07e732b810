"""FSx for Lustre: the file system's settings, its security group, S3 data repositories, CSI objects, protection."""

from __future__ import annotations

import json
from typing import Any

import pytest

from blueprint.plan.runner import ProgramRun
from components import tags
from components.catalog import versions
from components.config import StackConfig
from components.context import ClusterContext
from components.errors import ConfigError
from components.namespaces import StackNamespaces
from components.planning.stack_plan import plan_pools, plan_stack
from components.planning.storage import storage_summary
from components.storage import SharedStorage
from components.storage.lustre import LustreStorage
from tests.builders import (
    BUCKET,
    EKS_ADDON,
    IAM_ROLE,
    LUSTRE,
    PVC,
    SECURITY_GROUP,
    SG_INGRESS_RULE,
    SYSTEM,
    SYSTEM_DEFAULT_SCALING,
    THREE_ZONES,
    ShippedStack,
    once_per_config,
    run_with_context,
    shipped_plan,
    stack_config,
)
from tests.fakes import ACCOUNT_ID, KMS_KEY_ARN, NODE_SECURITY_GROUP_ID, subnet_id

DRA = "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation"
SG = SECURITY_GROUP
INGRESS = SG_INGRESS_RULE
EGRESS = "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"
ADDON = EKS_ADDON
PV = "kubernetes:core/v1:PersistentVolume"
SC = "kubernetes:storage.k8s.io/v1:StorageClass"
NAMESPACE = "kubernetes:core/v1:Namespace"


TRAINING_POOLS: list[dict[str, Any]] = [
    SYSTEM,
    {
        "name": "h100",
        "role": "training",
        "instanceType": "p5.48xlarge",
        "scaling": {"min": 0, "max": 4},
        "placement": {"availabilityZones": ["us-east-1b"]},
    },
]


def training_spec(
    lustre: dict[str, Any] | None = None,
    pools: list[dict[str, Any]] = TRAINING_POOLS,
    cluster: dict[str, Any] | None = None,
    **sections: Any,
) -> StackConfig:
    """The training pools with `lustre` as the storage section; `sections` replace whole sections (`storage=`)."""
    sections.setdefault("storage", {"lustre": lustre if lustre is not None else {}})
    return stack_config(*pools, name="train", cluster=cluster, zones=THREE_ZONES, **sections)


@once_per_config
def build(spec: StackConfig) -> ProgramRun:
    lustre = spec.storage.lustre
    assert lustre is not None
    return run_with_context(spec, lambda ctx: LustreStorage("lustre", ctx, lustre, plan_pools(spec)))


def sg_rules(run: ProgramRun) -> set[tuple[str, str, str, str, int | None, int | None]]:
    """Every rule as (direction, group, peer, protocol, from, to), groups named `fs` (the file system's) or
    `nodes` (the cluster's node group)."""
    fs_group = run.one(LUSTRE).inputs["securityGroupIds"][0]
    names = {fs_group: "fs", NODE_SECURITY_GROUP_ID: "nodes"}
    out = set()
    for kind, direction in ((INGRESS, "in"), (EGRESS, "out")):
        for r in run.of_type(kind):
            ports = (r.inputs.get("fromPort"), r.inputs.get("toPort"))
            group, peer = names[r.inputs["securityGroupId"]], names[r.inputs["referencedSecurityGroupId"]]
            out.add((direction, group, peer, r.inputs["ipProtocol"], *ports))
    return out


@pytest.mark.program
def test_persistent_file_system_settings_and_protection() -> None:
    spec = training_spec({"storageCapacityGib": 4800, "perUnitStorageThroughput": 250, "backupRetentionDays": 14})
    run = build(spec)
    fs = run.one(LUSTRE, "train-lustre")
    assert fs.inputs["deploymentType"] == "PERSISTENT_2"
    assert fs.inputs["storageCapacity"] == 4800
    assert fs.inputs["perUnitStorageThroughput"] == 250
    assert fs.inputs["fileSystemTypeVersion"] == "2.15"
    assert fs.inputs["dataCompressionType"] == "LZ4"
    assert fs.inputs["kmsKeyId"] == KMS_KEY_ARN
    assert fs.inputs["automaticBackupRetentionDays"] == 14
    assert fs.inputs["efaEnabled"] is False
    assert "metadataConfiguration" not in fs.inputs
    # One subnet: the AZ of the training pool that mounts it, not the network's first AZ.
    assert fs.inputs["subnetIds"] == subnet_id("us-east-1b")
    assert fs.protect and fs.retain_on_delete
    assert fs.inputs["tags"][tags.STATEFUL] == "true"
    assert fs.inputs["tags"][tags.CLUSTER] == "train"


@pytest.mark.program
def test_protection_follows_the_stack_setting() -> None:
    spec = training_spec({}, cluster={"protectStateful": False})
    fs = build(spec).one(LUSTRE)
    assert not fs.protect
    assert not fs.retain_on_delete  # one rule for every stateful kind (components.planning.stateful)


@pytest.mark.program
def test_configured_availability_zone_wins() -> None:
    spec = training_spec(
        {"availabilityZone": "us-east-1c"},
        pools=[
            SYSTEM_DEFAULT_SCALING,
            {
                "name": "h100c",
                "role": "training",
                "instanceType": "p5.48xlarge",
                "placement": {"availabilityZones": ["us-east-1c"]},
            },
        ],
    )
    assert build(spec).one(LUSTRE).inputs["subnetIds"] == subnet_id("us-east-1c")


@pytest.mark.program
def test_efa_metadata_and_scratch_settings() -> None:
    efa = build(
        training_spec(
            {
                "storageCapacityGib": 9600,
                "perUnitStorageThroughput": 500,
                "efaEnabled": True,
                "metadata": {"mode": "USER_PROVISIONED", "iops": 12000},
            }
        )
    ).one(LUSTRE)
    assert efa.inputs["efaEnabled"] is True
    assert efa.inputs["metadataConfiguration"] == {"mode": "USER_PROVISIONED", "iops": 12000}

    scratch = build(
        training_spec({"deploymentType": "SCRATCH_2", "storageCapacityGib": 2400, "backupRetentionDays": 0})
    ).one(LUSTRE)
    assert scratch.inputs["deploymentType"] == "SCRATCH_2"
    # PERSISTENT-only settings are left out: FSx rejects them on scratch file systems (§3a).
    for key in ("perUnitStorageThroughput", "kmsKeyId", "automaticBackupRetentionDays", "efaEnabled"):
        assert key not in scratch.inputs


LNET = {
    (direction, group, peer, "tcp", low, high)
    for low, high in ((988, 988), (1018, 1023))
    for direction, group, peer in (
        ("in", "fs", "fs"),
        ("out", "fs", "fs"),
        ("in", "fs", "nodes"),
        ("out", "fs", "nodes"),
        ("in", "nodes", "fs"),
        ("out", "nodes", "fs"),
    )
}


@pytest.mark.program
def test_security_group_ports_without_efa() -> None:
    run = build(training_spec({}))
    assert sg_rules(run) == LNET
    # Rules exist before the file system, whose creation checks them.
    fs = run.one(LUSTRE)
    rule_urns = {r.urn for r in run.of_type(INGRESS) + run.of_type(EGRESS)}
    assert rule_urns <= set(fs.depends_on)
    assert len(fs.inputs["securityGroupIds"]) == 1
    assert all(r.inputs["tags"][tags.CLUSTER] == "train" for r in run.of_type(INGRESS) + run.of_type(EGRESS))


@pytest.mark.program
def test_security_group_all_traffic_rules_with_efa() -> None:
    run = build(
        training_spec(
            {"storageCapacityGib": 4800, "perUnitStorageThroughput": 1000, "efaEnabled": True, "metadata": {}}
        )
    )
    all_traffic = {
        (direction, group, peer, "-1", None, None)
        for direction, group, peer in (
            ("in", "fs", "fs"),
            ("out", "fs", "fs"),
            ("in", "fs", "nodes"),
            ("out", "fs", "nodes"),
            ("in", "nodes", "fs"),
            ("out", "nodes", "fs"),
        )
    }
    assert sg_rules(run) == LNET | all_traffic


@pytest.mark.program
def test_stack_bucket_and_data_repository_settings() -> None:
    run = build(
        training_spec(
            {
                "dataRepositories": [
                    {
                        "fileSystemPath": "/datasets",
                        "prefix": "datasets/",
                        "importEvents": ["NEW", "CHANGED", "DELETED"],
                    },
                    {
                        "fileSystemPath": "/checkpoints",
                        "prefix": "checkpoints",
                        "importEvents": [],
                        "exportEvents": ["NEW", "CHANGED", "DELETED"],
                        "batchImportMetadataOnCreate": False,
                    },
                    {"fileSystemPath": "/public", "dataRepositoryPath": "s3://open-data/imagenet/"},
                ]
            }
        )
    )
    bucket = run.one(BUCKET)
    name = f"{bucket.inputs['bucketPrefix']}"
    assert name.startswith("train-lustre-data-") and len(name) <= 37
    assert bucket.protect and bucket.retain_on_delete and bucket.inputs["forceDestroy"] is False
    dras = {r.inputs["fileSystemPath"]: r.inputs for r in run.of_type(DRA)}
    assert set(dras) == {"/datasets", "/checkpoints", "/public"}
    datasets, checkpoints, public = dras["/datasets"], dras["/checkpoints"], dras["/public"]
    assert datasets["dataRepositoryPath"].startswith("s3://train-lustre-data-")
    assert datasets["dataRepositoryPath"].endswith("/datasets/")
    assert datasets["s3"] == {"autoImportPolicy": {"events": ["NEW", "CHANGED", "DELETED"]}}
    assert datasets["batchImportMetaDataOnCreate"] is True
    assert checkpoints["dataRepositoryPath"].endswith("/checkpoints/")
    assert checkpoints["s3"] == {"autoExportPolicy": {"events": ["NEW", "CHANGED", "DELETED"]}}
    assert checkpoints["batchImportMetaDataOnCreate"] is False
    assert public["dataRepositoryPath"] == "s3://open-data/imagenet/"
    # Named by path, so reordering the list replaces no association.
    assert {r.name for r in run.of_type(DRA)} == {
        "train-lustre-dra-datasets",
        "train-lustre-dra-checkpoints",
        "train-lustre-dra-public",
    }


@pytest.mark.program
def test_stack_bucket_is_private_versioned_encrypted_and_lifecycled() -> None:
    run = build(training_spec({"dataRepositories": [{"fileSystemPath": "/data"}]}))
    block = run.one("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock").inputs
    for key in ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets"):
        assert block[key] is True
    versioning = run.one("aws:s3/bucketVersioning:BucketVersioning")
    assert versioning.inputs["versioningConfiguration"] == {"status": "Enabled"}
    encryption = run.one("aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration")
    sse = encryption.inputs["rules"][0]
    assert sse["applyServerSideEncryptionByDefault"] == {"sseAlgorithm": "aws:kms", "kmsMasterKeyId": KMS_KEY_ARN}
    assert sse["bucketKeyEnabled"] is True
    ownership = run.one("aws:s3/bucketOwnershipControls:BucketOwnershipControls").inputs["rule"]
    assert ownership == {"objectOwnership": "BucketOwnerEnforced"}
    lifecycle = run.one("aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration")
    rules = {r["id"]: r for r in lifecycle.inputs["rules"]}
    assert rules["abort-incomplete-multipart-uploads"]["abortIncompleteMultipartUpload"] == {"daysAfterInitiation": 7}
    assert rules["expire-noncurrent-versions"]["noncurrentVersionExpiration"] == {"noncurrentDays": 30}
    assert all(r["status"] == "Enabled" for r in rules.values())
    assert versioning.urn in lifecycle.depends_on
    policy = json.loads(run.one("aws:s3/bucketPolicy:BucketPolicy").inputs["policy"])
    assert policy["Statement"][0]["Effect"] == "Deny"
    assert policy["Statement"][0]["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


@pytest.mark.program
def test_fsx_may_use_the_cluster_key_for_the_stack_bucket_only() -> None:
    run = build(training_spec({"dataRepositories": [{"fileSystemPath": "/data"}]}))
    grant = run.one("aws:kms/grant:Grant")
    fs_id = run.one(DRA).inputs["fileSystemId"]
    bucket_name = run.one(DRA).inputs["dataRepositoryPath"].removeprefix("s3://").rstrip("/")
    assert grant.inputs["keyId"] == KMS_KEY_ARN
    assert grant.inputs["granteePrincipal"] == (
        f"arn:aws:iam::{ACCOUNT_ID}:role/aws-service-role/s3.data-source.lustre.fsx.amazonaws.com/"
        f"AWSServiceRoleForFSxS3Access_{fs_id}"
    )
    assert grant.inputs["constraints"] == [{"encryptionContextEquals": {"aws:s3:arn": f"arn:aws:s3:::{bucket_name}"}}]
    assert {"Encrypt", "Decrypt", "GenerateDataKey"} <= set(grant.inputs["operations"])
    # FSx creates its S3 access role when it links the bucket.
    assert run.one(DRA).urn in grant.depends_on


@pytest.mark.program
def test_no_bucket_when_every_repository_names_its_own() -> None:
    run = build(training_spec({"dataRepositories": [{"fileSystemPath": "/d", "dataRepositoryPath": "s3://mine/d/"}]}))
    assert run.of_type(BUCKET) == []
    assert run.of_type("aws:kms/grant:Grant") == []
    assert run.one(DRA).inputs["dataRepositoryPath"] == "s3://mine/d/"


@pytest.mark.program
def test_static_volume_and_claim_fields() -> None:
    run = build(training_spec({"kubernetes": {"namespace": "training", "claimName": "scratch"}}))
    fs = run.one(LUSTRE)
    pv = run.one(PV).inputs
    assert pv["metadata"]["name"] == "training-scratch"
    spec = pv["spec"]
    assert spec["accessModes"] == ["ReadWriteMany"]
    assert spec["capacity"] == {"storage": "4800Gi"}
    assert spec["persistentVolumeReclaimPolicy"] == "Retain"
    assert spec["storageClassName"] == ""
    assert spec["mountOptions"] == ["flock"]
    assert spec["volumeMode"] == "Filesystem"
    assert spec["claimRef"] == {"namespace": "training", "name": "scratch"}
    csi = spec["csi"]
    assert csi["driver"] == "fsx.csi.aws.com"
    assert csi["volumeHandle"].startswith("fs-")
    assert csi["volumeAttributes"] == {
        "dnsname": f"{csi['volumeHandle']}.fsx.us-east-1.amazonaws.com",
        "mountname": "abcdefgh",
    }
    pvc = run.one(PVC)
    assert pvc.inputs["metadata"]["name"] == "scratch"
    assert pvc.inputs["metadata"]["namespace"] == "training"
    assert pvc.inputs["spec"] == {
        "accessModes": ["ReadWriteMany"],
        "storageClassName": "",
        "volumeName": "training-scratch",
        "resources": {"requests": {"storage": "4800Gi"}},
    }
    assert run.one(PV).urn in pvc.depends_on
    assert pvc.provider is not None and "k8s" in pvc.provider
    assert csi["volumeHandle"].startswith("fs-") and fs.type == LUSTRE
    assert run.of_type(SC) == []


@pytest.mark.program
def test_optional_storage_class_for_dynamic_provisioning() -> None:
    run = build(
        training_spec(
            {
                "perUnitStorageThroughput": 500,
                "metadata": {"mode": "AUTOMATIC"},
                "kubernetes": {"storageClass": True},
            }
        )
    )
    sc = run.one(SC).inputs
    assert sc["provisioner"] == "fsx.csi.aws.com"
    assert sc["reclaimPolicy"] == "Retain"
    assert sc["volumeBindingMode"] == "Immediate"
    assert sc["mountOptions"] == ["flock"]
    params = sc["parameters"]
    assert params["subnetId"] == subnet_id("us-east-1b")
    assert params["securityGroupIds"].startswith("sg-")
    assert params["deploymentType"] == "PERSISTENT_2"
    assert params["perUnitStorageThroughput"] == "500"
    assert params["kmsKeyId"] == KMS_KEY_ARN
    assert params["fileSystemTypeVersion"] == "2.15"
    assert params["metadataConfigurationMode"] == "AUTOMATIC"
    # Dynamic provisioning needs create/delete rights; static volumes only describe.
    role_policy = json.loads(run.one(IAM_ROLE).inputs["inlinePolicies"][0]["policy"])
    actions: set[str] = set()
    for statement in role_policy["Statement"]:
        action = statement["Action"]
        actions |= {action} if isinstance(action, str) else set(action)
    assert {"fsx:CreateFileSystem", "fsx:DeleteFileSystem"} <= actions
    # The FSx-for-S3 service-linked role it may create is this account's only.
    (slr,) = [s for s in role_policy["Statement"] if "iam:AttachRolePolicy" in s["Action"]]
    assert slr["Resource"] == (
        f"arn:aws:iam::{ACCOUNT_ID}:role/aws-service-role/s3.data-source.lustre.fsx.amazonaws.com/*"
    )
    # ... only for file systems the driver creates for this cluster: both tags in the request, both on the resource.
    assert params["extraTags"] == "gpu-clusters/cluster=train"
    by_sid = {s.get("Sid"): s for s in role_policy["Statement"]}
    assert by_sid["CreateTaggedForThisCluster"]["Action"] == ["fsx:CreateFileSystem", "fsx:TagResource"]
    assert by_sid["CreateTaggedForThisCluster"]["Condition"] == {
        "StringEquals": {"aws:RequestTag/gpu-clusters/cluster": "train"},
        "Null": {"aws:RequestTag/CSIVolumeName": "false"},
    }
    assert by_sid["ChangeOnlyThisClustersFileSystems"]["Action"] == ["fsx:UpdateFileSystem", "fsx:DeleteFileSystem"]
    assert by_sid["ChangeOnlyThisClustersFileSystems"]["Condition"] == {
        "StringEquals": {"aws:ResourceTag/gpu-clusters/cluster": "train"},
        "Null": {"aws:ResourceTag/CSIVolumeName": "false"},
    }
    fsx_changes = {"fsx:CreateFileSystem", "fsx:DeleteFileSystem", "fsx:UpdateFileSystem", "fsx:TagResource"}
    for statement in role_policy["Statement"]:
        granted = {statement["Action"]} if isinstance(statement["Action"], str) else set(statement["Action"])
        assert not (granted & fsx_changes) or "Condition" in statement


@pytest.mark.program
def test_csi_addon_role_and_gpu_tolerations() -> None:
    run = build(training_spec({}))
    role = run.one(IAM_ROLE)
    assert role.inputs["tags"] == {"namespace": "kube-system", "service-account": "fsx-csi-controller-sa"}
    policy = json.loads(role.inputs["inlinePolicies"][0]["policy"])
    assert policy["Statement"] == [{"Effect": "Allow", "Action": ["fsx:DescribeFileSystems"], "Resource": "*"}]
    addon = run.one(ADDON)
    assert addon.inputs["addonName"] == "aws-fsx-csi-driver"
    assert addon.inputs["addonVersion"] == versions.managed_addon_version("aws-fsx-csi-driver", "1.35")
    assert role.urn in addon.depends_on
    values = json.loads(addon.inputs["configurationValues"])
    assert values["node"]["tolerateAllTaints"] is False
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in values["node"]["tolerations"]
    term = values["node"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["fargate", "hybrid"]


@pytest.mark.program
def test_addon_pin_from_the_stack_is_used() -> None:
    spec = training_spec({}, addons={"managed": {"pins": {"aws-fsx-csi-driver": "v1.8.0-eksbuild.1"}}})
    assert build(spec).one(ADDON).inputs["addonVersion"] == "v1.8.0-eksbuild.1"


@pytest.mark.program
def test_claims_wait_for_their_namespace_created_once() -> None:
    """Two file systems with claims in one namespace: the namespaces component creates it once, and both claims
    wait for it (so they land in a namespace that already has its Pod Security labels)."""
    spec = training_spec(
        {"kubernetes": {"namespace": "ml"}},
        storage={
            "lustre": {"kubernetes": {"namespace": "ml"}},
            "nfs": {"kind": "efs", "kubernetes": {"namespace": "ml"}},
        },
    )
    stack_plan = plan_stack(spec)

    def build(ctx: ClusterContext) -> None:
        ctx.namespaces.update(StackNamespaces("ns", ctx, stack_plan.namespaces, stack_plan.addons).namespaces)
        SharedStorage("storage", ctx, spec.storage, stack_plan.pools)

    run = run_with_context(spec, build)
    names = [r.inputs["metadata"]["name"] for r in run.of_type(NAMESPACE)]
    assert names.count("ml") == 1
    namespace = next(r.urn for r in run.of_type(NAMESPACE) if r.inputs["metadata"]["name"] == "ml")
    assert len(run.of_type(PVC)) == 2
    assert all(namespace in r.depends_on for r in run.of_type(PVC))


@pytest.mark.program
def test_missing_subnet_in_the_chosen_zone_is_an_error() -> None:
    spec = training_spec({"availabilityZone": "us-east-1f"})
    with pytest.raises(Exception, match="no private subnet in us-east-1f"):
        build(spec)


def test_training_stack_plans_a_protected_persistent_file_system_with_s3_and_a_claim(
    training_stack: ShippedStack,
) -> None:
    """The shipped training stack, through the whole program, gets its Lustre file system, S3 link and claim."""
    run = training_stack.run
    fs = run.one(LUSTRE)
    assert fs.inputs["deploymentType"] == "PERSISTENT_2" and fs.protect
    assert fs.inputs["fileSystemTypeVersion"] == "2.15"
    shipped_pools = training_stack.files.config["gpu-clusters:nodePools"]
    pool = next(p for p in shipped_pools if p["role"] == "training")
    spec = training_spec({}, pools=shipped_pools)
    assert (
        storage_summary(spec.storage, spec.network.zones, plan_pools(spec))[0]["availabilityZone"]
        == pool["placement"]["availabilityZones"][0]
    )
    assert {r.inputs["fileSystemPath"] for r in run.of_type(DRA)} == {"/datasets", "/checkpoints"}
    claim = run.one(PVC).inputs
    assert (claim["metadata"]["namespace"], claim["metadata"]["name"]) == ("training", "lustre-scratch")


@pytest.mark.program
def test_data_repository_associations_are_created_one_after_another() -> None:
    """FSx fails associations created concurrently on one file system: each waits for the one before it."""
    paths = ["/datasets", "/checkpoints", "/public"]
    run = build(training_spec({"dataRepositories": [{"fileSystemPath": p, "prefix": p.strip("/")} for p in paths]}))
    by_path = {r.inputs["fileSystemPath"]: r for r in run.of_type(DRA)}
    assert not [urn for urn in by_path["/datasets"].depends_on if DRA in urn]
    assert by_path["/datasets"].urn in by_path["/checkpoints"].depends_on
    assert by_path["/checkpoints"].urn in by_path["/public"].depends_on


@pytest.mark.program
def test_a_file_system_linked_to_s3_takes_no_backups() -> None:
    """FSx does not back up an S3-linked file system: its default retention is 0 and tags are not copied to
    backups (CopyTagsToBackups is refused on linked file systems); unlinked ones keep the default 7 days."""
    linked = build(training_spec({"dataRepositories": [{"fileSystemPath": "/datasets", "prefix": "datasets"}]}))
    fs = linked.one(LUSTRE).inputs
    assert (fs["automaticBackupRetentionDays"], fs["copyTagsToBackups"]) == (0, False)
    unlinked = build(training_spec({})).one(LUSTRE).inputs
    assert (unlinked["automaticBackupRetentionDays"], unlinked["copyTagsToBackups"]) == (7, True)


def test_backups_of_a_file_system_linked_to_s3_are_refused() -> None:
    lustre = {"backupRetentionDays": 7, "dataRepositories": [{"fileSystemPath": "/datasets", "prefix": "datasets"}]}
    with pytest.raises(ConfigError, match=r"storage\.lustre\.backupRetentionDays.*does not back up"):
        stack_config(*TRAINING_POOLS, zones=THREE_ZONES, storage={"lustre": lustre}, validated=True)
    # 0, or no key at all, is accepted.
    for accepted in ({**lustre, "backupRetentionDays": 0}, {"dataRepositories": lustre["dataRepositories"]}):
        stack_config(*TRAINING_POOLS, zones=THREE_ZONES, storage={"lustre": accepted}, validated=True)


@pytest.mark.program
def test_root_squash_is_off_by_default_and_maps_root_when_asked() -> None:
    assert "rootSquashConfiguration" not in build(training_spec({})).one(LUSTRE).inputs
    squashed = training_spec({"rootSquash": {"uidGid": "65534:65534", "noSquashNids": ["10.0.[2-3].[1-255]@tcp"]}})
    assert build(squashed).one(LUSTRE).inputs["rootSquashConfiguration"] == {
        "rootSquash": "65534:65534",
        "noSquashNids": ["10.0.[2-3].[1-255]@tcp"],
    }


@pytest.mark.parametrize(
    ("root_squash", "problem"),
    [
        ({"uidGid": "0:0"}, "storage.lustre.rootSquash.uidGid"),
        ({"uidGid": "4294967295:1"}, "UID and GID are at most 4294967294"),
        ({"uidGid": "1:1", "noSquashNids": ["10.0.1.6"]}, "storage.lustre.rootSquash.noSquashNids[0]"),
    ],
)
def test_root_squash_ids_and_nids_are_checked(root_squash: dict[str, Any], problem: str) -> None:
    with pytest.raises(ConfigError) as raised:
        stack_config(
            *TRAINING_POOLS, zones=THREE_ZONES, storage={"lustre": {"rootSquash": root_squash}}, validated=True
        )
    assert problem in str(raised.value)


@pytest.mark.program
def test_only_the_pools_that_mount_lustre_reach_it() -> None:
    """The hybrid stack's h100 pool mounts Lustre, its burst (inference) and system pools do not: the file system's
    group admits its own servers and the clients' group, never the group every node shares."""
    records = shipped_plan("hybrid")["resources"]
    ids = {r["name"]: r.get("id") for r in records if r["type"] == SG}
    clients, nodes, fs = ids["hybrid-lustre-clients"], ids["hybrid-node"], ids["hybrid-scratch-sg"]
    peers = {
        r["inputs"]["referencedSecurityGroupId"]
        for r in records
        if r["type"] in (INGRESS, EGRESS) and r["inputs"]["securityGroupId"] == fs
    }
    assert peers == {fs, clients}
    groups = {
        r["name"]: set(r["inputs"]["networkInterfaces"][0]["securityGroups"])
        for r in records
        if r["type"] == "aws:ec2/launchTemplate:LaunchTemplate"
    }
    assert clients in groups["hybrid-h100"]
    assert clients not in groups["hybrid-burst"] | groups["hybrid-system"]
    assert nodes in groups["hybrid-burst"]
