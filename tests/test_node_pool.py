"""NodePool under Pulumi mocks: what the launch template, security group, placement group and ASG register."""

from __future__ import annotations

import base64
import email
import tomllib
from typing import Any

import pytest
import yaml

from blueprint.plan.monitor import Registration
from blueprint.plan.runner import ProgramRun
from components.config import StackConfig
from components.context import ClusterContext
from components.node_pool import NodePool
from components.planning.pools import STARTUP_TAINT
from components.planning.stack_plan import plan_pools
from tests.builders import (
    AUTOSCALING_GROUP,
    LAUNCH_TEMPLATE,
    P5,
    PLACEMENT_GROUP,
    SECURITY_GROUP,
    SG_INGRESS_RULE,
    SYSTEM,
    THREE_ZONES,
    ShippedStack,
    once_per_config,
    run_with_context,
    stack_config,
)
from tests.fakes import CERTIFICATE_AUTHORITY, CLUSTER_ENDPOINT, KMS_KEY_ARN, NODE_SECURITY_GROUP_ID, subnet_id

LT = LAUNCH_TEMPLATE
ASG = AUTOSCALING_GROUP
SG = SECURITY_GROUP
INGRESS = SG_INGRESS_RULE
EGRESS = "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"
PG = PLACEMENT_GROUP
CA_PREFIX = "k8s.io/cluster-autoscaler/"
NT = "k8s.io/cluster-autoscaler/node-template"

SPOT = {
    "name": "l40s",
    "role": "inference",
    "instanceType": "g6e.12xlarge",
    "capacity": {
        "type": "spot",
        "spotInstanceTypes": ["g6e.24xlarge"],
        "onDemandBaseCapacity": 1,
        "onDemandPercentageAboveBase": 25,
    },
    "scaling": {"min": 1, "desired": 2, "max": 8},
}


def spec_of(*pools: dict[str, Any]) -> StackConfig:
    return stack_config(*pools, name="t", cluster={"tags": {"team": "ml"}}, zones=THREE_ZONES)


def build(*pools: dict[str, Any]) -> tuple[ProgramRun, dict[str, NodePool]]:
    return build_pools(spec_of(*pools))


@once_per_config
def build_pools(spec: StackConfig) -> tuple[ProgramRun, dict[str, NodePool]]:
    built: dict[str, NodePool] = {}

    def add_pools(ctx: ClusterContext) -> None:
        for plan in plan_pools(spec):
            built[plan.name] = NodePool(f"t-{plan.name}", plan, ctx)

    return run_with_context(spec, add_pools), built


def asg_tags(asg: Registration) -> dict[str, tuple[str, bool]]:
    return {t["key"]: (t["value"], t["propagateAtLaunch"]) for t in asg.inputs["tags"]}


def decoded_user_data(lt: Registration) -> str:
    return base64.b64decode(lt.inputs["userData"]).decode()


def node_config(lt: Registration) -> dict[str, Any]:
    message = email.message_from_string(decoded_user_data(lt))
    parts = [p for p in message.walk() if p.get_content_type() == "application/node.eks.aws"]
    assert len(parts) == 1
    loaded: dict[str, Any] = yaml.safe_load(str(parts[0].get_payload()))
    return loaded


# -------------------------------------------------------------------------------------------------- EFA training
@pytest.fixture(scope="module")
def p5_run() -> tuple[ProgramRun, dict[str, NodePool]]:
    return build(P5)


@pytest.mark.program
def test_p5_launch_template_wires_32_efa_devices_in_the_current_layout(p5_run: tuple[ProgramRun, Any]) -> None:
    lt = p5_run[0].one(LT, "t-h100")
    slots = [(i["networkCardIndex"], i["deviceIndex"], i["interfaceType"]) for i in lt.inputs["networkInterfaces"]]
    assert slots == [(0, 0, "interface"), (0, 1, "efa-only")] + [(card, 0, "efa-only") for card in range(1, 32)]
    assert lt.inputs["instanceType"] == "p5.48xlarge"


@pytest.mark.program
def test_every_interface_has_node_and_efa_groups_and_no_public_ip(p5_run: tuple[ProgramRun, Any]) -> None:
    run = p5_run[0]
    ingress = run.one(INGRESS, "t-h100-efa-in-self")
    efa_sg_id = ingress.inputs["securityGroupId"]
    for interface in run.one(LT, "t-h100").inputs["networkInterfaces"]:
        assert interface["securityGroups"] == [NODE_SECURITY_GROUP_ID, efa_sg_id]
        assert interface["associatePublicIpAddress"] == "false"
        assert interface["deleteOnTermination"] == "true"


