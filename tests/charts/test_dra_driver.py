"""NVIDIA's DRA driver for GPUs rendered through its pinned chart (25.12.0) with the values of the inference stack on
DRA: the kubelet plugin only on the DRA pool and tolerating its taints, the DeviceClass `gpu.nvidia.com` the claims
name (created by the chart, on resource.k8s.io/v1), no ComputeDomain controller; and the device plugin, in a stack
with a DRA pool and a device-plugin pool, kept off the DRA pool (components/planning/addons/dra_driver.py cites the
chart)."""

from __future__ import annotations

from typing import Any

import pytest

from components.planning.addons.device_plugins import NVIDIA_DEVICE_PLUGIN_RELEASE
from components.planning.addons.dra_driver import DRA_DRIVER_RELEASE
from components.planning.dra import GPU_DEVICE_CLASS, RESOURCE_API_VERSION
from components.planning.node_health import STARTUP_TAINT_KEY
from tests.charts.conftest import planned_case, require_charts
from tests.charts.rendering import Release, objects, render_text, tolerates

pytestmark = pytest.mark.charts


def _release(case: str, name: str, tmp_path_factory: pytest.TempPathFactory) -> Release:
    require_charts()
    (release,) = [r for r in planned_case(case, tmp_path_factory.mktemp(case)).releases if r.name == name]
    return release


def _kubelet_plugin(rendered: list[dict[str, Any]]) -> dict[str, Any]:
    (daemonset,) = [o for o in rendered if o["kind"] == "DaemonSet"]
    assert daemonset["metadata"]["name"] == f"{DRA_DRIVER_RELEASE}-kubelet-plugin"
    return daemonset["spec"]["template"]["spec"]


def _required_terms(pod: dict[str, Any]) -> list[list[dict[str, Any]]]:
    required = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    return [term["matchExpressions"] for term in required["nodeSelectorTerms"]]


def test_the_kubelet_plugin_runs_on_the_dra_pool_only(tmp_path_factory: pytest.TempPathFactory) -> None:
    release = _release("inference-dra", DRA_DRIVER_RELEASE, tmp_path_factory)
    assert release.namespace == "kube-system"
    pod = _kubelet_plugin(objects(render_text(release)))
    assert _required_terms(pod) == [
        [
            {"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]},
            {"key": "gpu-clusters/pool", "operator": "In", "values": ["l40s"]},
        ]
    ]
    for taint in [("nvidia.com/gpu", "true", "NoSchedule"), (STARTUP_TAINT_KEY, "true", "NoSchedule")]:
        assert tolerates(pod["tolerations"], taint), taint
    assert pod["priorityClassName"] == "system-node-critical"
    assert [c["name"] for c in pod["containers"]] == ["gpus"]  # no ComputeDomain plugin


def test_the_chart_alone_tolerates_no_gpu_taint_and_selects_every_gpu_node(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The control: with the chart's own placement the plugin would land on any GPU node (the device plugin's too)
    and on no tainted one."""
    release = _release("inference-dra", DRA_DRIVER_RELEASE, tmp_path_factory)
    values = dict(release.values, kubeletPlugin={})
    pod = _kubelet_plugin(objects(render_text(release, values)))
    assert not tolerates(pod.get("tolerations") or [], ("nvidia.com/gpu", "true", "NoSchedule"))
    assert [{"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]}] in _required_terms(pod)


def test_the_chart_creates_the_gpu_device_class_on_the_ga_api(tmp_path_factory: pytest.TempPathFactory) -> None:
    rendered = objects(render_text(_release("inference-dra", DRA_DRIVER_RELEASE, tmp_path_factory)))
    classes = {o["metadata"]["name"]: o for o in rendered if o["kind"] == "DeviceClass"}
    assert GPU_DEVICE_CLASS in classes
    gpu = classes[GPU_DEVICE_CLASS]
    assert gpu["apiVersion"] == RESOURCE_API_VERSION
    (selector,) = gpu["spec"]["selectors"]
    assert "device.driver == 'gpu.nvidia.com'" in selector["cel"]["expression"]
    assert "type == 'gpu'" in selector["cel"]["expression"]


def test_no_compute_domain_controller_needs_a_control_plane_node(tmp_path_factory: pytest.TempPathFactory) -> None:
    """EKS shows no control-plane node: the ComputeDomain controller, which asks for one, is not rendered."""
    release = _release("inference-dra", DRA_DRIVER_RELEASE, tmp_path_factory)
    kinds = {(o["kind"], o["metadata"]["name"]) for o in objects(render_text(release))}
    assert not [k for k in kinds if k[0] == "Deployment"]
    assert not [k for k in kinds if k[0] == "DeviceClass" and "compute-domain" in k[1]]
    with_domains = dict(release.values, resources={"gpus": {"enabled": True}, "computeDomains": {"enabled": True}})
    (controller,) = [o for o in objects(render_text(release, with_domains)) if o["kind"] == "Deployment"]
    terms = _required_terms(controller["spec"]["template"]["spec"])
    assert [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}] in terms


def test_the_chart_refuses_gpu_allocation_without_the_override(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The chart fails the render unless told the device plugin keeps off the driver's nodes."""
    from helm_python.errors import HelmRenderError

    release = _release("inference-dra", DRA_DRIVER_RELEASE, tmp_path_factory)
    values = {k: v for k, v in release.values.items() if k != "gpuResourcesEnabledOverride"}
    with pytest.raises(HelmRenderError, match="gpuResourcesEnabledOverride"):
        render_text(release, values)


def test_the_device_plugin_keeps_off_the_dra_pool(tmp_path_factory: pytest.TempPathFactory) -> None:
    """In the inference-mixed-allocation variant `l40s` allocates through DRA and `l4` through the device plugin:
    the device plugin's DaemonSet excludes `l40s`, and the DRA kubelet plugin selects it alone, so each GPU node has
    exactly one allocator."""
    plugin = _release("inference-mixed-allocation", NVIDIA_DEVICE_PLUGIN_RELEASE, tmp_path_factory)
    (daemonset,) = [
        o
        for o in objects(render_text(plugin))
        if o["kind"] == "DaemonSet" and o["metadata"]["name"] == NVIDIA_DEVICE_PLUGIN_RELEASE
    ]
    terms = _required_terms(daemonset["spec"]["template"]["spec"])
    assert all({"key": "gpu-clusters/pool", "operator": "NotIn", "values": ["l40s"]} in term for term in terms)
    driver = _release("inference-mixed-allocation", DRA_DRIVER_RELEASE, tmp_path_factory)
    assert {"key": "gpu-clusters/pool", "operator": "In", "values": ["l40s"]} in _required_terms(
        _kubelet_plugin(objects(render_text(driver)))
    )[0]
