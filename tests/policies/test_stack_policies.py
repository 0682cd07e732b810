"""Every stack policy: the compliant stack passes, one broken thing is reported against the right resource.

Each passing case runs with the three ways resources get linked (the offline plan's dependencies, stack-output ids,
and the engine's property dependencies with every id still unknown, as in a preview of a new stack), so the
cross-resource rules hold wherever they run.
"""

from __future__ import annotations

import json
from typing import Any, get_args

import pytest
from pulumi_policy import StackValidationPolicy

from components import tags
from components.planning.autoscaler_tags import ENABLED_TAG
from policies.pack import POLICIES
from tests.builders import PLACEMENT_GROUP
from tests.policies import Link, validate_stack
from tests.policies.stacks import Record, asg_tags, find, good_stack, without

STACK_POLICIES = [p.name for p in POLICIES if isinstance(p, StackValidationPolicy)]
LINKS = get_args(Link)


@pytest.mark.parametrize("link", LINKS)
@pytest.mark.parametrize("policy", STACK_POLICIES)
def test_compliant_stack_passes(policy: str, link: Link) -> None:
    assert validate_stack(policy, good_stack(), link=link) == []


def broken(change: Any) -> list[Record]:
    records = good_stack()
    change(records)
    return records


def set_tag(asg: Record, key: str, value: str | None) -> None:
    kept = [t for t in asg["inputs"]["tags"] if t["key"] != key]
    asg["inputs"]["tags"] = kept + ([{"key": key, "value": value, "propagateAtLaunch": True}] if value else [])


# --------------------------------------------------------------------------------------------------- fabric
@pytest.mark.parametrize("link", LINKS)
@pytest.mark.parametrize("missing", ["good-efa-self-ingress", "good-efa-self-egress"])
def test_efa_security_group_needs_both_self_rules(missing: str, link: Link) -> None:
    direction = missing.rsplit("-", 1)[-1]
    assert validate_stack("efa-security-group-self-referencing", without(good_stack(), missing), link=link) == [
        (
            "good-efa",
            "security group 'good-efa' (EFA interfaces of launch template 'good-train-lt') lacks an all-traffic "
            f"self-referencing {direction} rule",
        )
    ]


def test_efa_security_group_rule_must_allow_all_traffic_from_itself() -> None:
    def tcp_only(records: list[Record]) -> None:
        find(records, "good-efa-self-ingress")["inputs"].update(ipProtocol="tcp", fromPort=0, toPort=65535)

    def from_another_group(records: list[Record]) -> None:
        find(records, "good-efa-self-egress")["inputs"]["referencedSecurityGroupId"] = "sg-0node"
        find(records, "good-efa-self-egress")["options"]["dependsOn"].append(find(records, "good-node")["urn"])

    assert [name for name, _ in validate_stack("efa-security-group-self-referencing", broken(tcp_only))] == ["good-efa"]
    assert [name for name, _ in validate_stack("efa-security-group-self-referencing", broken(from_another_group))] == [
        "good-efa"
    ]


def test_efa_security_group_inline_self_rules_count() -> None:
    def inline(records: list[Record]) -> None:
        records[:] = without(records, "good-efa-self-ingress", "good-efa-self-egress")
        find(records, "good-efa")["inputs"].update(
            ingress=[{"protocol": "-1", "fromPort": 0, "toPort": 0, "self": True}],
            egress=[{"protocol": "-1", "fromPort": 0, "toPort": 0, "self": True}],
        )

    assert validate_stack("efa-security-group-self-referencing", broken(inline)) == []


