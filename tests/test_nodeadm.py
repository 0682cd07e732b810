"""Node bootstrap rendering: kubelet flags, the nodeadm NodeConfig, its MIME user data, Bottlerocket TOML, AMIs.

User data is parsed back the way a node would read it (MIME with the email package, then YAML or TOML), so a
rendering bug cannot hide behind string comparisons.
"""

from __future__ import annotations

import email
import tomllib
from typing import Any

import pytest
import yaml

from components.config import Taint
from components.planning import nodeadm
from components.planning.pools import STARTUP_TAINT, PoolPlan
from tests.builders import first_pool_plan

ENDPOINT = "https://ABCDEF0123456789.gr7.us-east-1.eks.amazonaws.com"
CA = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJmYWtlCi0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K"


def plan_of(**pool: Any) -> PoolPlan:
    return first_pool_plan({"name": "pool", **pool}, name="train")


def p5() -> PoolPlan:
    return plan_of(role="training", instanceType="p5.48xlarge", labels={"team": "llm"}, scaling={"max": 4})


def parse_user_data(text: str) -> tuple[email.message.Message, list[email.message.Message]]:
    message = email.message_from_string(text)
    return message, [part for part in message.walk() if not part.is_multipart()]


# -------------------------------------------------------------------------------------------------- kubelet flags
def test_kubelet_flags_sort_labels_and_keep_taint_order() -> None:
    flags = nodeadm.kubelet_flags(
        {"zeta": "1", "alpha": "2", "nvidia.com/gpu.present": "true"},
        [Taint(key="nvidia.com/gpu", value="true"), Taint(key="dedicated", value="", effect="NoExecute")],
    )
    assert flags == [
        "--node-labels=alpha=2,nvidia.com/gpu.present=true,zeta=1",
        "--register-with-taints=nvidia.com/gpu=true:NoSchedule,dedicated=:NoExecute",
    ]


def test_kubelet_flags_leave_out_empty_flags() -> None:
    assert nodeadm.kubelet_flags({}, []) == []
    assert nodeadm.kubelet_flags({"a": "b"}, []) == ["--node-labels=a=b"]


# ------------------------------------------------------------------------------------------------------ NodeConfig
def test_node_config_carries_cluster_coordinates_flags_and_raid0() -> None:
    plan = p5()
    config = nodeadm.node_config("train", ENDPOINT, CA, "172.20.0.0/16", plan)
    assert config["apiVersion"] == "node.eks.aws/v1alpha1"
    assert config["kind"] == "NodeConfig"
    assert config["spec"]["cluster"] == {
        "name": "train",
        "apiServerEndpoint": ENDPOINT,
        "certificateAuthority": CA,
        "cidr": "172.20.0.0/16",
    }
    labels_flag, taints_flag = config["spec"]["kubelet"]["flags"]
    labels = dict(item.split("=", 1) for item in labels_flag.removeprefix("--node-labels=").split(","))
    assert labels == plan.labels
    assert labels["nvidia.com/gpu.present"] == "true"
    assert labels["k8s.amazonaws.com/accelerator"] == "nvidia-h100"
    assert labels["gpu-clusters/pool"] == "pool"
    assert labels["gpu-clusters/role"] == "training"
    assert labels["team"] == "llm"
    # the pool's taints, then the health gate's startup taint, which the node loses once its check passes
    assert taints_flag == f"--register-with-taints=nvidia.com/gpu=true:NoSchedule,{STARTUP_TAINT.render()}"
    assert config["spec"]["instance"] == {"localStorage": {"strategy": "RAID0"}}


def test_node_config_has_no_local_storage_without_a_strategy() -> None:
    system = plan_of(role="system", instanceType="m7i.xlarge")
    config = nodeadm.node_config("train", ENDPOINT, CA, "10.100.0.0/16", system)
    assert "instance" not in config["spec"]
    assert config["spec"]["kubelet"]["flags"] == [
        "--node-labels=gpu-clusters/pool=pool,gpu-clusters/role=system",
        "--register-with-taints=CriticalAddonsOnly=true:NoSchedule",
    ]


def test_inference_pool_with_nvme_gets_no_raid_unless_asked() -> None:
    assert (
        "instance"
        not in nodeadm.node_config(
            "t", ENDPOINT, CA, "172.20.0.0/16", plan_of(role="inference", instanceType="g6e.12xlarge")
        )["spec"]
    )
    asked = plan_of(role="inference", instanceType="g6e.48xlarge", localStorage="RAID10")
    config = nodeadm.node_config("t", ENDPOINT, CA, "172.20.0.0/16", asked)
    assert config["spec"]["instance"]["localStorage"]["strategy"] == "RAID10"


