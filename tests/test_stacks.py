"""The shipped stacks deliver what their scenarios promise, and pass the policy pack with no violation."""

from __future__ import annotations

from typing import Any

import pytest

from blueprint.plan.runner import list_stacks
from tests.builders import (
    ACCESS_ENTRY,
    AUTOSCALING_GROUP,
    BUCKET,
    EFS,
    EKS_ADDON,
    EKS_CLUSTER,
    HELM_RELEASE,
    LUSTRE,
    PLACEMENT_GROUP,
    PVC,
    shipped_plan,
)


def pool(stack: str, name: str) -> dict[str, Any]:
    return next(p for p in shipped_plan(stack)["summary"]["nodePools"] if p["name"] == name)


def resources(stack: str, type_token: str) -> list[dict[str, Any]]:
    return [r for r in shipped_plan(stack)["resources"] if r["type"] == type_token]


def storage(stack: str, kind: str) -> dict[str, Any]:
    return next(s for s in shipped_plan(stack)["summary"]["storage"] if s["kind"] == kind)


def test_no_policy_violation(each_shipped_plan: dict[str, Any]) -> None:
    """None but the advisory that the GPU alarms notify nobody yet (each stack shows, commented, how to give them a
    destination: tests/test_alerts_destination.py) and the report of the privileged namespaces' approved waivers."""
    found = {(v["level"], v["policy"]) for v in each_shipped_plan["violations"]}
    assert found <= {("advisory", "alarms-notify-someone"), ("advisory", "policy-exceptions")}
    waivers = [v["message"] for v in each_shipped_plan["violations"] if v["policy"] == "policy-exceptions"]
    assert all(m.endswith("(approved in exceptions.json)") for m in waivers)


@pytest.mark.program
@pytest.mark.parametrize("stack", list_stacks())
def test_every_stack_has_a_two_node_system_pool(stack: str) -> None:
    system = pool(stack, "system")
    assert (system["role"], system["gpusPerNode"], system["minNodes"], system["capacityType"]) == (
        "system",
        0,
        2,
        "on-demand",
    )


@pytest.mark.program
def test_training_pool_gets_all_32_efa_devices_in_one_az_with_a_placement_group() -> None:
    h100 = pool("training", "h100")
    assert (h100["instanceType"], h100["gpuModel"], h100["gpusPerNode"]) == ("p5.48xlarge", "H100", 8)
    assert (h100["minNodes"], h100["efaDevicesPerNode"], h100["maxEfaDevicesPerNode"]) == (0, 32, 32)
    assert h100["fabricGbpsPerNode"] == 3200
    assert h100["availabilityZones"] == ["us-east-1a"]
    assert h100["placementGroup"] is True and h100["localStorage"] == "RAID0"
    assert h100["scalingMode"] == "cluster-autoscaler"
    (group,) = resources("training", PLACEMENT_GROUP)
    assert group["inputs"]["strategy"] == "cluster"


@pytest.mark.program
def test_training_lustre_is_protected_persistent_2_in_the_pool_az_with_s3_links() -> None:
    (fs,) = resources("training", LUSTRE)
    assert fs["inputs"]["deploymentType"] == "PERSISTENT_2"
    assert fs["options"]["protect"] is True
    lustre = storage("training", "lustre")
    assert lustre["availabilityZone"] == "us-east-1a" and lustre["mountedBy"] == ["h100"]
    assert lustre["throughputMBps"] == pytest.approx(9600 / 1024 * 500)
    paths = sorted(
        r["inputs"]["fileSystemPath"]
        for r in resources("training", "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation")
    )
    assert paths == ["/checkpoints", "/datasets"]
    (claim,) = resources("training", PVC)
    assert claim["inputs"]["metadata"] | {"labels": None} == {
        "namespace": "training",
        "name": "lustre-scratch",
        "labels": None,
    }
    assert claim["inputs"]["spec"]["accessModes"] == ["ReadWriteMany"]


@pytest.mark.program
def test_training_plans_device_plugins_and_cluster_autoscaler() -> None:
    charts = {r["inputs"]["chart"].rsplit("/", 1)[-1] for r in resources("training", HELM_RELEASE)}
    assert {"nvidia-device-plugin", "aws-efa-k8s-device-plugin", "cluster-autoscaler"} <= charts


@pytest.mark.program
def test_inference_pool_is_4x48gb_on_spot_and_its_serving_replicas_scale_on_vllm_requests_in_flight() -> None:
    l40s = pool("inference", "l40s")
    assert (l40s["instanceType"], l40s["gpusPerNode"], l40s["capacityType"]) == ("g6e.12xlarge", 4, "spot")
    # One type: cluster-autoscaler sizes every node as the first type, and no other 4x L40S type has 48 vCPU/384 GiB.
    assert l40s["instanceTypes"] == ["g6e.12xlarge"]
    assert l40s["scalingMode"] == "cluster-autoscaler"
    (asg,) = [r for r in resources("inference", AUTOSCALING_GROUP) if "l40s" in r["name"]]
    distribution = asg["inputs"]["mixedInstancesPolicy"]["instancesDistribution"]
    assert distribution["onDemandBaseCapacity"] == 1
    assert distribution["spotAllocationStrategy"] == "price-capacity-optimized"
    assert asg["inputs"]["capacityRebalance"] is True
    assert resources("inference", "aws:cloudwatch/metricAlarm:MetricAlarm") == []  # no alarm on an unpublished metric
    (scaler,) = resources("inference", "kubernetes:keda.sh/v1alpha1:ScaledObject")
    query = scaler["inputs"]["spec"]["triggers"][0]["metadata"]["query"]
    # The default rule, the comparison's best (docs/serving-simulation.md): vLLM's requests running and waiting.
    assert "vllm:num_requests_waiting" in query and "vllm:num_requests_running" in query
    assert "DCGM_FI_DEV_GPU_UTIL" not in query
    monitors = resources("inference", "kubernetes:monitoring.coreos.com/v1:PodMonitor")
    (monitor,) = [m for m in monitors if m["inputs"]["metadata"]["name"] != "node-health"]  # the serving scrape
    assert monitor["inputs"]["metadata"]["namespace"] == "inference"
    summary = shipped_plan("inference")["summary"]["hourlyUsd"]
    assert summary["spotSaving"] > 0 and summary["max"] < summary["maxOnDemand"]