@pytest.mark.parametrize("link", ["dependencies", "property-dependencies"])
def test_efa_on_the_eks_cluster_security_group_passes(link: Link) -> None:
    """EKS creates the cluster security group with all-traffic self rules in and out, so EFA may use it."""

    def cluster_group(records: list[Record]) -> None:
        records[:] = without(records, "good-efa-self-ingress", "good-efa-self-egress")
        cluster, lt = find(records, "good"), find(records, "good-train-lt")
        cluster["inputs"]["vpcConfig"]["clusterSecurityGroupId"] = "sg-0cluster"
        for nic in lt["inputs"]["networkInterfaces"]:
            nic["securityGroups"] = ["sg-0cluster"]
        lt["options"]["dependsOn"] = [cluster["urn"]]
        lt["propertyDependencies"]["networkInterfaces"] = [cluster["urn"]]

    assert validate_stack("efa-security-group-self-referencing", broken(cluster_group), link=link) == []


def test_efa_security_group_outside_the_stack_is_reported() -> None:
    def external(records: list[Record]) -> None:
        lt = find(records, "good-train-lt")
        for nic in lt["inputs"]["networkInterfaces"]:
            nic["securityGroups"] = ["sg-0external"]
        lt["options"]["dependsOn"] = []

    [(name, message)] = validate_stack("efa-security-group-self-referencing", broken(external))
    assert name == "good-train-lt" and "['sg-0external'] are not in this stack" in message


@pytest.mark.parametrize("link", LINKS)
def test_efa_pool_single_az(link: Link) -> None:
    def two_zones(records: list[Record]) -> None:
        asg, subnet_b = find(records, "good-train"), find(records, "good-private-b")
        asg["inputs"]["vpcZoneIdentifiers"].append("subnet-0b")
        asg["options"]["dependsOn"].append(subnet_b["urn"])
        asg["propertyDependencies"]["vpcZoneIdentifiers"].append(subnet_b["urn"])

    assert validate_stack("efa-pool-single-az", broken(two_zones), link=link) == [
        ("good-train", "EFA pool 'train' spans availability zones ['us-east-1a', 'us-east-1b']")
    ]


def test_efa_pool_single_az_ignores_pools_without_efa() -> None:
    assert "good-infer" in [r["name"] for r in good_stack()]  # a spot pool spanning two AZs, without EFA
    assert validate_stack("efa-pool-single-az", good_stack()) == []


def unplaced(records: list[Record]) -> None:
    asg, lt = find(records, "good-train"), find(records, "good-train-lt")
    del asg["inputs"]["placementGroup"], lt["inputs"]["placement"]
    group = find(records, "good-train")["propertyDependencies"].pop("placementGroup")
    asg["options"]["dependsOn"].remove(group[0])


def test_efa_placement_group_required_on_demand() -> None:
    assert validate_stack("efa-placement-group", broken(unplaced)) == [
        (
            "good-train",
            "EFA pool 'train' (on-demand) has no cluster placement group (placementGroup on the Auto Scaling group "
            "or placement.groupName on the launch template)",
        )
    ]


@pytest.mark.parametrize("capacity", ["capacity-block", "reservation"])
def test_efa_placement_group_not_required_for_reserved_capacity(capacity: str) -> None:
    def reserved(records: list[Record]) -> None:
        unplaced(records)
        set_tag(find(records, "good-train"), tags.CAPACITY_TYPE, capacity)

    assert validate_stack("efa-placement-group", broken(reserved)) == []


def test_efa_placement_group_reads_capacity_blocks_from_the_launch_template() -> None:
    def capacity_block(records: list[Record]) -> None:
        unplaced(records)
        set_tag(find(records, "good-train"), tags.CAPACITY_TYPE, None)
        find(records, "good-train-lt")["inputs"]["instanceMarketOptions"] = {"marketType": "capacity-block"}

    assert validate_stack("efa-placement-group", broken(capacity_block)) == []


@pytest.mark.parametrize("link", LINKS)
def test_efa_placement_group_must_be_a_cluster_group(link: Link) -> None:
    def spread(records: list[Record]) -> None:
        next(r for r in records if r["type"] == PLACEMENT_GROUP)["inputs"]["strategy"] = "spread"

    assert validate_stack("efa-placement-group", broken(spread), link=link) == [
        (
            "good-train",
            "EFA pool 'train' uses placement group 'good-train-placement' with strategy 'spread', not 'cluster'",
        )
    ]