# ------------------------------------------------------------------------------------------------------ user data
def test_user_data_is_mime_multipart_with_one_nodeadm_part() -> None:
    config = nodeadm.node_config("train", ENDPOINT, CA, "172.20.0.0/16", p5())
    message, parts = parse_user_data(nodeadm.user_data(config))
    assert message.get_content_type() == "multipart/mixed"
    assert message.get_param("boundary") == nodeadm.MIME_BOUNDARY
    assert [part.get_content_type() for part in parts] == ["application/node.eks.aws"]
    payload = parts[0].get_payload()
    assert isinstance(payload, str)
    assert yaml.safe_load(payload) == config


def test_user_data_is_stable_between_renders() -> None:
    """A random MIME boundary would publish a new launch template version (and roll nodes) on every run."""
    config = nodeadm.node_config("train", ENDPOINT, CA, "172.20.0.0/16", p5())
    assert nodeadm.user_data(config) == nodeadm.user_data(config)


def test_long_certificate_survives_rendering_unfolded() -> None:
    long_ca = "QUJD" * 600
    config = nodeadm.node_config("train", ENDPOINT, long_ca, "172.20.0.0/16", p5())
    _, parts = parse_user_data(nodeadm.user_data(config))
    assert yaml.safe_load(str(parts[0].get_payload()))["spec"]["cluster"]["certificateAuthority"] == long_ca


def test_efa_pool_user_data_sets_huge_pages_before_the_kubelet_starts() -> None:
    """AL2023: a shell script part beside the NodeConfig. cloud-init runs it in its final stage, before
    nodeadm-run.service starts the kubelet, which then reports the pages as `hugepages-2Mi` capacity."""
    plan = p5()
    config = nodeadm.node_config("train", ENDPOINT, CA, "172.20.0.0/16", plan)
    _, parts = parse_user_data(nodeadm.pool_user_data(config, plan))
    assert [part.get_content_type() for part in parts] == ["application/node.eks.aws", "text/x-shellscript"]
    assert yaml.safe_load(str(parts[0].get_payload())) == config, "nodeadm still finds its one NodeConfig"
    script = str(parts[1].get_payload())
    assert script.startswith("#!/bin/bash\n")
    assert "vm.nr_hugepages = 5128\n" in script
    assert f"sysctl -p {nodeadm.SYSCTL_FILE}" in script


def test_pools_without_efa_get_no_script() -> None:
    for plan in (
        plan_of(role="system", instanceType="m7i.xlarge"),
        plan_of(role="inference", instanceType="g6e.48xlarge"),
    ):
        config = nodeadm.node_config("t", ENDPOINT, CA, "172.20.0.0/16", plan)
        _, parts = parse_user_data(nodeadm.pool_user_data(config, plan))
        assert [part.get_content_type() for part in parts] == ["application/node.eks.aws"]


# --------------------------------------------------------------------------------------------------- Bottlerocket
def test_bottlerocket_efa_pool_allocates_the_same_huge_pages() -> None:
    """Bottlerocket pre-allocates none; its sysctl setting gives EFA nodes the pages AL2023 nodes get."""
    plan = plan_of(role="training", instanceType="p5.48xlarge", amiFamily="bottlerocket")
    parsed = tomllib.loads(
        nodeadm.bottlerocket_user_data(nodeadm.bottlerocket_settings("t", ENDPOINT, CA, "172.20.0.0/16", plan))
    )
    assert parsed["settings"]["kernel"]["sysctl"] == {"vm.nr_hugepages": "5128"}
    cpu = plan_of(role="system", instanceType="m7i.xlarge", amiFamily="bottlerocket")
    assert "kernel" not in nodeadm.bottlerocket_settings("t", ENDPOINT, CA, "172.20.0.0/16", cpu)["settings"]