@pytest.mark.program
def test_efa_security_group_allows_all_traffic_to_and_from_itself(p5_run: tuple[ProgramRun, Any]) -> None:
    run = p5_run[0]
    sg = run.one(SG, "t-h100-efa")
    assert sg.inputs["vpcId"] == "vpc-0123456789abcdef0"
    assert "ingress" not in sg.inputs and "egress" not in sg.inputs, "rules are standalone resources"
    for token, name in ((INGRESS, "t-h100-efa-in-self"), (EGRESS, "t-h100-efa-out-self")):
        rule = run.one(token, name)
        assert rule.inputs["ipProtocol"] == "-1"
        assert rule.inputs["referencedSecurityGroupId"] == rule.inputs["securityGroupId"]
        assert rule.inputs["securityGroupId"].startswith("sg-")
        assert rule.inputs["securityGroupId"] != NODE_SECURITY_GROUP_ID
        assert rule.parent == sg.urn
        assert "cidrIpv4" not in rule.inputs


@pytest.mark.program
def test_p5_pool_gets_a_cluster_placement_group_in_one_az(p5_run: tuple[ProgramRun, dict[str, NodePool]]) -> None:
    run, built = p5_run
    pg = run.one(PG, "t-h100")
    assert pg.inputs["strategy"] == "cluster"
    # The mocks give a resource its logical name as physical name: the template points at this group.
    assert run.one(LT, "t-h100").inputs["placement"] == {"groupName": pg.name}
    assert run.one(ASG, "t-h100").inputs["vpcZoneIdentifiers"] == [subnet_id("us-east-1a")]
    assert built["h100"].placement_group is not None
    assert built["h100"].efa_security_group is not None


@pytest.mark.program
def test_imds_v2_required_encrypted_gp3_root_and_latest_template_version(p5_run: tuple[ProgramRun, Any]) -> None:
    lt = p5_run[0].one(LT, "t-h100")
    assert lt.inputs["metadataOptions"] == {
        "httpEndpoint": "enabled",
        "httpTokens": "required",
        "httpPutResponseHopLimit": 1,
    }
    assert lt.inputs["blockDeviceMappings"] == [
        {
            "deviceName": "/dev/xvda",
            "ebs": {
                "volumeSize": 200,
                "volumeType": "gp3",
                "encrypted": "true",
                "kmsKeyId": KMS_KEY_ARN,
                "deleteOnTermination": "true",
            },
        }
    ]
    assert lt.inputs["updateDefaultVersion"] is True
    assert lt.inputs["iamInstanceProfile"] == {"arn": "arn:aws:iam::123456789012:instance-profile/t-h100-node"}
    assert lt.inputs["imageId"].startswith("ami-")
    assert "instanceMarketOptions" not in lt.inputs
    assert "capacityReservationSpecification" not in lt.inputs


@pytest.mark.program
def test_p5_user_data_is_a_nodeadm_config_with_raid0(p5_run: tuple[ProgramRun, Any]) -> None:
    config = node_config(p5_run[0].one(LT, "t-h100"))
    assert config["spec"]["cluster"] == {
        "name": "t",
        "apiServerEndpoint": CLUSTER_ENDPOINT,
        "certificateAuthority": CERTIFICATE_AUTHORITY,
        "cidr": "172.20.0.0/16",
    }
    assert config["spec"]["instance"] == {"localStorage": {"strategy": "RAID0"}}
    flags = config["spec"]["kubelet"]["flags"]
    assert f"--register-with-taints=nvidia.com/gpu=true:NoSchedule,{STARTUP_TAINT.render()}" in flags
    assert any(f.startswith("--node-labels=") and "nvidia.com/gpu.present=true" in f for f in flags)


