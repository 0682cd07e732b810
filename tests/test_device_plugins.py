"""NVIDIA and EFA device plugin releases: chart pins, namespace, and the values that decide where they run."""

from __future__ import annotations

import pytest
import yaml

from components.catalog import versions
from tests.builders import (
    HELM_RELEASE,
    HYBRID_POOL,
    INFERENCE_POOL,
    SYSTEM_POOL,
    TRAINING_POOL,
    addon_stack,
    pool,
    releases,
    run_addons,
)

pytestmark = pytest.mark.program

GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}


def test_nvidia_device_plugin_release_is_pinned_from_the_catalog():
    release = releases(run_addons(addon_stack(SYSTEM_POOL, TRAINING_POOL)))["nvidia-device-plugin"]
    pin = versions.chart("nvidia-device-plugin")
    assert release["chart"] == "nvidia-device-plugin"
    assert release["version"] == pin.version == "0.20.0"
    assert release["repositoryOpts"] == {"repo": "https://nvidia.github.io/k8s-device-plugin"}
    assert release["namespace"] == "kube-system"


def test_nvidia_device_plugin_tolerates_every_gpu_pool_taint_including_hybrid_ones():
    hybrid = pool(
        HYBRID_POOL, gpuRuntime="default-runtime", taints=[{"key": "site", "value": "onprem", "effect": "NoSchedule"}]
    )
    values = releases(run_addons(addon_stack(SYSTEM_POOL, TRAINING_POOL, hybrid)))["nvidia-device-plugin"]["values"]
    assert {"key": "CriticalAddonsOnly", "operator": "Exists"} in values["tolerations"]
    assert GPU_TOLERATION in values["tolerations"]
    assert {"key": "site", "operator": "Equal", "value": "onprem", "effect": "NoSchedule"} in values["tolerations"]
    assert values["priorityClassName"] == "system-node-critical"


def test_nvidia_device_plugin_values_carry_mig_strategy_and_time_slicing():
    sliced = pool(INFERENCE_POOL, devicePlugin={"timeSlicingReplicas": 8})
    spec = addon_stack(SYSTEM_POOL, sliced, addons={"nvidiaDevicePlugin": {"migStrategy": "mixed"}})
    values = releases(run_addons(spec))["nvidia-device-plugin"]["values"]
    assert values["migStrategy"] == "mixed"
    assert values["config"]["default"] == "default"
    l40s = yaml.safe_load(values["config"]["map"]["l40s"])
    assert l40s["flags"]["migStrategy"] == "mixed"
    assert l40s["sharing"]["timeSlicing"]["resources"][0]["replicas"] == 8


def test_nvidia_device_plugin_not_deployed_when_switched_off():
    spec = addon_stack(SYSTEM_POOL, TRAINING_POOL, addons={"nvidiaDevicePlugin": {"enabled": False}})
    run = run_addons(spec)
    assert "nvidia-device-plugin" not in releases(run)
    assert run.of_type("gpu-clusters:index:NvidiaDevicePlugin") == []


def test_efa_device_plugin_on_efa_pools_only():
    release = releases(run_addons(addon_stack(SYSTEM_POOL, TRAINING_POOL)))["aws-efa-k8s-device-plugin"]
    pin = versions.chart("aws-efa-k8s-device-plugin")
    assert release["version"] == pin.version
    assert versions.version_at_least(pin.app_version or "", "v0.5.10")  # stops counting NVLink devices as EFA
    assert release["repositoryOpts"] == {"repo": "https://aws.github.io/eks-charts"}
    assert release["namespace"] == "kube-system"
    values = release["values"]
    assert values["nodeSelector"] == {"gpu-clusters/efa": "true"}
    assert GPU_TOLERATION in values["tolerations"]
    assert values["supportedInstanceLabels"] == {
        "keys": ["node.kubernetes.io/instance-type"],
        "values": ["p5.48xlarge"],
    }


def test_efa_device_plugin_not_deployed_without_efa_or_when_off():
    assert "aws-efa-k8s-device-plugin" not in releases(run_addons(addon_stack(SYSTEM_POOL, INFERENCE_POOL)))
    off = addon_stack(SYSTEM_POOL, TRAINING_POOL, addons={"efaDevicePlugin": {"enabled": "off"}})
    run = run_addons(off)
    assert "aws-efa-k8s-device-plugin" not in releases(run)
    assert run.of_type("gpu-clusters:index:EfaDevicePlugin") == []


def test_device_plugin_releases_use_the_cluster_provider():
    run = run_addons(addon_stack(SYSTEM_POOL, TRAINING_POOL))
    for release in run.of_type(HELM_RELEASE):
        assert release.provider is not None and "pulumi:providers:kubernetes" in release.provider


# ------------------------------------------------------------------------------ NVIDIA runtime on hybrid GPU pools
def _pool_expression(values: dict) -> dict | None:
    terms = values["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    found = [e for e in terms[0]["matchExpressions"] if e["key"] == "gpu-clusters/pool"]
    return found[0] if found else None


def test_hybrid_device_plugin_pods_run_with_the_nvidia_runtime_class():
    """nodeadm leaves runc containerd's default on hybrid servers: the plugin there runs under `nvidia`."""
    hybrid = pool(
        HYBRID_POOL, gpuRuntime="runtime-class", taints=[{"key": "site", "value": "onprem", "effect": "NoSchedule"}]
    )
    run = run_addons(addon_stack(SYSTEM_POOL, TRAINING_POOL, hybrid))
    [runtime_class] = run.of_type("kubernetes:node.k8s.io/v1:RuntimeClass")
    assert runtime_class.inputs["metadata"]["name"] == "nvidia"
    assert runtime_class.inputs["handler"] == "nvidia"
    by_class = releases(run)["nvidia-device-plugin-runtime-class"]
    assert by_class["chart"] == "nvidia-device-plugin"
    assert by_class["namespace"] == "kube-system"
    values = by_class["values"]
    assert values["runtimeClassName"] == "nvidia"
    assert _pool_expression(values) == {"key": "gpu-clusters/pool", "operator": "In", "values": ["a40"]}
    assert {"key": "site", "operator": "Equal", "value": "onprem", "effect": "NoSchedule"} in values["tolerations"]
    cloud = releases(run)["nvidia-device-plugin"]["values"]
    assert "runtimeClassName" not in cloud
    assert _pool_expression(cloud) == {"key": "gpu-clusters/pool", "operator": "NotIn", "values": ["a40"]}


def test_cloud_only_stacks_get_no_runtime_class_and_unchanged_device_plugin_values():
    run = run_addons(addon_stack(SYSTEM_POOL, TRAINING_POOL, INFERENCE_POOL))
    assert run.of_type("kubernetes:node.k8s.io/v1:RuntimeClass") == []
    assert "nvidia-device-plugin-runtime-class" not in releases(run)
    values = releases(run)["nvidia-device-plugin"]["values"]
    assert "runtimeClassName" not in values
    assert _pool_expression(values) is None


def test_default_runtime_hybrid_pool_shares_the_cloud_release():
    run = run_addons(addon_stack(SYSTEM_POOL, TRAINING_POOL, pool(HYBRID_POOL, gpuRuntime="default-runtime")))
    assert run.of_type("kubernetes:node.k8s.io/v1:RuntimeClass") == []
    assert set(releases(run)) >= {"nvidia-device-plugin"}
    assert "nvidia-device-plugin-runtime-class" not in releases(run)
    assert _pool_expression(releases(run)["nvidia-device-plugin"]["values"]) is None