def test_efa_device_plugin_deployed() -> None:
    assert validate_stack("efa-device-plugin-deployed", without(good_stack(), "aws-efa-k8s-device-plugin")) == [
        ("good-train", "EFA pools ['train'] but no aws-efa-k8s-device-plugin Helm release")
    ]


def test_efa_device_plugin_must_tolerate_the_pool_taints() -> None:
    def chart_defaults(records: list[Record]) -> None:
        find(records, "aws-efa-k8s-device-plugin")["inputs"]["values"] = {}  # the chart tolerates nothing

    assert validate_stack("efa-device-plugin-deployed", broken(chart_defaults)) == [
        (
            "aws-efa-k8s-device-plugin",
            "Helm release 'aws-efa-k8s-device-plugin' (aws-efa-k8s-device-plugin) does not tolerate taint "
            "nvidia.com/gpu=true:NoSchedule of pool 'train', so it never runs there",
        )
    ]


def test_efa_device_plugin_image_floor() -> None:
    def old_image(records: list[Record]) -> None:
        find(records, "aws-efa-k8s-device-plugin")["inputs"]["values"]["image"] = {"tag": "v0.5.6"}

    [(name, message)] = validate_stack("efa-device-plugin-deployed", broken(old_image))
    assert name == "aws-efa-k8s-device-plugin" and "v0.5.6, older than v0.5.10" in message


# ------------------------------------------------------------------------------------------------ GPU pools
def test_gpu_pools_must_be_tainted() -> None:
    def untainted(records: list[Record]) -> None:
        set_tag(find(records, "good-infer"), tags.TAINTS, None)

    assert validate_stack("gpu-pools-tainted-and-tolerated", broken(untainted)) == [
        ("good-infer", "GPU pool 'infer' has no NoSchedule/NoExecute taint (tag gpu-clusters/taints)")
    ]


def test_gpu_pool_taints_may_come_from_cluster_autoscaler_tags() -> None:
    def autoscaler_tag(records: list[Record]) -> None:
        asg = find(records, "good-infer")
        set_tag(asg, tags.TAINTS, None)
        set_tag(asg, "k8s.io/cluster-autoscaler/node-template/taint/nvidia.com/gpu", "true:NoSchedule")

    assert validate_stack("gpu-pools-tainted-and-tolerated", broken(autoscaler_tag)) == []


def test_nvidia_device_plugin_must_tolerate_every_gpu_taint() -> None:
    def dedicated(records: list[Record]) -> None:
        set_tag(find(records, "good-train"), tags.TAINTS, "nvidia.com/gpu=true:NoSchedule,dedicated=training:NoExecute")

    assert validate_stack("gpu-pools-tainted-and-tolerated", broken(dedicated)) == [
        (
            "nvidia-device-plugin",
            "Helm release 'nvidia-device-plugin' (nvidia-device-plugin) does not tolerate taint "
            "dedicated=training:NoExecute of pool 'train', so it never runs there",
        )
    ]


def test_nvidia_device_plugin_chart_defaults_tolerate_the_gpu_taint() -> None:
    def defaults(records: list[Record]) -> None:
        find(records, "nvidia-device-plugin")["inputs"]["values"] = {}

    assert validate_stack("gpu-pools-tainted-and-tolerated", broken(defaults)) == []


def test_gpu_pools_need_the_nvidia_device_plugin() -> None:
    assert validate_stack("gpu-pools-tainted-and-tolerated", without(good_stack(), "nvidia-device-plugin")) == [
        ("good-train", "GPU pools ['train', 'infer'] but no nvidia-device-plugin Helm release")
    ]


def test_cpu_pools_need_no_taint() -> None:
    def system_pool(records: list[Record]) -> None:
        asg, lt = find(records, "good-infer"), find(records, "good-infer-lt")
        lt["inputs"]["instanceType"] = "m7i.xlarge"
        del asg["inputs"]["mixedInstancesPolicy"]["launchTemplate"]["overrides"]
        asg["inputs"]["tags"] = asg_tags("system", "system", "spot", None)

    assert validate_stack("gpu-pools-tainted-and-tolerated", broken(system_pool)) == []