@pytest.mark.program
def test_asg_ignores_desired_capacity_and_references_the_template_version(p5_run: tuple[ProgramRun, Any]) -> None:
    asg = p5_run[0].one(ASG, "t-h100")
    assert asg.ignore_changes == ["desiredCapacity"]
    assert (asg.inputs["minSize"], asg.inputs["desiredCapacity"], asg.inputs["maxSize"]) == (0, 0, 4)
    assert asg.inputs["launchTemplate"]["version"] == "1", "the latest version number, so changes start a refresh"
    assert asg.inputs["launchTemplate"]["id"].startswith("lt-")
    assert "mixedInstancesPolicy" not in asg.inputs
    assert asg.inputs["capacityRebalance"] is False
    assert asg.inputs["protectFromScaleIn"] is False
    assert asg.inputs["waitForCapacityTimeout"] == "0"
    assert asg.inputs["healthCheckGracePeriod"] == 300
    assert "instanceRefresh" not in asg.inputs, "training pools do not roll running jobs by default"


@pytest.mark.program
def test_asg_tags_pool_identity_and_scale_from_zero_template(p5_run: tuple[ProgramRun, Any]) -> None:
    tags = asg_tags(p5_run[0].one(ASG, "t-h100"))
    assert tags["gpu-clusters/cluster"] == ("t", True)
    assert tags["team"] == ("ml", True)
    assert tags["gpu-clusters/pool"] == ("h100", True)
    assert tags["gpu-clusters/role"] == ("training", True)
    assert tags["gpu-clusters/capacity-type"] == ("on-demand", True)
    assert tags["gpu-clusters/taints"] == (f"nvidia.com/gpu=true:NoSchedule,{STARTUP_TAINT.render()}", True)
    # the scale-from-zero template describes the node once admitted: no startup taint there
    assert not any(STARTUP_TAINT.key in key for key in tags)
    assert tags["gpu-clusters/efa-devices"] == ("32", True)
    assert tags[f"{CA_PREFIX}enabled"] == ("true", False)
    assert tags[f"{CA_PREFIX}t"] == ("owned", False)
    assert tags[f"{NT}/taint/nvidia.com/gpu"] == ("true:NoSchedule", False)
    assert tags[f"{NT}/label/nvidia.com/gpu.present"] == ("true", False)
    assert tags[f"{NT}/label/gpu-clusters/pool"] == ("h100", False)
    assert tags[f"{NT}/resources/nvidia.com/gpu"] == ("8", False)
    assert tags[f"{NT}/resources/vpc.amazonaws.com/efa"] == ("32", False)
    assert tags["aws-node-termination-handler/managed"] == ("true", True), "every pool drains, on-demand too"
    assert all(not propagate for key, (_, propagate) in tags.items() if key.startswith(CA_PREFIX))


@pytest.mark.program
def test_asg_propagates_the_node_identity_tag_to_instances(p5_run: tuple[ProgramRun, Any]) -> None:
    """EKS requires `kubernetes.io/cluster/<cluster>=owned` on every self-managed node (user guide, worker.html),
    and the AWS cloud provider ignores instances without it when it looks nodes up."""
    assert asg_tags(p5_run[0].one(ASG, "t-h100"))["kubernetes.io/cluster/t"] == ("owned", True)


@pytest.mark.program
def test_p5_asg_and_user_data_agree_on_huge_pages_and_max_pods(p5_run: tuple[ProgramRun, Any]) -> None:
    """The node template promises what the node's kubelet will report: the pages the user data sets aside and the
    maxPods its NodeConfig states."""
    run = p5_run[0]
    tags = asg_tags(run.one(ASG, "t-h100"))
    assert tags[f"{NT}/resources/hugepages-2Mi"] == ("10256Mi", False)
    assert tags[f"{NT}/resources/pods"] == ("51", False)
    lt = run.one(LT, "t-h100")
    assert node_config(lt)["spec"]["kubelet"]["config"] == {"maxPods": 51}
    message = email.message_from_string(decoded_user_data(lt))
    (script,) = [p for p in message.walk() if p.get_content_type() == "text/x-shellscript"]
    assert "vm.nr_hugepages = 5128" in str(script.get_payload())


@pytest.mark.program
def test_launch_template_tags_instances_volumes_and_interfaces(p5_run: tuple[ProgramRun, Any]) -> None:
    specs = {s["resourceType"]: s["tags"] for s in p5_run[0].one(LT, "t-h100").inputs["tagSpecifications"]}
    assert set(specs) == {"instance", "volume", "network-interface"}
    assert specs["instance"]["Name"] == "t-h100"
    for tags in specs.values():
        assert tags["gpu-clusters/pool"] == "h100"
        assert tags["gpu-clusters/cluster"] == "t"


