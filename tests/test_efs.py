"""EFS for inference: encryption, throughput mode, lifecycle, mount targets per AZ, port 2049, CSI objects."""

from __future__ import annotations

import json
from typing import Any

import pytest

from blueprint.plan.runner import ProgramRun
from components import tags
from components.config import StackConfig
from components.planning.pools import STARTUP_TAINT
from components.planning.stack_plan import plan_pools
from components.storage.efs import EfsStorage
from tests.builders import (
    EFS,
    EKS_ADDON,
    IAM_ROLE,
    PVC,
    SG_INGRESS_RULE,
    SYSTEM,
    THREE_ZONES,
    ShippedStack,
    once_per_config,
    run_with_context,
    stack_config,
)
from tests.fakes import KMS_KEY_ARN, NODE_SECURITY_GROUP_ID, subnet_id

MOUNT_TARGET = "aws:efs/mountTarget:MountTarget"
FILE_SYSTEM_POLICY = "aws:efs/fileSystemPolicy:FileSystemPolicy"
INGRESS = SG_INGRESS_RULE
ADDON = EKS_ADDON
SC = "kubernetes:storage.k8s.io/v1:StorageClass"
ZONES = list(THREE_ZONES)


INFERENCE_POOLS: list[dict[str, Any]] = [
    SYSTEM,
    {"name": "l40s", "role": "inference", "instanceType": "g6e.12xlarge", "scaling": {"min": 1, "max": 8}},
]


def inference_spec(
    nfs: dict[str, Any] | None = None,
    pools: list[dict[str, Any]] = INFERENCE_POOLS,
    cluster: dict[str, Any] | None = None,
) -> StackConfig:
    return stack_config(
        *pools, name="serve", cluster=cluster, zones=ZONES, storage={"nfs": {"kind": "efs", **(nfs or {})}}
    )


@once_per_config
def build(spec: StackConfig) -> ProgramRun:
    nfs = spec.storage.nfs
    assert nfs is not None
    return run_with_context(spec, lambda ctx: EfsStorage("models", ctx, nfs, plan_pools(spec)))


@pytest.mark.program
def test_file_system_is_encrypted_elastic_lifecycled_and_protected() -> None:
    run = build(inference_spec())
    fs = run.one(EFS, "serve-models")
    assert fs.inputs["encrypted"] is True
    assert fs.inputs["kmsKeyId"] == KMS_KEY_ARN
    # Elastic by default; the API would default to bursting (aws-gpu-facts.md §4).
    assert fs.inputs["throughputMode"] == "elastic"
    assert "provisionedThroughputInMibps" not in fs.inputs
    assert fs.inputs["performanceMode"] == "generalPurpose"
    assert fs.inputs["lifecyclePolicies"] == [
        {"transitionToIa": "AFTER_30_DAYS"},
        {"transitionToPrimaryStorageClass": "AFTER_1_ACCESS"},
    ]
    assert fs.protect and fs.retain_on_delete
    assert fs.inputs["tags"][tags.STATEFUL] == "true"


@pytest.mark.program
def test_provisioned_throughput_and_no_lifecycle() -> None:
    fs = build(
        inference_spec({"throughputMode": "provisioned", "provisionedThroughputMibps": 256, "transitionToIa": "NONE"})
    ).one(EFS)
    assert fs.inputs["throughputMode"] == "provisioned"
    assert fs.inputs["provisionedThroughputInMibps"] == 256
    assert "lifecyclePolicies" not in fs.inputs


@pytest.mark.program
def test_unprotected_when_the_stack_says_so() -> None:
    fs = build(inference_spec(cluster={"protectStateful": False})).one(EFS)
    assert not fs.protect and not fs.retain_on_delete


@pytest.mark.program
def test_one_mount_target_per_private_subnet_az_behind_port_2049() -> None:
    run = build(inference_spec())
    targets = {r.name: r.inputs for r in run.of_type(MOUNT_TARGET)}
    assert set(targets) == {f"serve-models-{zone}" for zone in ZONES}
    for zone in ZONES:
        assert targets[f"serve-models-{zone}"]["subnetId"] == subnet_id(zone)
    groups = {tuple(t["securityGroups"]) for t in targets.values()}
    assert len(groups) == 1
    (rule,) = run.of_type(INGRESS)
    assert rule.inputs["securityGroupId"] == next(iter(groups))[0]
    assert rule.inputs["referencedSecurityGroupId"] == NODE_SECURITY_GROUP_ID
    assert (rule.inputs["ipProtocol"], rule.inputs["fromPort"], rule.inputs["toPort"]) == ("tcp", 2049, 2049)
    assert "cidrIpv4" not in rule.inputs