# ----------------------------------------------------------------------------------------------------- spot
def single_type(records: list[Record]) -> None:
    find(records, "good-infer")["inputs"]["mixedInstancesPolicy"]["launchTemplate"]["overrides"] = [
        {"instanceType": "g6e.12xlarge"}
    ]


def test_spot_instance_diversification() -> None:
    assert validate_stack("spot-instance-diversification", broken(single_type)) == [
        (
            "good-infer",
            "spot pool 'infer' offers 1 instance type(s) ['g6e.12xlarge']; at least 2 are needed "
            "(mixedInstancesPolicy overrides)",
        )
    ]
    assert validate_stack("spot-instance-diversification", broken(single_type), config={"minInstanceTypes": 1}) == []


def test_a_spot_group_cluster_autoscaler_resizes_keeps_one_vcpu_and_memory_size() -> None:
    def autoscaled(records: list[Record]) -> None:
        set_tag(find(records, "good-infer"), ENABLED_TAG, "true")
        find(records, "good-infer")["inputs"]["mixedInstancesPolicy"]["launchTemplate"]["overrides"] = [
            {"instanceType": "g6e.12xlarge"},
            {"instanceType": "g6e.24xlarge"},
        ]

    [(name, message)] = validate_stack("spot-instance-diversification", broken(autoscaled))
    assert name == "good-infer"
    assert message.startswith("spot pool 'infer' mixes vCPU and memory sizes [(48, 384.0), (96, 768.0)]")

    def autoscaled_single(records: list[Record]) -> None:
        single_type(records)
        set_tag(find(records, "good-infer"), ENABLED_TAG, "true")

    # No other 4x L40S type has 48 vCPUs and 384 GiB, so one type is all cluster-autoscaler allows.
    assert validate_stack("spot-instance-diversification", broken(autoscaled_single)) == []


def test_spot_types_must_share_the_gpu_shape() -> None:
    def mixed_shapes(records: list[Record]) -> None:
        find(records, "good-infer")["inputs"]["mixedInstancesPolicy"]["launchTemplate"]["overrides"] = [
            {"instanceType": "g6e.12xlarge"},
            {"instanceType": "g6e.48xlarge"},
        ]

    [(name, message)] = validate_stack("spot-instance-diversification", broken(mixed_shapes))
    assert name == "good-infer" and message.startswith("spot pool 'infer' mixes GPU shapes")


def test_spot_capacity_rebalance() -> None:
    def off(records: list[Record]) -> None:
        find(records, "good-infer")["inputs"]["capacityRebalance"] = False

    assert validate_stack("spot-capacity-rebalance", broken(off)) == [
        ("good-infer", "spot pool 'infer' does not enable capacityRebalance")
    ]


def test_spot_is_recognised_without_the_capacity_tag() -> None:
    def untagged_spot(records: list[Record]) -> None:
        asg = find(records, "good-infer")
        set_tag(asg, tags.CAPACITY_TYPE, None)
        asg["inputs"]["capacityRebalance"] = False

    assert [n for n, _ in validate_stack("spot-capacity-rebalance", broken(untagged_spot))] == ["good-infer"]


def test_spot_interruption_handler() -> None:
    assert validate_stack("spot-interruption-handler", without(good_stack(), "aws-node-termination-handler")) == [
        ("good-infer", "spot pools ['infer'] but no aws-node-termination-handler Helm release")
    ]


def test_on_demand_stack_needs_no_interruption_handler() -> None:
    records = without(good_stack(), "good-infer", "good-infer-lt", "aws-node-termination-handler")
    assert validate_stack("spot-interruption-handler", records) == []


# ------------------------------------------------------------------------------------------------------ cost
def test_gpu_budget_counts_gpus_at_max_size() -> None:
    # train: 4 x p5.48xlarge = 32 GPUs, infer: 4 x g6e (4 GPUs) = 16 GPUs
    assert validate_stack("gpu-budget", good_stack(), config={"maxGpus": 48}) == []
    assert validate_stack("gpu-budget", good_stack(), config={"maxGpus": 47}) == [
        ("", "the node pools reach 48 GPUs at maximum size; the budget is 47")
    ]


