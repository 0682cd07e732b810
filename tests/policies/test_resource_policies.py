"""Every resource policy: a compliant resource passes, a broken one is reported, through `ResourceValidationArgs`."""

from __future__ import annotations

import copy
import json
from importlib import metadata
from typing import Any

import pytest
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, UnknownValueError

from policies import aws_resource_types
from tests.builders import (
    AUTOSCALING_GROUP,
    BUCKET,
    EFS,
    EKS_CLUSTER,
    HELM_RELEASE,
    KMS_KEY,
    LAUNCH_TEMPLATE,
    LUSTRE,
    ROLE_POLICY_ATTACHMENT,
    SECURITY_GROUP,
    SG_INGRESS_RULE,
    SUBNET,
)
from tests.policies import resource_args, validate
from tests.policies.stacks import COST_TAGS, find, good_stack

LT = LAUNCH_TEMPLATE
CLUSTER = EKS_CLUSTER
RELEASE = HELM_RELEASE


def inputs(name: str) -> dict[str, Any]:
    """A deep copy of the compliant stack's inputs for one resource, to break."""
    return copy.deepcopy(find(good_stack(), name)["inputs"])


def check(policy: str, type_: str, props: dict[str, Any], **kw: Any) -> list[str]:
    return validate(policy, resource_args(type_, props, name=kw.pop("name", "r"), **kw))


# ------------------------------------------------------------------------------------------------ EFA interfaces
def test_efa_interfaces_complete_accepts_the_planners_p5_layout() -> None:
    assert check("efa-interfaces-complete", LT, inputs("good-train-lt")) == []


def test_efa_interfaces_complete_reports_missing_devices() -> None:
    props = inputs("good-train-lt")
    props["networkInterfaces"] = props["networkInterfaces"][:5]  # the ENA primary + 4 EFA devices
    assert check("efa-interfaces-complete", LT, props, name="train") == [
        "launch template 'train' wires 4 of the 32 EFA devices of p5.48xlarge; wire one EFA interface on each "
        "EFA network card (0-31)"
    ]