@pytest.mark.program
def test_children_are_parented_to_the_pool(p5_run: tuple[ProgramRun, Any]) -> None:
    run = p5_run[0]
    pool = run.one("gpu-clusters:index:NodePool", "t-h100")
    for token in (LT, ASG, SG, PG):
        (child,) = [r for r in run.of_type(token) if r.name.startswith("t-h100")]
        assert child.parent == pool.urn


# ------------------------------------------------------------------------------------------------------- capacity
@pytest.mark.program
def test_spot_pool_mixes_same_shape_types_with_rebalance_and_termination_handler() -> None:
    run, built = build(SPOT)
    asg = run.one(ASG, "t-l40s")
    assert "launchTemplate" not in asg.inputs
    policy = asg.inputs["mixedInstancesPolicy"]
    assert policy["instancesDistribution"] == {
        "onDemandBaseCapacity": 1,
        "onDemandPercentageAboveBaseCapacity": 25,
        "spotAllocationStrategy": "price-capacity-optimized",
    }
    assert [o["instanceType"] for o in policy["launchTemplate"]["overrides"]] == ["g6e.12xlarge", "g6e.24xlarge"]
    assert policy["launchTemplate"]["launchTemplateSpecification"]["version"] == "1"
    assert asg.inputs["capacityRebalance"] is True
    tags = asg_tags(asg)
    assert tags["aws-node-termination-handler/managed"] == ("true", True)
    assert tags["gpu-clusters/capacity-type"] == ("spot", True)
    assert (asg.inputs["minSize"], asg.inputs["desiredCapacity"], asg.inputs["maxSize"]) == (1, 2, 8)
    assert asg.inputs["vpcZoneIdentifiers"] == [subnet_id(z) for z in ("us-east-1a", "us-east-1b", "us-east-1c")]
    assert run.one(LT, "t-l40s").inputs["instanceType"] == "g6e.12xlarge", "primary type always set"
    assert built["l40s"].efa_security_group is None
    assert run.of_type(PG) == [] and run.of_type(SG) == []


@pytest.mark.program
def test_inference_pool_rolls_nodes_on_template_changes_launching_before_terminating() -> None:
    """An AMI upgrade must not take half of a 2-node serving pool away: new nodes join before old ones drain."""
    refresh = build(SPOT)[0].one(ASG, "t-l40s").inputs["instanceRefresh"]
    assert refresh == {
        "strategy": "Rolling",
        "preferences": {
            "minHealthyPercentage": 100,
            "maxHealthyPercentage": 200,
            "instanceWarmup": "300",
            "skipMatching": True,
        },
    }


@pytest.mark.program
def test_configured_refresh_percentages_win_and_the_derived_maximum_stays_within_aws_bounds() -> None:
    terminate_first = {**SPOT, "instanceRefresh": {"maxHealthyPercentage": 100}}
    preferences = build(terminate_first)[0].one(ASG, "t-l40s").inputs["instanceRefresh"]["preferences"]
    assert (preferences["minHealthyPercentage"], preferences["maxHealthyPercentage"]) == (100, 100)
    lower = {**SPOT, "instanceRefresh": {"minHealthyPercentage": 50}}
    preferences = build(lower)[0].one(ASG, "t-l40s").inputs["instanceRefresh"]["preferences"]
    assert (preferences["minHealthyPercentage"], preferences["maxHealthyPercentage"]) == (50, 150)


@pytest.mark.program
def test_training_pool_can_opt_into_instance_refresh() -> None:
    pool = {
        **P5,
        "management": "self-managed",
        "instanceRefresh": {"enabled": True, "minHealthyPercentage": 50, "instanceWarmupSeconds": 900},
    }
    refresh = build(pool)[0].one(ASG, "t-h100").inputs["instanceRefresh"]
    assert refresh["preferences"]["minHealthyPercentage"] == 50
    assert refresh["preferences"]["instanceWarmup"] == "900"