def test_gpu_budget_prices_the_dearest_type_of_each_pool() -> None:
    # 4 x $55.04 (p5.48xlarge) + 4 x $15.06559 (g6e.24xlarge, the dearer override) = $280.42/hour
    assert validate_stack("gpu-budget", good_stack(), config={"maxUsdPerHour": 281}) == []
    assert validate_stack("gpu-budget", good_stack(), config={"maxUsdPerHour": 280}) == [
        ("", "the node pools cost $280.42/hour at maximum size; the budget is $280.00")
    ]


def test_gpu_budget_reports_types_it_cannot_price() -> None:
    def no_price(records: list[Record]) -> None:
        find(records, "good-train-lt")["inputs"]["instanceType"] = "p5e.48xlarge"  # no on-demand price in the catalog

    assert validate_stack("gpu-budget", broken(no_price)) == [
        ("good-train", "pool 'train': the catalog has no on-demand price for ['p5e.48xlarge']")
    ]


# ------------------------------------------------------------------------------------------------------ data
@pytest.mark.parametrize("link", LINKS)
@pytest.mark.parametrize(
    "missing, message",
    [
        ("good-checkpoints-versioning", "bucket 'good-checkpoints' is not versioned"),
        (
            "good-checkpoints-private",
            "bucket 'good-checkpoints' does not block public access "
            "(blockPublicAcls, blockPublicPolicy, ignorePublicAcls, restrictPublicBuckets)",
        ),
        ("good-checkpoints-sse", "bucket 'good-checkpoints' does not encrypt with a KMS key (SSE-KMS)"),
    ],
)
def test_s3_bucket_hardened(missing: str, message: str, link: Link) -> None:
    assert validate_stack("s3-bucket-hardened", without(good_stack(), missing), link=link) == [
        ("good-checkpoints", message)
    ]


def test_s3_bucket_public_access_block_needs_all_four_settings() -> None:
    def partial(records: list[Record]) -> None:
        find(records, "good-checkpoints-private")["inputs"]["restrictPublicBuckets"] = False

    assert [n for n, _ in validate_stack("s3-bucket-hardened", broken(partial))] == ["good-checkpoints"]


def test_s3_sse_kms_only_when_required() -> None:
    records = without(good_stack(), "good-checkpoints-sse")
    assert validate_stack("s3-bucket-hardened", records, config={"requireKmsKey": False}) == []


# --------------------------------------------------------------------------------------------------- queues
@pytest.mark.parametrize(
    ("missing", "what"),
    [
        ("good-training-local-queue", "a Kueue LocalQueue"),
        ("good-training-gpu-quota", "a GPU ResourceQuota"),
    ],
)
def test_a_training_namespace_needs_a_local_queue_and_a_gpu_quota(missing: str, what: str) -> None:
    assert validate_stack("training-namespaces-queued", without(good_stack(), missing)) == [
        (
            "good-ns-training",
            f"training namespace 'training' has no {what}: a stack with a training GPU pool queues every workload "
            "namespace's jobs through Kueue and caps its GPUs",
        )
    ]


# ------------------------------------------------------------------------------------------- EFA jobs
def _job(type_: str, efa: str | None, pool: str = "train") -> Record:
    from tests.policies.stacks import record

    limits = {"nvidia.com/gpu": "8", **({"vpc.amazonaws.com/efa": efa} if efa is not None else {})}
    pod = {"nodeSelector": {tags.POOL: pool}, "containers": [{"name": "w", "resources": {"limits": limits}}]}
    specs: dict[str, Any] = {
        "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet": {
            "replicatedJobs": [{"name": "workers", "template": {"spec": {"template": {"spec": pod}}}}]
        },
        "kubernetes:batch/v1:Job": {"template": {"spec": pod}},
        "kubernetes:core/v1:Pod": pod,
    }
    return record(type_, "job", {"metadata": {"name": "job"}, "spec": specs[type_]})


