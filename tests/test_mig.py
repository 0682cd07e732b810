"""Multi-Instance GPU: the catalog's profiles, the mig-parted config, the mig-manager, the device plugin that waits
for the partitions, and the scale-from-zero template of a MIG pool."""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from components import catalog
from components.catalog import GPUS_PATH, MIG_COMPUTE_SLICES, MIG_MEMORY_SLICES, CatalogError, load_catalog
from components.planning.addons.device_plugins import nvidia_device_plugin_values
from components.planning.addons.mig_manager import NAMESPACE
from components.planning.autoscaler_tags import NODE_TEMPLATE, autoscaler_tags
from components.planning.hybrid import SsmActivation, hybrid_node_config
from components.planning.mig import advertised_resources, mig_parted_config
from components.planning.nodeadm import node_config, pool_user_data
from components.planning.pools import mig_config_name
from components.planning.stack_plan import plan_pools
from components.validation import validate_config
from components.yaml_loader import parse_yaml
from tests.builders import (
    AUTOSCALING_GROUP,
    INFERENCE_POOL,
    LAUNCH_TEMPLATE,
    SYSTEM_POOL,
    CliResult,
    addon_stack,
    file_plan,
    pool,
    run_addons,
    stack_config,
)
from tests.catalog_files import shipped_data, write_yaml
from tests.test_hybrid_join import CLUSTER as CLUSTER_DETAILS

CORPUS = Path(__file__).parent / "corpus" / "good"
H100_POOL = pool(
    INFERENCE_POOL,
    name="mig",
    instanceType="p5.48xlarge",
    capacity={"type": "on-demand"},
    scaling={"min": 0, "max": 2, "mode": "cluster-autoscaler"},
    devicePlugin={"migDevices": {"1g.10gb": 7}},
)
MIXED = {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}


# ------------------------------------------------------------------------------------------------------- catalog
@pytest.mark.parametrize("model", ["H100", "H100-PCIe", "H200", "A100", "A100-80GB", "A100-80GB-PCIe", "B200", "B300"])
def test_every_mig_gpu_fills_its_slices_with_each_profile_alone(model: str) -> None:
    """Each profile at its documented maximum fits the GPU's 7 compute and 8 memory slices, and the smallest 1g
    profile fills all 7 compute slices (the guide's 7 instances per GPU)."""
    mig = catalog.gpu_model(model).mig
    assert mig is not None and mig.source == "MIGUG+MIGPARTED"
    for profile in mig.profiles.values():
        assert profile.compute_slices * profile.max_instances <= MIG_COMPUTE_SLICES, profile
        assert profile.memory_slices * profile.max_instances <= MIG_MEMORY_SLICES, profile
    assert max(p.max_instances for p in mig.profiles.values()) == 7
    assert sum(1 for p in mig.profiles.values() if p.compute_slices == 7) == 1, "one whole-GPU profile"


@pytest.mark.parametrize(
    ("model", "smallest", "whole"),
    [("H100", "1g.10gb", "7g.80gb"), ("A100", "1g.5gb", "7g.40gb"), ("H200", "1g.18gb", "7g.141gb"),
     ("B200", "1g.23gb", "7g.180gb"), ("B300", "1g.34gb", "7g.269gb")],
)  # fmt: skip
def test_profile_names_follow_the_gpus_memory(model: str, smallest: str, whole: str) -> None:
    mig = catalog.gpu_model(model).mig
    assert mig is not None
    assert mig.profiles[smallest].max_instances == 7
    assert mig.profiles[whole].memory_slices == 8


@pytest.mark.parametrize("model", ["A40", "L40S", "L4", "A10G", "T4"])
def test_gpus_without_mig_have_no_profiles(model: str) -> None:
    assert catalog.gpu_model(model).mig is None