@pytest.mark.program
def test_capacity_block_targets_the_block_without_a_placement_group() -> None:
    pool = {**P5, "capacity": {"type": "capacity-block", "reservationId": "cr-0123456789abcdef0"}}
    run, built = build(pool)
    lt = run.one(LT, "t-h100")
    assert lt.inputs["instanceMarketOptions"] == {"marketType": "capacity-block"}
    assert lt.inputs["capacityReservationSpecification"] == {
        "capacityReservationTarget": {"capacityReservationId": "cr-0123456789abcdef0"}
    }
    assert "placement" not in lt.inputs
    assert run.of_type(PG) == [] and built["h100"].placement_group is None
    assert len(lt.inputs["networkInterfaces"]) == 33, "still every EFA device"
    assert asg_tags(run.one(ASG, "t-h100"))["gpu-clusters/capacity-type"] == ("capacity-block", True)


@pytest.mark.program
@pytest.mark.parametrize(
    ("capacity", "target"),
    [
        (
            {"type": "reservation", "reservationId": "cr-0fedcba9876543210"},
            {"capacityReservationId": "cr-0fedcba9876543210"},
        ),
        (
            {
                "type": "reservation",
                "reservationResourceGroupArn": "arn:aws:resource-groups:us-east-1:123456789012:group/odcr",
            },
            {"capacityReservationResourceGroupArn": "arn:aws:resource-groups:us-east-1:123456789012:group/odcr"},
        ),
    ],
)
def test_reservations_are_targeted_by_id_or_resource_group(capacity: dict[str, str], target: dict[str, str]) -> None:
    run, _ = build({**P5, "capacity": capacity})
    lt = run.one(LT, "t-h100")
    assert lt.inputs["capacityReservationSpecification"] == {"capacityReservationTarget": target}
    assert "instanceMarketOptions" not in lt.inputs
    assert run.of_type(PG) == []


@pytest.mark.program
def test_placement_group_can_be_forced_on_for_a_reservation_or_off_for_on_demand() -> None:
    on = {
        **P5,
        "capacity": {"type": "reservation", "reservationId": "cr-0fedcba9876543210"},
        "placement": {"placementGroup": "on"},
    }
    off = {**P5, "placement": {"placementGroup": "off"}}
    assert len(build(on)[0].of_type(PG)) == 1
    assert build(off)[0].of_type(PG) == []


# ------------------------------------------------------------------------------------------------ other pools
@pytest.mark.program
def test_fixed_pool_carries_no_autoscaler_tags() -> None:
    run, _ = build({**SYSTEM, "scaling": {"min": 2, "max": 3, "mode": "fixed"}})
    tags = asg_tags(run.one(ASG, "t-system"))
    assert not any(key.startswith(CA_PREFIX) for key in tags)
    assert tags["gpu-clusters/role"] == ("system", True)


@pytest.mark.program
def test_gpu_utilization_pool_carries_the_autoscaler_tags() -> None:
    run, _ = build({**SPOT, "scaling": {"min": 1, "max": 4, "mode": "gpu-utilization"}})
    assert any(key.startswith(CA_PREFIX) for key in asg_tags(run.one(ASG, "t-l40s")))


@pytest.mark.program
def test_cpu_pool_has_one_plain_interface_standard_ami_and_only_the_system_taint() -> None:
    run, built = build(SYSTEM, P5)
    lt = run.one(LT, "t-system")
    assert lt.inputs["networkInterfaces"] == [
        {
            "networkCardIndex": 0,
            "deviceIndex": 0,
            "securityGroups": [NODE_SECURITY_GROUP_ID],
            "associatePublicIpAddress": "false",
            "deleteOnTermination": "true",
        }
    ]
    assert lt.inputs["imageId"] != run.one(LT, "t-h100").inputs["imageId"], "standard vs NVIDIA AMI"
    config = node_config(lt)
    taint_flags = [f for f in config["spec"]["kubelet"]["flags"] if f.startswith("--register-with-taints")]
    assert taint_flags == ["--register-with-taints=CriticalAddonsOnly=true:NoSchedule"]
    # The system pool refreshes and is autoscaled, so it is a managed node group: its instances get the node
    # identity tag from the launch template, as a self-managed group's would from the group.
    assert built["system"].managed and run.of_type(ASG) and not [a for a in run.of_type(ASG) if a.name == "t-system"]
    (instance,) = [t for t in lt.inputs["tagSpecifications"] if t["resourceType"] == "instance"]
    assert instance["tags"]["kubernetes.io/cluster/t"] == "owned"
    assert built["system"].efa_security_group is None