JOB_TYPES = ["kubernetes:jobset.x-k8s.io/v1alpha2:JobSet", "kubernetes:batch/v1:Job", "kubernetes:core/v1:Pod"]


@pytest.mark.parametrize("type_", JOB_TYPES)
def test_a_job_on_an_efa_pool_requesting_every_device_passes(type_: str) -> None:
    assert validate_stack("efa-jobs-request-every-device", [*good_stack(), _job(type_, "32")]) == []
    # a job on a pool without EFA is not judged
    assert validate_stack("efa-jobs-request-every-device", [*good_stack(), _job(type_, None, pool="infer")]) == []


@pytest.mark.parametrize("type_", JOB_TYPES)
@pytest.mark.parametrize("efa", [None, "8"])
def test_a_job_on_an_efa_pool_with_fewer_devices_is_reported(type_: str, efa: str | None) -> None:
    kind = type_.rsplit(":", 1)[-1]
    assert validate_stack("efa-jobs-request-every-device", [*good_stack(), _job(type_, efa)]) == [
        (
            "job",
            f"{kind} 'job' runs on EFA pool 'train' with {efa or 0} of its nodes' 32 EFA devices: request "
            "vpc.amazonaws.com/efa: 32",
        )
    ]


def test_a_quota_on_other_resources_is_no_gpu_quota() -> None:
    def cpu_only(records: list[Record]) -> None:
        find(records, "good-training-gpu-quota")["inputs"]["spec"]["hard"] = {"requests.cpu": "64"}

    assert [name for name, _ in validate_stack("training-namespaces-queued", broken(cpu_only))] == ["good-ns-training"]


def test_a_namespace_without_default_deny_is_not_a_workload_namespace() -> None:
    def opened(records: list[Record]) -> None:
        find(records, "good-training-default-deny")["inputs"]["spec"]["ingress"] = [{"from": [{"podSelector": {}}]}]

    records = broken(opened)
    assert validate_stack("training-namespaces-queued", without(records, "good-training-local-queue")) == []


def test_an_add_on_namespace_that_denies_ingress_is_not_a_workload_namespace() -> None:
    """The health loop's namespace denies ingress, but no team submits jobs there."""
    from tests.policies.stacks import record

    health = [
        record("kubernetes:core/v1:Namespace", "ns-node-health", {"metadata": {"name": "node-health"}}),
        record(
            "kubernetes:networking.k8s.io/v1:NetworkPolicy",
            "node-health-default-deny",
            {
                "metadata": {"name": "default-deny-ingress", "namespace": "node-health"},
                "spec": {"podSelector": {}, "policyTypes": ["Ingress"]},
            },
        ),
    ]
    assert validate_stack("training-namespaces-queued", [*good_stack(), *health]) == []


def test_a_stack_without_a_training_gpu_pool_needs_no_queues() -> None:
    records = without(good_stack(), "good-train", "good-training-local-queue")
    assert validate_stack("training-namespaces-queued", records) == []


def test_the_reference_jobs_manifest_passes_the_rule() -> None:
    """The JobSet `blueprint training-job` prints, on the good stack's p5 pool named `train`."""
    from tests.policies.stacks import record

    manifest = json.loads(json.dumps(_reference_manifest()))
    job = record("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet", "reference", manifest)
    assert validate_stack("efa-jobs-request-every-device", [*good_stack(), job]) == []


def _reference_manifest() -> dict[str, Any]:
    from blueprint.plan.runner import load_stack
    from components.planning.stack_plan import plan_stack
    from components.planning.training_job import jobset_manifest
    from components.validation import validate_config

    files = load_stack("training")
    job = plan_stack(validate_config(files.config, files.project)).training
    assert job is not None
    manifest = jobset_manifest(job)
    pod = manifest["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod["nodeSelector"] = {tags.POOL: "train"}  # the good stack's pool name
    return manifest
