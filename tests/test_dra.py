"""GPUs through Dynamic Resource Allocation (`nodePools[].gpuAllocation: dra`): one allocator per pool, claims for
the serving replicas, the reference training job and the health gate's check pods, the combinations validation
refuses, and the inference stack planned on it (docs/gpu-sharing.md#gpus-through-dra)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from blueprint.verify.context import mig_skip
from blueprint.verify.expectations import DRA_KUBELET_PLUGIN_DAEMONSETS, pool_expectation
from components.errors import ConfigError
from components.planning.addons.device_plugins import nvidia_device_plugin_values
from components.planning.addons.dra_driver import dra_driver_values
from components.planning.addons.monitoring import dcgm_exporter_values
from components.planning.addons.selection import select_addons
from components.planning.autoscaler_tags import node_template_tags
from components.planning.dra import GPU_DEVICE_CLASS, claim_template_spec
from components.planning.gpu_quotas import gpu_quotas
from components.planning.health_checks import check_claim_templates, check_pod_template
from components.planning.pools import GPU_RESOURCE
from components.planning.serving import claim_template, deployment_spec
from components.planning.stack_plan import plan_pools, plan_stack
from components.planning.training_job import claim_template as training_claim_template
from components.planning.training_job import pod_spec as training_pod_spec
from tests.builders import P5, SYSTEM, inference_on_dra, pool, shipped_plan, stack_config

#: A 4x L40S inference pool allocating through DRA, one node kept for cluster-autoscaler.
DRA_POOL: dict[str, Any] = {
    "name": "l40s",
    "role": "inference",
    "instanceType": "g6e.12xlarge",
    "scaling": {"min": 1, "max": 4},
    "gpuAllocation": "dra",
}
PLUGIN_POOL = pool(DRA_POOL, name="l4", instanceType="g6.xlarge", gpuAllocation="device-plugin")
CLAIM_TEMPLATE = "kubernetes:resource.k8s.io/v1:ResourceClaimTemplate"


def _pools(*pools: dict[str, Any]) -> dict[str, Any]:
    return {p.name: p for p in plan_pools(stack_config(SYSTEM, *pools))}


def _affinity_terms(values: dict[str, Any]) -> list[list[dict[str, Any]]]:
    required = values["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    return [term["matchExpressions"] for term in required["nodeSelectorTerms"]]


# ------------------------------------------------------------------------------------------------- one allocator
def test_each_gpu_pool_has_exactly_one_allocator() -> None:
    plans = list(_pools(DRA_POOL, PLUGIN_POOL).values())
    plugin = nvidia_device_plugin_values(stack_config(SYSTEM).addons.nvidia_device_plugin, plans)
    assert all(
        {"key": "gpu-clusters/pool", "operator": "NotIn", "values": ["l40s"]} in term
        for term in _affinity_terms(plugin)
    )
    driver = dra_driver_values(plans)
    assert _affinity_terms(driver["kubeletPlugin"]) == [
        [
            {"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]},
            {"key": "gpu-clusters/pool", "operator": "In", "values": ["l40s"]},
        ]
    ]
    assert driver["gpuResourcesEnabledOverride"] is True
    assert driver["resources"] == {"gpus": {"enabled": True}, "computeDomains": {"enabled": False}}


def test_the_switches_follow_the_pools_allocation() -> None:
    spec = stack_config(SYSTEM, DRA_POOL)
    only_dra = select_addons(spec.addons, plan_pools(spec))
    assert only_dra.on("nvidia-dra-driver-gpu") and not only_dra.on("nvidia-device-plugin")
    spec = stack_config(SYSTEM, PLUGIN_POOL)
    only_plugin = select_addons(spec.addons, plan_pools(spec))
    assert only_plugin.on("nvidia-device-plugin") and not only_plugin.on("nvidia-dra-driver-gpu")
    spec = stack_config(SYSTEM, DRA_POOL, PLUGIN_POOL)
    both = select_addons(spec.addons, plan_pools(spec))
    assert both.on("nvidia-device-plugin") and both.on("nvidia-dra-driver-gpu")


def test_a_dra_pool_promises_cluster_autoscaler_no_gpu_resource() -> None:
    pools = _pools(DRA_POOL, PLUGIN_POOL)
    assert f"k8s.io/cluster-autoscaler/node-template/resources/{GPU_RESOURCE}" not in node_template_tags(pools["l40s"])
    assert node_template_tags(pools["l4"])[f"k8s.io/cluster-autoscaler/node-template/resources/{GPU_RESOURCE}"] == "1"


def test_dcgm_exporter_maps_claimed_gpus_to_pods_only_with_a_dra_pool() -> None:
    assert dcgm_exporter_values(list(_pools(DRA_POOL).values()), None)["kubernetesDRA"] == {"enabled": True}
    assert "kubernetesDRA" not in dcgm_exporter_values(list(_pools(PLUGIN_POOL).values()), None)


# ------------------------------------------------------------------------------------------------------- claims
def _serving_spec(pool_plan: Any) -> tuple[dict[str, Any], dict[str, Any] | None]:
    spec = stack_config(
        SYSTEM,
        DRA_POOL,
        PLUGIN_POOL,
        storage={"nfs": {"kind": "efs", "kubernetes": {"namespace": "inference", "claimName": "weights"}}},
        workloads={"serving": [{"name": "chat", "pool": pool_plan, "model": "m", "gpusPerReplica": 2}]},
    )
    (workload,) = spec.workloads.serving
    plan = {p.name: p for p in plan_pools(spec)}[pool_plan]
    return deployment_spec(workload, plan, "weights")["template"]["spec"], claim_template(workload, plan)


def test_serving_replicas_on_a_dra_pool_take_their_gpus_through_a_claim() -> None:
    pod, template = _serving_spec("l40s")
    assert pod["resourceClaims"] == [{"name": "gpus", "resourceClaimTemplateName": "chat-gpus"}]
    (container,) = pod["containers"]
    assert container["resources"]["claims"] == [{"name": "gpus"}]
    assert GPU_RESOURCE not in container["resources"]["requests"] and "limits" not in container["resources"]
    assert template == claim_template_spec(2)
    assert template["spec"]["devices"]["requests"] == [
        {"name": "gpus", "exactly": {"deviceClassName": GPU_DEVICE_CLASS, "allocationMode": "ExactCount", "count": 2}}
    ]


def test_serving_replicas_on_a_device_plugin_pool_ask_for_nvidia_com_gpu() -> None:
    pod, template = _serving_spec("l4")
    assert template is None and "resourceClaims" not in pod
    (container,) = pod["containers"]
    assert container["resources"]["limits"] == {GPU_RESOURCE: "2"}
    assert "claims" not in container["resources"]


def _training_plan(allocation: str) -> Any:
    spec = stack_config(
        SYSTEM,
        pool(P5, scaling={"min": 1, "max": 4}, gpuAllocation=allocation),
        addons={"kueue": {"enabled": "off"}},
        storage={
            "lustre": {"name": "scratch", "storageCapacityGib": 4800, "kubernetes": {"namespace": "training"}},
        },
        workloads={"training": {"name": "ref", "pool": "h100", "nodes": 2}},
    )
    training = plan_stack(spec).training
    assert training is not None
    return training


def test_the_training_workers_on_a_dra_pool_claim_every_gpu_of_their_node_and_keep_efa() -> None:
    plan = _training_plan("dra")
    pod = training_pod_spec(plan)
    assert pod["resourceClaims"] == [{"name": "gpus", "resourceClaimTemplateName": "ref-gpus"}]
    resources = pod["containers"][0]["resources"]
    assert resources["claims"] == [{"name": "gpus"}]
    assert GPU_RESOURCE not in resources["requests"] and GPU_RESOURCE not in resources["limits"]
    assert resources["limits"]["vpc.amazonaws.com/efa"] == "32"
    assert training_claim_template(plan) == claim_template_spec(8)
    on_plugin = _training_plan("device-plugin")
    assert training_claim_template(on_plugin) is None
    assert training_pod_spec(on_plugin)["containers"][0]["resources"]["limits"][GPU_RESOURCE] == "8"


def test_the_health_gate_checks_a_dra_node_through_a_claim_of_all_its_gpus() -> None:
    pools = _pools(DRA_POOL, PLUGIN_POOL)
    assert pools["l40s"].health_gated
    pod = check_pod_template(pools["l40s"], 1200)
    assert pod["spec"]["resourceClaims"] == [{"name": "gpus", "resourceClaimTemplateName": "check-l40s-gpus"}]
    (container,) = pod["spec"]["containers"]
    assert container["resources"]["claims"] == [{"name": "gpus"}]
    assert GPU_RESOURCE not in container["resources"].get("limits", {})
    assert check_claim_templates(list(pools.values())) == {"check-l40s-gpus": claim_template_spec(4)}
    assert "resourceClaims" not in check_pod_template(pools["l4"], 1200)["spec"]


def test_a_namespace_with_a_dra_pool_caps_its_claimed_gpus_too() -> None:
    spec = stack_config(
        SYSTEM,
        DRA_POOL,
        storage={"nfs": {"kind": "efs", "kubernetes": {"namespace": "inference", "claimName": "weights"}}},
    )
    (quota,) = gpu_quotas(spec.storage, spec.workloads, plan_pools(spec))
    assert quota.hard == {
        "requests.nvidia.com/gpu": "16",
        "gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "16",
    }


def test_verify_expects_the_dra_kubelet_plugin_and_no_allocatable_gpus() -> None:
    spec = stack_config(SYSTEM, DRA_POOL)
    plan = plan_stack(spec)
    expectation = pool_expectation(plan.pool("l40s"), plan.addons)
    assert expectation.dra and expectation.advertised_resources("g6e.12xlarge") == {}
    assert [d.names for d in expectation.daemons if "DRA" in d.what] == [DRA_KUBELET_PLUGIN_DAEMONSETS]
    assert not [d for d in expectation.daemons if d.what == "NVIDIA device plugin"]
    skipped = mig_skip("dcgm", expectation, "unused")
    assert skipped is not None and skipped.status == "skip" and "DRA pool" in skipped.detail


# --------------------------------------------------------------------------------------------------- validation
def _refused(*pools: dict[str, Any], **sections: Any) -> dict[str, str]:
    with pytest.raises(ConfigError) as caught:
        stack_config(SYSTEM, *pools, validated=True, **sections)
    # the path as reported names the pool: `nodePools[1] (l40s).gpuAllocation`
    return {re.sub(r" \([^)]*\)", "", p.path): p.message for p in caught.value.problems}


def test_a_dra_pool_must_be_an_aws_gpu_pool_on_al2023() -> None:
    found = _refused(pool(DRA_POOL, amiFamily="bottlerocket"), cluster={"bottlerocketRelease": "1.42.0"})
    assert "Bottlerocket" in found["nodePools[1].gpuAllocation"]
    found = _refused(pool(SYSTEM, name="cpu", role="inference", gpuAllocation="dra"))
    assert "m7i.xlarge has no GPUs" in found["nodePools[1].gpuAllocation"]


def test_a_hybrid_pool_keeps_the_device_plugin() -> None:
    from tests.builders import A40

    found = _refused(pool(A40, gpuAllocation="dra"))
    assert found["nodePools[1].gpuAllocation"].startswith("hybrid pool a40 gets its GPUs from the device plugin")


@pytest.mark.parametrize("sharing", [{"timeSlicingReplicas": 2}, {"migDevices": {"1g.10gb": 7}}])
def test_a_dra_pool_does_not_share_or_partition_its_gpus(sharing: dict[str, Any]) -> None:
    mig = "migDevices" in sharing
    dra = pool(DRA_POOL, instanceType="p5.48xlarge" if mig else "g6e.12xlarge", devicePlugin=sharing)
    found = _refused(dra, addons={"nvidiaDevicePlugin": {"migStrategy": "single"}} if mig else {})
    assert "only the device plugin does here" in found["nodePools[1].gpuAllocation"]


@pytest.mark.parametrize("mode", ["cluster-autoscaler", "gpu-utilization"])
def test_cluster_autoscaler_cannot_scale_a_dra_pool_from_zero(mode: str) -> None:
    found = _refused(pool(DRA_POOL, scaling={"min": 0, "max": 4, "mode": mode}))
    assert found["nodePools[1].scaling.min"] == (
        "cluster-autoscaler cannot scale DRA pool l40s up from zero (its AWS node template has no ResourceSlices); "
        "set scaling.min to at least 1 or keep `gpuAllocation: device-plugin`"
    )
    stack_config(SYSTEM, pool(DRA_POOL, scaling={"min": 0, "max": 4, "mode": "fixed"}), validated=True)


def test_the_default_queue_leaves_a_dra_pool_out() -> None:
    """Kueue does not count GPUs taken through claims, so the shared ClusterQueue holds quota only for the device
    plugin's pools; the DRA pool is named in the plan summary as outside every queue."""
    config = stack_config(SYSTEM, pool(P5, scaling={"min": 1, "max": 4}, gpuAllocation="dra"), PLUGIN_POOL)
    queues = plan_stack(config).job_queues
    assert queues is not None
    (shared,) = queues.cluster_queues
    assert [q.flavor for q in shared.quotas] == ["l4"]
    assert [f.name for f in queues.flavors] == ["l4"]
    assert queues.summary()["draPoolsOutsideQueues"] == ["h100"]
    stack_config(SYSTEM, pool(P5, scaling={"min": 1, "max": 4}, gpuAllocation="dra"), PLUGIN_POOL, validated=True)