def test_loader_refuses_a_profile_whose_name_and_slices_disagree(tmp_path: Path) -> None:
    data = shipped_data(GPUS_PATH)
    h100 = next(g for g in data["gpu_models"] if g["name"] == "H100")
    h100["mig"]["profiles"]["2g.20gb"] = [3, 2, 3]
    with pytest.raises(CatalogError, match="says 2 compute slices, not 3"):
        load_catalog(gpus_path=write_yaml(tmp_path, data, "gpus.yaml"))


def test_loader_refuses_an_unknown_mig_source(tmp_path: Path) -> None:
    data = shipped_data(GPUS_PATH)
    next(g for g in data["gpu_models"] if g["name"] == "H100")["mig"]["source"] = "BLOG"
    with pytest.raises(CatalogError, match=r"mig\.source"):
        load_catalog(gpus_path=write_yaml(tmp_path, data, "gpus.yaml"))


# ------------------------------------------------------------------------------------------------------ planning
def _plans(*pools: dict[str, Any], strategy: str = "single") -> list[Any]:
    return plan_pools(addon_stack(SYSTEM_POOL, *pools, addons={"nvidiaDevicePlugin": {"migStrategy": strategy}}))


MIG_CONFIG = mig_config_name("mig", {"1g.10gb": 7})


def test_mig_pool_nodes_register_with_the_mig_config_label_named_after_the_pool_and_layout() -> None:
    system, mig = _plans(H100_POOL)
    assert mig.labels["nvidia.com/mig.config"] == MIG_CONFIG
    assert MIG_CONFIG.startswith("mig-") and len(MIG_CONFIG) == len("mig-") + 8
    assert "nvidia.com/mig.config" not in system.labels


def test_the_config_name_depends_on_the_layout_not_on_its_order() -> None:
    assert mig_config_name("p", {"3g.40gb": 1, "1g.10gb": 2}) == mig_config_name("p", {"1g.10gb": 2, "3g.40gb": 1})
    assert mig_config_name("p", {"1g.10gb": 7}) != mig_config_name("p", {"1g.10gb": 6})
    assert mig_config_name("p", {"1g.10gb": 7}) != mig_config_name("q", {"1g.10gb": 7})


def test_a_layout_change_replaces_nodes_instead_of_repartitioning_them() -> None:
    """A new layout is a new label, hence new user data (the pool's nodes are replaced), and the old label's name is
    no longer in the mig-parted file, so a manager restarting on an old node fails it instead of applying the new
    layout under its pods."""
    (_, before) = _plans(H100_POOL)
    (_, after) = _plans(pool(H100_POOL, devicePlugin={"migDevices": {"2g.20gb": 3}}))
    old, new = before.labels["nvidia.com/mig.config"], after.labels["nvidia.com/mig.config"]
    assert old != new
    old_data = pool_user_data(node_config("c", "https://e", "ca", "10.100.0.0/16", before), before)
    new_data = pool_user_data(node_config("c", "https://e", "ca", "10.100.0.0/16", after), after)
    assert f"nvidia.com/mig.config={old}" in old_data and f"nvidia.com/mig.config={new}" in new_data
    assert old_data != new_data
    configs = mig_parted_config([after])["mig-configs"]
    assert old not in configs and configs[new][0]["mig-devices"] == {"2g.20gb": 3}


def test_mig_parted_config_partitions_every_gpu_of_each_mig_pool() -> None:
    other = pool(H100_POOL, name="mixed", devicePlugin={"migDevices": MIXED}, scaling={"mode": "fixed", "max": 1})
    config = mig_parted_config(_plans(H100_POOL, other, strategy="mixed"))
    assert config["version"] == "v1"
    assert config["mig-configs"] == {
        "all-disabled": [{"devices": "all", "mig-enabled": False}],
        MIG_CONFIG: [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}],
        mig_config_name("mixed", MIXED): [{"devices": "all", "mig-enabled": True, "mig-devices": MIXED}],
    }


def test_single_strategy_advertises_mig_devices_as_gpus_times_replicas() -> None:
    sliced = pool(H100_POOL, devicePlugin={"migDevices": {"1g.10gb": 7}, "timeSlicingReplicas": 2})
    (_, mig) = _plans(sliced)
    assert advertised_resources(mig, "single") == {"nvidia.com/gpu": 8 * 7 * 2}


