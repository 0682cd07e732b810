"""cluster-autoscaler tags: discovery plus the scale-from-zero node template, and nothing outside autoscaler mode."""

from __future__ import annotations

from typing import Any

import pytest

from components.planning.autoscaler_tags import SCALE_DOWN_GPU_THRESHOLD_TAG, autoscaler_tags, discovery_tags
from components.planning.hugepages import HUGEPAGE_MIB, hugepages
from components.planning.pools import PoolPlan
from components.planning.serving_autoscaling import scale_down_gpu_threshold
from tests.builders import AUTOSCALING_GROUP, first_pool_plan

NT = "k8s.io/cluster-autoscaler/node-template"


def plan_of(**pool: Any) -> PoolPlan:
    return first_pool_plan({"name": "pool", "scaling": {"max": 4}, **pool}, name="train")


def test_discovery_tags_match_the_auto_discovery_flag() -> None:
    assert discovery_tags("train") == {
        "k8s.io/cluster-autoscaler/enabled": "true",
        "k8s.io/cluster-autoscaler/train": "owned",
    }


def test_p5_pool_scales_from_zero_for_gpu_and_efa_pods() -> None:
    plan = plan_of(role="training", instanceType="p5.48xlarge", labels={"team": "llm"})
    tags = autoscaler_tags("train", plan)
    assert tags["k8s.io/cluster-autoscaler/enabled"] == "true"
    assert tags["k8s.io/cluster-autoscaler/train"] == "owned"
    labels = {k.removeprefix(f"{NT}/label/"): v for k, v in tags.items() if k.startswith(f"{NT}/label/")}
    assert labels == plan.labels, "every kubelet label is in the template"
    assert labels["nvidia.com/gpu.present"] == "true"
    assert labels["k8s.amazonaws.com/accelerator"] == "nvidia-h100"
    assert labels["team"] == "llm"
    assert tags[f"{NT}/taint/nvidia.com/gpu"] == "true:NoSchedule"
    assert tags[f"{NT}/resources/nvidia.com/gpu"] == "8"
    assert tags[f"{NT}/resources/vpc.amazonaws.com/efa"] == "32"
    assert tags[f"{NT}/resources/ephemeral-storage"] == "30400G", "RAID0 over 8 x 3800 GB instance store"


def test_no_autoscaler_tags_on_a_fixed_pool() -> None:
    plan = plan_of(role="inference", instanceType="g6e.12xlarge", scaling={"min": 1, "max": 4, "mode": "fixed"})
    assert autoscaler_tags("train", plan) == {}


def test_a_gpu_utilization_pool_is_found_and_scaled_from_zero_by_the_autoscaler() -> None:
    """Its nodes follow the serving replicas: pending replicas must match the template, GPUs and taint included."""
    plan = plan_of(
        role="inference", instanceType="g6e.12xlarge", scaling={"min": 0, "max": 4, "mode": "gpu-utilization"}
    )
    tags = autoscaler_tags("serve", plan)
    assert tags["k8s.io/cluster-autoscaler/enabled"] == "true" and tags["k8s.io/cluster-autoscaler/serve"] == "owned"
    assert tags[f"{NT}/resources/nvidia.com/gpu"] == "4"
    assert tags[f"{NT}/taint/nvidia.com/gpu"] == "true:NoSchedule"