def test_a_queue_that_names_a_dra_pool_is_refused() -> None:
    found = _refused(
        DRA_POOL, PLUGIN_POOL, workloads={"queues": {"clusterQueues": [{"name": "serve", "pools": ["l4", "l40s"]}]}}
    )
    assert found["workloads.queues.clusterQueues[0].pools[1]"] == (
        "pool l40s allocates its GPUs through DRA, which Kueue does not count; leave it out of ClusterQueue "
        "serve's pools, or keep `gpuAllocation: device-plugin` on it"
    )
    assert "workloads.queues.clusterQueues[0].pools[0]" not in found


def test_validation_and_the_plan_read_one_kueue_switch() -> None:
    """A stack whose only GPU pool is on DRA runs Kueue (the conformance rule) in the plan, and validation judges
    its queues with the same switch: naming the DRA pool is refused there too, and nothing else is."""
    config = stack_config(SYSTEM, DRA_POOL)
    assert plan_stack(config).addons.on("kueue")
    found = _refused(DRA_POOL, workloads={"queues": {"clusterQueues": [{"name": "serve", "pools": ["l40s"]}]}})
    assert list(found) == ["workloads.queues.clusterQueues[0].pools[0]"]


def test_a_queue_with_no_device_plugin_pool_has_no_resource_group() -> None:
    """Kueue's CRD allows a ClusterQueue without resource groups but not a group without flavors ([KUEUE] chart
    templates/crd/kueue.x-k8s.io_clusterqueues.yaml: `flavors` minItems 1)."""
    queues = plan_stack(stack_config(SYSTEM, DRA_POOL)).job_queues
    assert queues is not None and not queues.counts_gpus
    (shared,) = queues.cluster_queues
    assert shared.spec()["resourceGroups"] == []
    assert queues.flavors == ()