def test_mixed_strategy_advertises_one_resource_per_profile_and_no_whole_gpu() -> None:
    (_, mig) = _plans(pool(H100_POOL, devicePlugin={"migDevices": MIXED}), strategy="mixed")
    assert advertised_resources(mig, "mixed") == {
        "nvidia.com/gpu": 0,
        "nvidia.com/mig-1g.10gb": 16,
        "nvidia.com/mig-2g.20gb": 8,
        "nvidia.com/mig-3g.40gb": 8,
    }


def test_scale_from_zero_template_offers_the_mig_devices_and_the_label() -> None:
    """A pod asking for one `nvidia.com/gpu` on the MIG pool matches the template: 56 of them, not 8."""
    (_, mig) = _plans(H100_POOL)
    tags = autoscaler_tags("gpu", mig)
    assert tags[f"{NODE_TEMPLATE}/resources/nvidia.com/gpu"] == "56"
    assert tags[f"{NODE_TEMPLATE}/label/nvidia.com/mig.config"] == MIG_CONFIG


def test_device_plugin_waits_for_the_partitions_on_mig_nodes_only() -> None:
    """Two ORed terms: nodes without a MIG config, and MIG nodes whose mig-manager reports success; both keep the
    GPU label the chart's own affinity would have needed."""
    spec = addon_stack(SYSTEM_POOL, H100_POOL, INFERENCE_POOL, addons={"nvidiaDevicePlugin": {"migStrategy": "single"}})
    values = nvidia_device_plugin_values(spec.addons.nvidia_device_plugin, plan_pools(spec))
    terms = values["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    gpu = {"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]}
    assert terms == [
        {"matchExpressions": [gpu, {"key": "nvidia.com/mig.config", "operator": "DoesNotExist"}]},
        {"matchExpressions": [gpu, {"key": "nvidia.com/mig.config.state", "operator": "In", "values": ["success"]}]},
    ]


def test_device_plugin_affinity_is_unchanged_without_mig_pools() -> None:
    spec = addon_stack(SYSTEM_POOL, INFERENCE_POOL)
    values = nvidia_device_plugin_values(spec.addons.nvidia_device_plugin, plan_pools(spec))
    terms = values["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]}]}]


def test_time_slicing_a_mixed_mig_pool_shares_each_profiles_resource() -> None:
    sliced = pool(H100_POOL, devicePlugin={"migDevices": MIXED, "timeSlicingReplicas": 4}, scaling={"mode": "fixed"})
    spec = addon_stack(SYSTEM_POOL, sliced, addons={"nvidiaDevicePlugin": {"migStrategy": "mixed"}})
    values = nvidia_device_plugin_values(spec.addons.nvidia_device_plugin, plan_pools(spec))
    config = parse_yaml(values["config"]["map"]["mig"])
    assert config["flags"] == {"migStrategy": "mixed"}
    assert config["sharing"]["timeSlicing"]["resources"] == [
        {"name": "nvidia.com/mig-1g.10gb", "replicas": 4},
        {"name": "nvidia.com/mig-2g.20gb", "replicas": 4},
        {"name": "nvidia.com/mig-3g.40gb", "replicas": 4},
    ]


# ---------------------------------------------------------------------------------------------- the mig-manager
def _mig_manager_run() -> Any:
    return run_addons(addon_stack(SYSTEM_POOL, H100_POOL, addons={"nvidiaDevicePlugin": {"migStrategy": "single"}}))


@pytest.mark.program
def test_mig_manager_mounts_the_pools_mig_parted_config() -> None:
    run = _mig_manager_run()
    config_map = run.one("kubernetes:core/v1:ConfigMap", "gpu-addons-mig-manager-config")
    assert config_map.inputs["metadata"] == {"name": "mig-parted-config", "namespace": "nvidia-mig-manager"}
    config = parse_yaml(config_map.inputs["data"]["config.yaml"])
    assert config["mig-configs"][MIG_CONFIG] == [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}]