@pytest.mark.program
def test_storage_class_with_access_points_and_claim() -> None:
    run = build(inference_spec({"capacityGib": 500, "kubernetes": {"namespace": "inference", "claimName": "weights"}}))
    fs_id = run.one(MOUNT_TARGET, "serve-models-us-east-1a").inputs["fileSystemId"]
    sc = run.one(SC).inputs
    assert sc["metadata"]["name"] == "models-efs"
    assert sc["provisioner"] == "efs.csi.aws.com"
    assert sc["parameters"] == {"provisioningMode": "efs-ap", "fileSystemId": fs_id, "directoryPerms": "700"}
    assert sc["reclaimPolicy"] == "Retain"
    pvc = run.one(PVC)
    assert pvc.inputs["metadata"]["name"] == "weights"
    assert pvc.inputs["metadata"]["namespace"] == "inference"
    assert pvc.inputs["spec"] == {
        "accessModes": ["ReadWriteMany"],
        "storageClassName": "models-efs",
        "resources": {"requests": {"storage": "500Gi"}},
    }
    # A claim is only mountable once every AZ has its mount target and the driver runs.
    waits = set(pvc.depends_on)
    assert {r.urn for r in run.of_type(MOUNT_TARGET)} <= waits
    assert run.one(ADDON).urn in waits


@pytest.mark.program
def test_the_file_system_policy_admits_tls_mounts_through_mount_targets_and_no_root() -> None:
    run = build(inference_spec())
    fs_id = run.one(MOUNT_TARGET, "serve-models-us-east-1a").inputs["fileSystemId"]
    policy_resource = run.one(FILE_SYSTEM_POLICY, "serve-models-policy")
    assert policy_resource.inputs["fileSystemId"] == fs_id
    policy = json.loads(policy_resource.inputs["policy"])
    (allow,) = [s for s in policy["Statement"] if s["Effect"] == "Allow"]
    assert sorted(allow["Action"]) == ["elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite"]
    assert allow["Condition"] == {"Bool": {"elasticfilesystem:AccessedViaMountTarget": "true"}}
    (deny,) = [s for s in policy["Statement"] if s["Effect"] == "Deny"]
    assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert deny["Action"] == "*"
    assert {s["Resource"] for s in policy["Statement"]} == {allow["Resource"]}
    assert ":elasticfilesystem:" in allow["Resource"]
    # The driver mounts with TLS unless a volume turns encryptInTransit off; ours never does.
    sc = run.one(SC).inputs
    assert "encryptInTransit" not in sc["parameters"]
    assert "tls" not in (sc.get("mountOptions") or [])


@pytest.mark.program
def test_csi_addon_role_and_gpu_tolerations() -> None:
    run = build(inference_spec())
    role = run.one(IAM_ROLE)
    assert role.inputs["managedPolicyArns"] == ["service-role/AmazonEFSCSIDriverPolicy"]
    assert role.inputs["tags"] == {"namespace": "kube-system", "service-account": "efs-csi-controller-sa"}
    addon = run.one(ADDON)
    assert addon.inputs["addonName"] == "aws-efs-csi-driver"
    assert role.urn in addon.depends_on
    values = json.loads(addon.inputs["configurationValues"])
    assert values == {
        "node": {
            "tolerations": [
                {"effect": "NoSchedule", "key": "CriticalAddonsOnly", "operator": "Exists"},
                {"effect": "NoSchedule", "key": "nvidia.com/gpu", "operator": "Exists"},
                {"effect": "NoSchedule", "key": STARTUP_TAINT.key, "operator": "Exists"},
            ]
        }
    }


def test_inference_stack_plans_efs_with_mount_targets_and_a_claim(inference_stack: ShippedStack) -> None:
    """The shipped inference stack, through the whole program."""
    files, run = inference_stack.files, inference_stack.run
    fs = run.one(EFS)
    assert fs.protect and fs.inputs["throughputMode"] == "elastic"
    zones = files.config["gpu-clusters:network"]["availabilityZones"]
    assert len(run.of_type(MOUNT_TARGET)) == len(zones)
    claim = run.one(PVC).inputs["metadata"]
    assert (claim["namespace"], claim["name"]) == ("inference", "model-weights")