# ----------------------------------------------------------------------------------------- the inference stack
@pytest.mark.program
def test_the_inference_stack_on_dra_serves_through_claims() -> None:
    run = inference_on_dra().run
    templates = {r.inputs["metadata"]["name"]: r.inputs for r in run.of_type(CLAIM_TEMPLATE)}
    assert templates["chat-gpus"]["metadata"]["namespace"] == "inference"
    assert templates["chat-gpus"]["spec"] == claim_template_spec(1)
    assert templates["check-l40s-gpus"]["metadata"]["namespace"] == "node-health"
    (deployment,) = [r for r in run.of_type("kubernetes:apps/v1:Deployment") if r.name.endswith("-chat")]
    pod = deployment.inputs["spec"]["template"]["spec"]
    assert pod["resourceClaims"] == [{"name": "gpus", "resourceClaimTemplateName": "chat-gpus"}]
    assert any(d.endswith("chat-gpus") for d in deployment.depends_on)
    releases = {r.inputs["name"]: r.inputs for r in run.of_type("kubernetes:helm.sh/v3:Release")}
    # the replicas wait for the driver, so a destroy stops them while its kubelet plugin can still release the claims
    (driver,) = [r for r in run.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "nvidia-dra-driver-gpu"]
    assert driver.urn in deployment.depends_on
    assert releases["nvidia-dra-driver-gpu"]["version"] == "25.12.0"
    assert "nvidia-device-plugin" not in releases


@pytest.mark.program
def test_the_plan_summary_says_how_each_pool_allocates() -> None:
    pools = {p["name"]: p for p in inference_on_dra().plan["summary"]["nodePools"]}
    assert pools["l40s"]["gpuAllocation"] == "dra" and pools["l40s"]["gpuResourcesPerNode"] == {}
    assert pools["system"]["gpuAllocation"] is None
    training = {p["name"]: p for p in shipped_plan("training")["summary"]["nodePools"]}
    assert training["h100"]["gpuAllocation"] == "device-plugin"
    assert training["h100"]["gpuResourcesPerNode"] == {GPU_RESOURCE: 8}