@pytest.mark.program
def test_mig_manager_runs_privileged_on_mig_nodes_with_the_pinned_image() -> None:
    daemon_set = _mig_manager_run().one("kubernetes:apps/v1:DaemonSet", "gpu-addons-mig-manager-daemon-set")
    pod = daemon_set.inputs["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == "nvcr.io/nvidia/cloud-native/k8s-mig-manager:v0.15.0"
    assert container["securityContext"] == {"privileged": True}
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["CONFIG_FILE"] == "/mig-parted-config/config.yaml"
    assert env["WITH_REBOOT"] == "true", "a mode change blocked by a GPU client completes after one reboot"
    assert "NODE_NAME" in env and "POD_NAMESPACE" in env
    assert env["HOST_KUBELET_SYSTEMD_SERVICE"] == "", "no kubelet restart on AL2023 (cgroup v2)"
    (term,) = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert {"key": "nvidia.com/mig.config", "operator": "Exists"} in term["matchExpressions"]
    assert {"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"} in pod["tolerations"]
    assert pod["hostPID"] is True


@pytest.mark.program
def test_mig_manager_rbac_is_the_operators_not_the_examples_wildcard() -> None:
    run = _mig_manager_run()
    cluster_role = run.one("kubernetes:rbac.authorization.k8s.io/v1:ClusterRole")
    assert cluster_role.inputs["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "update", "patch"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
    ]
    role = run.one("kubernetes:rbac.authorization.k8s.io/v1:Role")
    assert role.inputs["metadata"]["namespace"] == "nvidia-mig-manager"
    assert all("*" not in r["verbs"] and "*" not in r["resources"] for r in role.inputs["rules"])


@pytest.mark.program
def test_mig_manager_namespace_admits_its_privileged_pod() -> None:
    """The stack's namespaces component labels it `privileged` (its one pod needs the host), and the DaemonSet waits
    for it."""
    plan = file_plan(CORPUS / "mig-h100-pool.yaml")
    (namespace,) = [
        r for r in _resources(plan, "kubernetes:core/v1:Namespace") if r["inputs"]["metadata"]["name"] == NAMESPACE
    ]
    assert namespace["inputs"]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    (daemon_set,) = _resources(plan, "kubernetes:apps/v1:DaemonSet")
    assert namespace["urn"] in daemon_set["options"]["dependsOn"]


@pytest.mark.program
def test_no_mig_manager_without_mig_pools() -> None:
    run = run_addons(addon_stack(SYSTEM_POOL, INFERENCE_POOL))
    assert run.of_type("gpu-clusters:index:MigManager") == []
    assert run.of_type("kubernetes:apps/v1:DaemonSet") == []


# ------------------------------------------------------------------------------------------- a whole MIG stack
def _resources(plan: dict[str, Any], type_token: str) -> list[dict[str, Any]]:
    return [r for r in plan["resources"] if r["type"] == type_token]


@pytest.mark.program
def test_h100_mig_stack_plans_its_partitions_end_to_end() -> None:
    """The corpus stack through the whole program: the launch template's kubelet labels, the ASG's template tags,
    the mig-manager's config and the plan summary all say the same partition."""
    plan = file_plan(CORPUS / "mig-h100-pool.yaml")
    (template,) = [r for r in _resources(plan, LAUNCH_TEMPLATE) if r["name"] == "corpus-mig"]
    user_data = base64.b64decode(template["inputs"]["userData"]).decode()
    assert f"nvidia.com/mig.config={MIG_CONFIG}" in user_data
    # An inference pool that refreshes is a managed node group: its template tags go on the group EKS creates.
    assert not [r for r in _resources(plan, AUTOSCALING_GROUP) if r["name"] == "corpus-mig"]
    tags = {
        r["inputs"]["tag"]["key"]: r["inputs"]["tag"]["value"]
        for r in _resources(plan, "aws:autoscaling/tag:Tag")
        if r["name"].startswith("corpus-mig-")
    }
    assert tags[f"{NODE_TEMPLATE}/resources/nvidia.com/gpu"] == "112", "8 GPUs x 7 devices x 2 replicas"
    (config_map,) = [r for r in _resources(plan, "kubernetes:core/v1:ConfigMap") if r["name"].endswith("-config")]
    assert parse_yaml(config_map["inputs"]["data"]["config.yaml"])["mig-configs"][MIG_CONFIG][0]["mig-devices"] == {
        "1g.10gb": 7
    }
    pools = {p["name"]: p for p in plan["summary"]["nodePools"]}
    assert pools["mig"]["management"] == "managed"
    assert pools["mig"]["migDevicesPerGpu"] == {"1g.10gb": 7}
    assert pools["mig"]["gpuResourcesPerNode"] == {"nvidia.com/gpu": 112}
    assert pools["train"]["migDevicesPerGpu"] is None
    assert pools["train"]["gpuResourcesPerNode"] == {"nvidia.com/gpu": 8}
    policies = {v["policy"] for v in plan["violations"]}
    # the corpus stack lacks tags and an alert e-mail; mig-manager needs the host, by an approved exception
    assert policies <= {"cost-allocation-tags", "alarms-notify-someone", "policy-exceptions"}


def test_hybrid_mig_servers_get_the_label_through_nodeadm() -> None:
    """On-prem servers register with the same label, through the kubelet flags of their nodeadm config."""
    spec = validate_config(parse_yaml((CORPUS / "mig-hybrid-h100-pcie.yaml").read_text())["config"], "gpu-clusters")
    plan = next(p for p in plan_pools(spec) if p.name == "h100")
    document = hybrid_node_config("corpus", "us-east-1", CLUSTER_DETAILS, SsmActivation("act-1", "code-1"), plan)
    (flag,) = [f for f in document["spec"]["kubelet"]["flags"] if f.startswith("--node-labels=")]
    assert f"nvidia.com/mig.config={mig_config_name('h100', {'3g.40gb': 2})}" in flag.split("=", 1)[1].split(",")
    assert advertised_resources(plan, "mixed") == {"nvidia.com/gpu": 0, "nvidia.com/mig-3g.40gb": 8}


@pytest.mark.parametrize(
    ("instance_type", "devices"),
    [
        ("p4d.24xlarge", {"4g.20gb": 1, "2g.10gb": 1, "1g.5gb": 1}),
        ("p4d.24xlarge", {"3g.20gb": 2}),
        ("p5.48xlarge", {"2g.20gb": 3, "1g.10gb": 1}),
        ("p5.48xlarge", {"1g.10gb+me": 1, "1g.10gb": 6}),
        ("p5en.48xlarge", {"3g.71gb": 1, "2g.35gb": 1, "1g.18gb": 2}),
    ],
)
def test_documented_layouts_are_accepted(instance_type: str, devices: dict[str, int]) -> None:
    """Mixes the MIG user guide lists as valid for A100 and H100/H200 pass the slice sums."""
    mig = pool(H100_POOL, instanceType=instance_type, scaling={"mode": "fixed", "min": 0, "max": 1})
    spec = stack_config(
        SYSTEM_POOL,
        pool(mig, devicePlugin={"migDevices": devices}),
        validated=True,
        addons={"nvidiaDevicePlugin": {"migStrategy": "mixed"}},
    )
    assert spec.node_pools[1].device_plugin.mig_devices == devices


@pytest.mark.program
def test_plan_tables_show_each_gpus_partition(blueprint_cli: Callable[..., CliResult]) -> None:
    code, out, _ = blueprint_cli("plan", "--config", str(CORPUS / "mig-h100-pool.yaml"), "--format", "markdown")
    assert code == 0
    assert "| 8 x H100 (MIG 7x1g.10gb) |" in out
    assert "| 8 x H100 |" in out, "the whole-GPU training pool"