@pytest.mark.program
def test_inference_uses_efs_and_the_termination_handler() -> None:
    efs = storage("inference", "efs")
    assert efs["mountedBy"] == ["l40s"]
    (fs,) = resources("inference", EFS)
    assert fs["inputs"]["throughputMode"] == "elastic" and fs["options"]["protect"] is True
    assert len(resources("inference", "aws:efs/mountTarget:MountTarget")) == 3
    charts = {r["inputs"]["chart"].rsplit("/", 1)[-1] for r in resources("inference", HELM_RELEASE)}
    assert "aws-node-termination-handler" in charts


@pytest.mark.program
def test_hybrid_joins_four_a40_servers_next_to_the_cloud_training_side() -> None:
    a40 = pool("hybrid", "a40")
    assert (a40["kind"], a40["gpuModel"], a40["gpusPerNode"], a40["minNodes"], a40["maxNodes"]) == (
        "hybrid",
        "A40",
        4,
        4,
        4,
    )
    assert pool("hybrid", "h100")["efaDevicesPerNode"] == 32
    assert pool("hybrid", "burst")["capacityType"] == "spot"
    (cluster,) = resources("hybrid", EKS_CLUSTER)
    remote = cluster["inputs"]["remoteNetworkConfig"]
    assert remote["remoteNodeNetworks"]["cidrs"] == ["192.168.100.0/24"]
    assert remote["remotePodNetworks"]["cidrs"] == ["192.168.128.0/18"]
    assert "HYBRID_LINUX" in {r["inputs"]["type"] for r in resources("hybrid", ACCESS_ENTRY)}
    nfs = storage("hybrid", "nfs")
    assert nfs["mountedBy"] == ["a40"] and nfs["throughputMBps"] == 1250


@pytest.mark.program
def test_smoke_runs_the_shipped_code_paths_on_one_spot_gpu_and_the_smallest_lustre() -> None:
    """The cheap first deploy: a spot GPU pool with the device plugin, cluster-autoscaler, interruption handling,
    GPU monitoring and a Lustre claim linked to S3, as the shipped stacks have them."""
    gpu = pool("smoke", "l40s")
    assert (gpu["capacityType"], gpu["minNodes"], gpu["scalingMode"], gpu["gpusPerNode"]) == (
        "spot",
        1,
        "cluster-autoscaler",
        1,
    )
    assert gpu["instanceTypes"] == ["g6e.xlarge"], "cluster-autoscaler needs one vCPU and memory size per group"
    charts = {r["inputs"]["chart"].rsplit("/", 1)[-1] for r in resources("smoke", HELM_RELEASE)}
    assert {"nvidia-device-plugin", "cluster-autoscaler", "aws-node-termination-handler"} <= charts
    addons = {r["inputs"]["addonName"] for r in resources("smoke", EKS_ADDON)}
    assert "amazon-cloudwatch-observability" in addons
    assert resources("smoke", "aws:cloudwatch/metricAlarm:MetricAlarm")
    (fs,) = resources("smoke", LUSTRE)
    assert fs["inputs"]["storageCapacity"] == 1200 and fs["options"]["protect"] is True
    assert storage("smoke", "lustre")["mountedBy"] == ["l40s"]
    (claim,) = resources("smoke", PVC)
    assert claim["inputs"]["metadata"]["name"] == "lustre-scratch"
    # the training stack's S3 link: the stack's own bucket, associated both ways
    (bucket,) = resources("smoke", BUCKET)
    (link,) = resources("smoke", "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation")
    assert bucket["inputs"]["bucketPrefix"] == "smoke-scratch-data-"
    assert link["inputs"]["dataRepositoryPath"].startswith("s3://smoke-scratch-data-")
    assert link["inputs"]["dataRepositoryPath"].endswith("/data/")
    assert link["inputs"]["fileSystemPath"] == "/data"
    assert link["inputs"]["s3"]["autoImportPolicy"]["events"] == link["inputs"]["s3"]["autoExportPolicy"]["events"]


@pytest.mark.program
def test_smoke_at_max_costs_less_than_one_gpu_node_of_any_other_shipped_stack() -> None:
    smoke = shipped_plan("smoke")["summary"]["hourlyUsd"]["max"]
    others = [
        p["hourlyUsdPerNode"]
        for stack in list_stacks()
        if stack != "smoke"
        for p in shipped_plan(stack)["summary"]["nodePools"]
        if p["gpusPerNode"] and p["kind"] == "aws"
    ]
    assert smoke < min(others)