def test_every_taint_is_tagged_with_its_effect() -> None:
    plan = plan_of(
        role="inference",
        instanceType="g6e.12xlarge",
        taints=[
            {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"},
            {"key": "dedicated", "value": "", "effect": "NoExecute"},
            {"key": "spot", "value": "yes", "effect": "PreferNoSchedule"},
        ],
    )
    taints = {k.removeprefix(f"{NT}/taint/"): v for k, v in autoscaler_tags("t", plan).items() if "/taint/" in k}
    assert taints == {"nvidia.com/gpu": "true:NoSchedule", "dedicated": ":NoExecute", "spot": "yes:PreferNoSchedule"}


def test_duplicate_taint_keys_are_refused() -> None:
    plan = plan_of(
        role="inference",
        instanceType="g6e.12xlarge",
        taints=[{"key": "a", "value": "1"}, {"key": "a", "value": "2", "effect": "NoExecute"}],
    )
    with pytest.raises(ValueError, match="one taint per key"):
        autoscaler_tags("t", plan)


def test_cpu_pool_has_no_gpu_or_efa_resources_and_root_volume_storage() -> None:
    plan = plan_of(role="system", instanceType="m7i.xlarge", rootVolumeGib=120)
    tags = autoscaler_tags("t", plan)
    assert not any(k.endswith("/nvidia.com/gpu") or k.endswith("/vpc.amazonaws.com/efa") for k in tags)
    assert {k: v for k, v in tags.items() if "/taint/" in k} == {f"{NT}/taint/CriticalAddonsOnly": "true:NoSchedule"}
    assert tags[f"{NT}/resources/ephemeral-storage"] == "120Gi"


def test_inference_pool_without_efa_advertises_gpus_only() -> None:
    tags = autoscaler_tags("t", plan_of(role="inference", instanceType="g6e.48xlarge"))
    assert tags[f"{NT}/resources/nvidia.com/gpu"] == "8"
    assert f"{NT}/resources/vpc.amazonaws.com/efa" not in tags
    assert tags[f"{NT}/resources/ephemeral-storage"] == "200Gi", "no local-storage strategy: the root volume"


def test_time_slicing_multiplies_the_advertised_gpus() -> None:
    plan = plan_of(role="inference", instanceType="g6e.12xlarge", devicePlugin={"timeSlicingReplicas": 4})
    assert autoscaler_tags("t", plan)[f"{NT}/resources/nvidia.com/gpu"] == "16"
    assert autoscaler_tags("t", plan)[f"{NT}/label/nvidia.com/device-plugin.config"] == "pool"


@pytest.mark.parametrize(("strategy", "expected"), [("RAID0", "7600G"), ("RAID10", "3800G"), ("Mount", "200Gi")])
def test_ephemeral_storage_follows_the_local_storage_strategy(strategy: str, expected: str) -> None:
    plan = plan_of(role="inference", instanceType="g6e.48xlarge", localStorage=strategy)
    assert autoscaler_tags("t", plan)[f"{NT}/resources/ephemeral-storage"] == expected


def test_efa_pool_template_offers_everything_an_efa_job_requests() -> None:
    """An EFA job asks for GPUs, EFA devices and 2 MiB huge pages; a template missing any one of them never
    matches, and the pool stays at zero. The huge page quantity is what the node's kubelet will report: the pages
    the user data sets aside, in a Kubernetes quantity (cluster-autoscaler parses it with `ParseQuantity`)."""
    plan = plan_of(role="training", instanceType="p5.48xlarge")
    tags = autoscaler_tags("train", plan)
    assert tags[f"{NT}/resources/nvidia.com/gpu"] == "8"
    assert tags[f"{NT}/resources/vpc.amazonaws.com/efa"] == "32"
    assert tags[f"{NT}/resources/hugepages-2Mi"] == "10256Mi", "5128 pages x 2 MiB"
    assert hugepages(plan) * HUGEPAGE_MIB == int(tags[f"{NT}/resources/hugepages-2Mi"].removesuffix("Mi"))


def test_pools_without_efa_promise_no_huge_pages() -> None:
    for plan in (
        plan_of(role="inference", instanceType="g6e.48xlarge"),
        plan_of(role="training", instanceType="p5.48xlarge", efa="off"),
        plan_of(role="system", instanceType="m7i.xlarge"),
    ):
        assert f"{NT}/resources/hugepages-2Mi" not in autoscaler_tags("t", plan)


@pytest.mark.parametrize(
    ("instance_type", "role", "pods"), [("p5.48xlarge", "training", "51"), ("m7i.large", "system", "29")]
)
def test_template_pods_are_the_pools_max_pods_not_the_autoscalers_110(instance_type: str, role: str, pods: str) -> None:
    plan = plan_of(role=role, instanceType=instance_type)
    assert autoscaler_tags("t", plan)[f"{NT}/resources/pods"] == pods == str(plan.max_pods)


def test_a_serving_pool_frees_nodes_its_replicas_leave(inference_stack) -> None:
    """The inference stack's l40s group (4 replicas per node) is a scale-down candidate at 3 of 4 GPUs requested,
    so the nodes a scale-in leaves partly empty are consolidated; other groups keep the global threshold."""
    groups = {
        r.name: {t["key"]: t["value"] for t in r.inputs["tags"]} for r in inference_stack.run.of_type(AUTOSCALING_GROUP)
    }
    assert groups["serve-l40s"][SCALE_DOWN_GPU_THRESHOLD_TAG] == "0.76"
    assert SCALE_DOWN_GPU_THRESHOLD_TAG not in groups["serve-system"]


@pytest.mark.parametrize(("per_node", "threshold"), [(1, None), (2, 0.51), (4, 0.76), (8, 0.885)])
def test_the_threshold_sits_just_above_one_replica_short_of_full(per_node: int, threshold: float | None) -> None:
    got = scale_down_gpu_threshold(per_node)
    assert got == (None if threshold is None else round(threshold, 2))