def test_bottlerocket_settings_parse_back_as_toml() -> None:
    plan = plan_of(
        role="training",
        instanceType="p5.48xlarge",
        amiFamily="bottlerocket",
        taints=[
            {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"},
            {"key": "nvidia.com/gpu", "value": "true", "effect": "NoExecute"},
        ],
    )
    settings = nodeadm.bottlerocket_settings("train", ENDPOINT, CA, "172.20.0.0/16", plan)
    parsed = tomllib.loads(nodeadm.bottlerocket_user_data(settings))
    kubernetes = parsed["settings"]["kubernetes"]
    assert kubernetes["cluster-name"] == "train"
    assert kubernetes["api-server"] == ENDPOINT
    assert kubernetes["cluster-certificate"] == CA
    assert kubernetes["cluster-dns-ip"] == "172.20.0.10"
    assert kubernetes["node-labels"] == plan.labels
    assert kubernetes["node-taints"] == {
        "nvidia.com/gpu": ["true:NoSchedule", "true:NoExecute"],
        STARTUP_TAINT.key: ["true:NoSchedule"],
    }
    command = parsed["settings"]["bootstrap-commands"]["000-mount-instance-storage"]
    assert command["commands"][0] == ["apiclient", "ephemeral-storage", "init"]
    assert command["commands"][1][:4] == ["apiclient", "ephemeral-storage", "bind", "--dirs"]
    assert set(command["commands"][1][4:]) == {"/var/lib/containerd", "/var/lib/kubelet", "/var/log/pods"}
    assert (command["essential"], command["mode"]) == (True, "always")


def test_bottlerocket_strings_with_quotes_and_unicode_round_trip() -> None:
    settings = {"settings": {"kubernetes": {"node-labels": {"a/b": 'say "hi" \\ ok', "ü": "ß"}}}}
    assert tomllib.loads(nodeadm.bottlerocket_user_data(settings)) == settings


def test_bottlerocket_system_pool_has_only_the_system_taint_and_no_raid() -> None:
    settings = nodeadm.bottlerocket_settings(
        "t", ENDPOINT, CA, "10.100.0.0/16", plan_of(role="system", instanceType="m7i.xlarge", amiFamily="bottlerocket")
    )
    parsed = tomllib.loads(nodeadm.bottlerocket_user_data(settings))
    assert parsed["settings"]["kubernetes"]["node-taints"] == {"CriticalAddonsOnly": ["true:NoSchedule"]}
    assert "bootstrap-commands" not in parsed["settings"]
    assert parsed["settings"]["kubernetes"]["cluster-dns-ip"] == "10.100.0.10"


def test_cluster_dns_ip_is_the_tenth_service_address() -> None:
    assert nodeadm.cluster_dns_ip("172.20.0.0/16") == "172.20.0.10"
    assert nodeadm.cluster_dns_ip("10.100.0.0/16") == "10.100.0.10"


# ------------------------------------------------------------------------------------------------------------ AMIs
@pytest.mark.parametrize(
    ("family", "arch", "gpu", "expected"),
    [
        (
            "al2023",
            "x86_64",
            True,
            "/aws/service/eks/optimized-ami/1.35/amazon-linux-2023/x86_64/nvidia/"
            "amazon-eks-node-al2023-x86_64-nvidia-1.35-v20260714/image_id",
        ),
        (
            "al2023",
            "x86_64",
            False,
            "/aws/service/eks/optimized-ami/1.35/amazon-linux-2023/x86_64/standard/"
            "amazon-eks-node-al2023-x86_64-standard-1.35-v20260714/image_id",
        ),
        (
            "al2023",
            "arm64",
            True,
            "/aws/service/eks/optimized-ami/1.35/amazon-linux-2023/arm64/nvidia/"
            "amazon-eks-node-al2023-arm64-nvidia-1.35-v20260714/image_id",
        ),
        ("bottlerocket", "x86_64", True, "/aws/service/bottlerocket/aws-k8s-1.35-nvidia/x86_64/1.42.0/image_id"),
        ("bottlerocket", "x86_64", False, "/aws/service/bottlerocket/aws-k8s-1.35/x86_64/1.42.0/image_id"),
    ],
)
def test_ami_parameters_name_one_pinned_release(family: str, arch: str, gpu: bool, expected: str) -> None:
    """The release's own parameter, never `recommended`/`latest`, which move whenever AWS publishes an image."""
    release = "v20260714" if family == "al2023" else "v1.42.0"
    assert nodeadm.ami_ssm_parameter("1.35", family, arch, gpu, release) == expected


def test_ami_parameter_rejects_unknown_family_and_arch() -> None:
    with pytest.raises(ValueError, match="AMI family"):
        nodeadm.ami_ssm_parameter("1.35", "ubuntu", "x86_64", True, "v20260714")
    with pytest.raises(ValueError, match="architecture"):
        nodeadm.ami_ssm_parameter("1.35", "al2023", "riscv64", False, "v20260714")