@pytest.mark.program
def test_imds_hop_limit_and_root_volume_come_from_config() -> None:
    reason = "legacy-agent reads IMDS from the pod network"
    pool = {**SYSTEM, "imdsHopLimit": 2, "imdsHopLimitReason": reason, "rootVolumeGib": 80}
    lt = build(pool)[0].one(LT, "t-system")
    assert lt.inputs["metadataOptions"]["httpPutResponseHopLimit"] == 2
    assert lt.inputs["blockDeviceMappings"][0]["ebs"]["volumeSize"] == 80
    # The justification the policy pack reads travels on the launch template.
    assert lt.inputs["tags"]["gpu-clusters/imds-hop-limit-reason"] == reason


@pytest.mark.program
def test_nodes_require_imdsv2_with_hop_limit_1_and_no_justification_tag_by_default() -> None:
    lt = build(SYSTEM)[0].one(LT, "t-system")
    assert lt.inputs["metadataOptions"] == {
        "httpEndpoint": "enabled",
        "httpTokens": "required",
        "httpPutResponseHopLimit": 1,
    }
    assert "gpu-clusters/imds-hop-limit-reason" not in lt.inputs["tags"]


@pytest.mark.program
def test_bottlerocket_pool_sizes_the_data_volume_and_renders_toml() -> None:
    cluster = {"tags": {"team": "ml"}, "bottlerocketRelease": "1.42.0"}
    spec = stack_config(
        {**P5, "amiFamily": "bottlerocket", "rootVolumeGib": 500}, name="t", cluster=cluster, zones=THREE_ZONES
    )
    lt = build_pools(spec)[0].one(LT, "t-h100")
    devices = {d["deviceName"]: d["ebs"] for d in lt.inputs["blockDeviceMappings"]}
    assert set(devices) == {"/dev/xvda", "/dev/xvdb"}
    assert devices["/dev/xvdb"]["volumeSize"] == 500
    assert "volumeSize" not in devices["/dev/xvda"]
    assert all(d["encrypted"] == "true" and d["kmsKeyId"] == KMS_KEY_ARN for d in devices.values())
    settings = tomllib.loads(decoded_user_data(lt))["settings"]
    assert settings["kubernetes"]["api-server"] == CLUSTER_ENDPOINT
    assert settings["kubernetes"]["node-taints"] == {
        "nvidia.com/gpu": ["true:NoSchedule"],
        STARTUP_TAINT.key: ["true:NoSchedule"],
    }
    assert "000-mount-instance-storage" in settings["bootstrap-commands"]


@pytest.mark.program
def test_pool_in_an_az_without_a_subnet_is_refused() -> None:
    spec = spec_of({**P5, "placement": {"availabilityZones": ["us-east-1f"]}})
    with pytest.raises(ValueError, match="no private subnet for AZ"):
        run_with_context(spec, lambda ctx: NodePool("t-h100", plan_pools(spec)[0], ctx))


# ------------------------------------------------------------------------------------------ the shipped stack
def test_training_stack_p5_pool_is_done(training_stack: ShippedStack) -> None:
    """The training stack's p5 pool as the whole program registers it."""
    run = training_stack.run
    cluster = run.one("gpu-clusters:index:GpuCluster")
    pools = {r.name: r for r in run.of_type("gpu-clusters:index:NodePool")}
    assert set(pools) == {"train-system", "train-h100"}
    assert all(r.parent == cluster.urn for r in pools.values())
    lt = run.one(LT, "train-h100")
    slots = [(i["networkCardIndex"], i["deviceIndex"], i["interfaceType"]) for i in lt.inputs["networkInterfaces"]]
    assert slots == [(0, 0, "interface"), (0, 1, "efa-only")] + [(card, 0, "efa-only") for card in range(1, 32)]
    assert run.one(PG, "train-h100").inputs["strategy"] == "cluster"
    asg = run.one(ASG, "train-h100")
    assert len(asg.inputs["vpcZoneIdentifiers"]) == 1
    for token, name in ((INGRESS, "train-h100-efa-in-self"), (EGRESS, "train-h100-efa-out-self")):
        rule = run.one(token, name)
        assert rule.inputs["referencedSecurityGroupId"] == rule.inputs["securityGroupId"]
    tags = asg_tags(asg)
    assert tags[f"{NT}/resources/vpc.amazonaws.com/efa"] == ("32", False)
    assert tags[f"{NT}/resources/nvidia.com/gpu"] == ("8", False)
    assert node_config(lt)["spec"]["instance"] == {"localStorage": {"strategy": "RAID0"}}