def test_efa_interfaces_complete_reports_efa_only_primary_and_card_without_efa() -> None:
    props = inputs("good-train-lt")
    props["instanceType"] = "p6-b300.48xlarge"  # 16 EFA devices on cards 1..16; card 0 is ENA-only
    props["networkInterfaces"] = [{"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "efa-only"}] + [
        {"networkCardIndex": c, "deviceIndex": 0, "interfaceType": "efa-only"} for c in range(1, 16)
    ]
    messages = check("efa-interfaces-complete", LT, props, name="b300")
    assert messages == [
        "launch template 'b300' puts EFA interfaces on network cards 0, which carry no EFA on p6-b300.48xlarge",
        "launch template 'b300': the primary interface (card 0, device 0) cannot be efa-only",
    ]


def test_efa_interfaces_complete_reports_types_without_efa_and_unknown_types() -> None:
    props = inputs("good-train-lt")
    props["instanceType"] = "g6e.xlarge"
    assert check("efa-interfaces-complete", LT, props, name="x") == [
        "launch template 'x' wires EFA, but g6e.xlarge has no EFA"
    ]
    props["instanceType"] = "p5.48xlargee"
    [message] = check("efa-interfaces-complete", LT, props, name="x")
    assert "cannot be checked" in message and "p5.48xlarge" in message  # the catalog suggests the close name


def test_efa_interfaces_complete_ignores_templates_without_efa() -> None:
    assert check("efa-interfaces-complete", LT, inputs("good-infer-lt")) == []


# ---------------------------------------------------------------------------------------------------- nodes
def test_imdsv2_required() -> None:
    assert check("imdsv2-required", LT, inputs("good-train-lt")) == []
    props = inputs("good-train-lt")
    props["metadataOptions"] = {"httpTokens": "optional", "httpPutResponseHopLimit": 3}
    assert check("imdsv2-required", LT, props, name="lt") == [
        "launch template 'lt' allows IMDSv1 (metadataOptions.httpTokens is 'optional', not 'required')",
        "launch template 'lt' sets an IMDS hop limit of 3; at most 2 is allowed",
    ]
    del props["metadataOptions"]
    assert check("imdsv2-required", LT, props, name="lt") == [
        "launch template 'lt' allows IMDSv1 (metadataOptions.httpTokens is 'optional', not 'required')"
    ]


def test_imdsv2_hop_limit_comes_from_policy_config() -> None:
    props = inputs("good-train-lt")
    props["metadataOptions"]["httpPutResponseHopLimit"] = 2
    assert check("imdsv2-required", LT, props) == []
    assert len(check("imdsv2-required", LT, props, config={"maxHopLimit": 1})) == 1


def test_no_public_ip() -> None:
    assert check("no-public-ip", LT, inputs("good-train-lt")) == []
    props = inputs("good-train-lt")
    props["networkInterfaces"][0]["associatePublicIpAddress"] = "true"  # the provider types it as a string
    assert check("no-public-ip", LT, props, name="lt") == [
        "launch template 'lt' asks for a public IP on network card 0, device 0 (associatePublicIpAddress)"
    ]


def test_encrypted_root_volume() -> None:
    assert check("encrypted-root-volume", LT, inputs("good-train-lt")) == []
    props = inputs("good-train-lt")
    props["blockDeviceMappings"][0]["ebs"]["encrypted"] = "false"
    assert check("encrypted-root-volume", LT, props, name="lt") == [
        "launch template 'lt': EBS volume /dev/xvda is not encrypted"
    ]
    props["blockDeviceMappings"][0]["ebs"] = {"encrypted": "true"}
    assert check("encrypted-root-volume", LT, props, name="lt") == [
        "launch template 'lt': EBS volume /dev/xvda is encrypted without a KMS key (kmsKeyId)"
    ]
    assert check("encrypted-root-volume", LT, props, config={"requireKmsKey": False}) == []
    del props["blockDeviceMappings"]
    assert check("encrypted-root-volume", LT, props, name="lt") == [
        "launch template 'lt' has no EBS block device mapping, so its root volume encryption is left to the AMI"
    ]


# ----------------------------------------------------------------------------------------------------- data
def test_storage_encrypted_efs() -> None:
    assert check("storage-encrypted", EFS, inputs("good-models")) == []
    props = inputs("good-models")
    props["encrypted"] = False
    assert check("storage-encrypted", EFS, props, name="models") == [
        "EFS file system 'models' is not encrypted at rest (encrypted: true)"
    ]
    props = inputs("good-models")
    del props["kmsKeyId"]
    assert check("storage-encrypted", EFS, props, name="models") == [
        "EFS file system 'models' is encrypted without a KMS key (kmsKeyId)"
    ]
    assert check("storage-encrypted", EFS, props, config={"requireKmsKey": False}) == []


def test_storage_encrypted_lustre() -> None:
    assert check("storage-encrypted", LUSTRE, inputs("good-lustre")) == []
    props = inputs("good-lustre")
    del props["kmsKeyId"]
    assert check("storage-encrypted", LUSTRE, props, name="fs") == [
        "Lustre file system 'fs' is encrypted only with the FSx-managed key; set kmsKeyId"
    ]
    scratch = {"deploymentType": "SCRATCH_2", "storageCapacity": 1200}
    assert check("storage-encrypted", LUSTRE, scratch, name="fs") == [
        "Lustre file system 'fs' is SCRATCH_2, which cannot use a KMS key of yours; use PERSISTENT_2 with kmsKeyId"
    ]


@pytest.mark.parametrize(
    "type_, name",
    [
        (KMS_KEY, "good-key"),
        (LUSTRE, "good-lustre"),
        (EFS, "good-models"),
        (BUCKET, "good-checkpoints"),
    ],
)
def test_stateful_resources_must_be_protected(type_: str, name: str) -> None:
    assert check("stateful-resources-protected", type_, inputs(name), protect=True) == []
    [message] = check("stateful-resources-protected", type_, inputs(name), name=name)
    assert f"'{name}' holds state but is not protected" in message


def test_stateful_tag_marks_any_resource_stateful() -> None:
    props = {"tags": {"gpu-clusters/stateful": "true"}}
    assert check("stateful-resources-protected", "aws:ec2/volume:Volume", props, protect=True) == []
    assert len(check("stateful-resources-protected", "aws:ec2/volume:Volume", props)) == 1
    assert check("stateful-resources-protected", SUBNET, {"tags": {}}) == []


@pytest.mark.parametrize(
    "props",
    [
        {"deploymentType": "PERSISTENT_2", "storageCapacity": 1200, "perUnitStorageThroughput": 125},
        {"deploymentType": "PERSISTENT_2", "storageCapacity": 9600, "perUnitStorageThroughput": 250},
        {"deploymentType": "PERSISTENT_2", "storageCapacity": 9600, "perUnitStorageThroughput": 500,
         "efaEnabled": True, "metadataConfiguration": {"mode": "AUTOMATIC"}},
        {"deploymentType": "SCRATCH_2", "storageCapacity": 2400},
        {"deploymentType": "SCRATCH_1", "storageCapacity": 3600},
        {"storageCapacity": 1200},  # the API default, SCRATCH_1
        {"deploymentType": "PERSISTENT_1", "storageCapacity": 4800, "perUnitStorageThroughput": 200},
        {"deploymentType": "PERSISTENT_1", "storageType": "HDD", "storageCapacity": 1800,
         "perUnitStorageThroughput": 40},
    ],
)  # fmt: skip
def test_lustre_valid_sizes_pass(props: dict[str, Any]) -> None:
    assert check("lustre-valid-size", LUSTRE, props) == []


@pytest.mark.parametrize(
    "props, expected",
    [
        ({"deploymentType": "PERSISTENT_2", "storageCapacity": 3000, "perUnitStorageThroughput": 250},
         "capacity must be 1200, 2400 or a multiple of 2400 GiB"),
        ({"deploymentType": "PERSISTENT_2", "storageCapacity": 2400, "perUnitStorageThroughput": 200},
         "perUnitStorageThroughput 200 is not one of [125, 250, 500, 1000]"),
        ({"deploymentType": "PERSISTENT_2", "storageCapacity": 4800, "perUnitStorageThroughput": 500,
          "efaEnabled": True, "metadataConfiguration": {"mode": "AUTOMATIC"}},
         "an EFA-enabled file system at 500 MB/s/TiB grows in steps of 9600 GiB"),
        ({"deploymentType": "SCRATCH_2", "storageCapacity": 4800, "efaEnabled": True},
         "EFA needs PERSISTENT_2"),
        ({"deploymentType": "SCRATCH_2", "storageCapacity": 2400, "perUnitStorageThroughput": 200},
         "SCRATCH file systems take no perUnitStorageThroughput"),
        ({"deploymentType": "SCRATCH_1", "storageCapacity": 4800},
         "capacity must be 1200, 2400 or a multiple of 3600 GiB"),
        ({"deploymentType": "PERSISTENT_1", "storageType": "HDD", "storageCapacity": 1800,
          "perUnitStorageThroughput": 12}, "HDD at 12 MB/s/TiB grows in steps of 6000 GiB"),
    ],
)  # fmt: skip
def test_lustre_invalid_sizes_fail(props: dict[str, Any], expected: str) -> None:
    messages = check("lustre-valid-size", LUSTRE, props, name="fs")
    assert any(m.endswith(expected) for m in messages), messages
    assert all(m.startswith("Lustre file system 'fs' (") for m in messages)


# -------------------------------------------------------------------------------------------- control plane
def test_eks_endpoint_private() -> None:
    assert check("eks-endpoint-private", CLUSTER, inputs("good")) == []
    allow_listed = inputs("good")
    allow_listed["vpcConfig"].update(endpointPublicAccess=True, publicAccessCidrs=["203.0.113.0/24"])
    assert check("eks-endpoint-private", CLUSTER, allow_listed) == []
    props = inputs("good")
    props["vpcConfig"] = {"subnetIds": ["subnet-0a"]}  # EKS defaults: public to the world, no private endpoint
    assert check("eks-endpoint-private", CLUSTER, props, name="c") == [
        "EKS cluster 'c' has no private API endpoint (vpcConfig.endpointPrivateAccess)",
        "EKS cluster 'c' has a public API endpoint without an allow-list (publicAccessCidrs)",
    ]
    allow_listed["vpcConfig"]["publicAccessCidrs"] = ["0.0.0.0/0"]
    assert check("eks-endpoint-private", CLUSTER, allow_listed, name="c") == [
        "EKS cluster 'c' opens its public API endpoint to 0.0.0.0/0"
    ]


def test_eks_secrets_encryption() -> None:
    assert check("eks-secrets-encryption", CLUSTER, inputs("good")) == []
    props = inputs("good")
    del props["encryptionConfig"]
    assert check("eks-secrets-encryption", CLUSTER, props, name="c") == [
        "EKS cluster 'c' does not encrypt secrets with a KMS key (encryptionConfig)"
    ]
    props["encryptionConfig"] = {"provider": {"keyArn": "arn:aws:kms:k"}, "resources": []}
    assert len(check("eks-secrets-encryption", CLUSTER, props)) == 1


def test_eks_control_plane_logging() -> None:
    assert check("eks-control-plane-logging", CLUSTER, inputs("good")) == []
    props = inputs("good")
    props["enabledClusterLogTypes"] = ["api"]
    assert check("eks-control-plane-logging", CLUSTER, props, name="c") == [
        "EKS cluster 'c' does not log audit, authenticator (enabledClusterLogTypes)"
    ]
    assert check("eks-control-plane-logging", CLUSTER, props, config={"requiredLogTypes": ["api"]}) == []


# -------------------------------------------------------------------------------------------------- network
def test_no_public_ingress_inline_rules() -> None:
    assert check("no-public-ingress", SECURITY_GROUP, inputs("good-node")) == []
    props = inputs("good-node")
    props["ingress"].append({"protocol": "tcp", "fromPort": 22, "toPort": 22, "ipv6CidrBlocks": ["::/0"]})
    assert check("no-public-ingress", SECURITY_GROUP, props, name="sg") == [
        "security group 'sg' accepts ingress from ::/0 on tcp 22-22"
    ]


@pytest.mark.parametrize(
    "type_, props",
    [
        (SG_INGRESS_RULE, {"cidrIpv4": "0.0.0.0/0", "ipProtocol": "-1"}),
        (
            "aws:ec2/securityGroupRule:SecurityGroupRule",
            {"type": "ingress", "cidrBlocks": ["0.0.0.0/0"], "protocol": "-1"},
        ),
    ],
)
def test_no_public_ingress_standalone_rules(type_: str, props: dict[str, Any]) -> None:
    assert check("no-public-ingress", type_, props, name="open") == [
        "ingress rule 'open' accepts traffic from 0.0.0.0/0 on all ports"
    ]
    private = {
        k: (["10.0.0.0/8"] if isinstance(v, list) else "10.0.0.0/8") if "cidr" in k else v for k, v in props.items()
    }
    assert check("no-public-ingress", type_, private) == []


def test_no_public_ingress_allows_open_egress() -> None:
    egress = {"type": "egress", "cidrBlocks": ["0.0.0.0/0"], "protocol": "-1"}
    assert check("no-public-ingress", "aws:ec2/securityGroupRule:SecurityGroupRule", egress) == []


# --------------------------------------------------------------------------------------------- supply chain
def test_helm_chart_pinned_accepts_the_catalog_pins() -> None:
    for name in ("nvidia-device-plugin", "aws-efa-k8s-device-plugin", "aws-node-termination-handler"):
        assert check("helm-chart-pinned", RELEASE, inputs(name)) == [], name


@pytest.mark.parametrize("version", [None, "", "latest", "~0.20", "^0.20.0", ">=0.17", "0.20.x", "0.20"])
def test_helm_chart_pinned_rejects_floating_versions(version: str | None) -> None:
    props = inputs("nvidia-device-plugin")
    props["version"] = version
    [message] = check("helm-chart-pinned", RELEASE, props, name="nvdp")
    assert message.startswith("Helm release 'nvdp' (nvidia-device-plugin) floats:")


def test_helm_chart_pinned_needs_a_repository() -> None:
    props = inputs("nvidia-device-plugin")
    props["repositoryOpts"] = {}
    assert check("helm-chart-pinned", RELEASE, props, name="nvdp") == [
        "Helm release 'nvdp' (nvidia-device-plugin) has no https/oci repositoryOpts.repo"
    ]
    props["repositoryOpts"] = {"repo": "http://charts.example.com"}
    assert len(check("helm-chart-pinned", RELEASE, props)) == 1


# ----------------------------------------------------------------------------------------------------- cost
def test_cost_allocation_tags() -> None:
    assert check("cost-allocation-tags", LT, inputs("good-train-lt")) == []
    props = inputs("good-train-lt")
    props["tags"] = {"team": "ml-platform"}
    assert check("cost-allocation-tags", LT, props, name="lt") == [
        "LaunchTemplate 'lt' lacks the cost-allocation tags cost-center"
    ]
    assert check("cost-allocation-tags", LT, props, config={"requiredTags": ["team"]}) == []


def test_cost_allocation_tags_reads_asg_tag_lists_and_provider_default_tags() -> None:
    asg = inputs("good-train")
    assert check("cost-allocation-tags", AUTOSCALING_GROUP, asg) == []
    del asg["tags"]
    assert len(check("cost-allocation-tags", AUTOSCALING_GROUP, asg)) == 1
    assert check("cost-allocation-tags", AUTOSCALING_GROUP, asg, provider_default_tags=COST_TAGS) == []


def test_cost_allocation_tags_skips_types_that_take_no_tags() -> None:
    untaggable = {"role": "r", "policyArn": "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy"}
    assert check("cost-allocation-tags", ROLE_POLICY_ATTACHMENT, untaggable) == []
    assert len(check("cost-allocation-tags", SUBNET, {"cidrBlock": "10.0.0.0/24"})) == 1


def test_cost_allocation_tags_knows_types_whose_sdk_module_is_renamed() -> None:
    """`lambda` is a Python keyword: the SDK keeps `aws:lambda/...` types in `pulumi_aws.lambda_`."""
    assert check("cost-allocation-tags", "aws:lambda/function:Function", {"role": "arn"}, name="fn") == [
        "Function 'fn' lacks the cost-allocation tags team, cost-center"
    ]


def test_the_resource_types_were_read_from_the_installed_provider_sdk() -> None:
    table = json.loads(aws_resource_types.PATH.read_text())
    assert table["pulumiAws"] == metadata.version("pulumi_aws"), "run `python -m blueprint.aws_resource_types --write`"


# ------------------------------------------------------------------------------------------------- preview
def test_unknown_values_raise_as_the_sdk_expects() -> None:
    """During a preview a value may be unknown; the policy must not guess (the SDK reports it as advisory)."""
    props = inputs("good-train-lt")
    props["metadataOptions"]["httpTokens"] = UNKNOWN_STRING_VALUE
    with pytest.raises(UnknownValueError):
        check("imdsv2-required", LT, props)


def test_resource_policies_ignore_other_types() -> None:
    props = {"metadataOptions": {"httpTokens": "optional"}}
    assert check("imdsv2-required", "aws:ec2/instance:Instance", props) == []
