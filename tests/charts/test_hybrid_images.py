"""The images the plan says run on hybrid nodes (and so the registries the servers must reach) are the images the
pinned charts render for pods that fit a hybrid node; and the device plugin on the servers injects GPUs the way
the plan's daemon-reload fix (the /dev/char links) covers."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.catalog.images import hybrid_node_images
from components.planning.gpu_runtime import DEV_CHAR_SYMLINKS
from tests.builders import shipped_stack
from tests.charts.conftest import Case, planned_case, require_charts
from tests.charts.rendering import containers, fits, pod_spec
from tests.charts.test_rendered_releases import _nodes, objects_of, rendered

pytestmark = pytest.mark.charts

HYBRID_CASES = ("hybrid", "hybrid-runtime-class")


@pytest.fixture(scope="module", params=HYBRID_CASES)
def case(request: pytest.FixtureRequest, _variant_dir: Path) -> Case:
    """The shipped hybrid stack and its RuntimeClass variant: the cases with hybrid pools."""
    require_charts()
    return planned_case(request.param, _variant_dir)


def _chart(chart_dir: str) -> str:
    """`nvidia-device-plugin-0.20.0` -> `nvidia-device-plugin`."""
    return chart_dir.rsplit("-", 1)[0]


def on_hybrid_nodes(case: Case) -> dict[str, set[str]]:
    """Per chart: the images of every rendered pod that fits some hybrid node of the case."""
    nodes = [n for n in _nodes(case, existing_only=False) if n.labels.get("eks.amazonaws.com/compute-type") == "hybrid"]
    found: dict[str, set[str]] = {}
    for release in rendered(case):
        for obj in objects_of(release):
            spec = pod_spec(obj)
            if spec is None or not any(not fits(spec, node) for node in nodes):
                continue
            found.setdefault(_chart(release.chart_dir), set()).update(c["image"] for c in containers(spec))
    return found


def test_the_plans_hybrid_images_are_what_the_charts_run_there(case: Case) -> None:
    rendered_images = on_hybrid_nodes(case)
    planned = {i["runsIt"].removeprefix("chart ") for i in shipped_stack("hybrid").plan["summary"]["hybrid"]["images"]}
    charts_here = {_chart(r.chart_dir) for r in rendered(case)}
    # every rendered chart with pods on the servers is in the plan, and no planned chart runs nothing there
    assert set(rendered_images) == planned & charts_here
    for chart, images in rendered_images.items():
        assert images == {i.reference for i in hybrid_node_images(chart)}, chart


def test_the_device_plugin_on_the_servers_uses_the_injection_the_dev_char_links_cover(case: Case) -> None:
    """The device plugin keeps its default `envvar` device list (the NVIDIA runtime's legacy injection), the path
    NVIDIA's /dev/char workaround is for; a switch to CDI would need this fix revisited (and `nvidia-ctk cdi
    generate` on every server), so it fails here first."""
    nodes = [n for n in _nodes(case, existing_only=False) if n.labels.get("eks.amazonaws.com/compute-type") == "hybrid"]
    plugins = [
        obj
        for release in rendered(case)
        if _chart(release.chart_dir) == "nvidia-device-plugin"
        for obj in objects_of(release)
        if obj["kind"] == "DaemonSet"
        and (spec := pod_spec(obj)) is not None
        and any(not fits(spec, node) for node in nodes)
    ]
    assert plugins, "a device plugin DaemonSet runs on the A40 servers"
    for obj in plugins:
        for container in containers(pod_spec(obj) or {}):
            env = {e["name"]: e.get("value") for e in container.get("env") or []}
            assert env.get("DEVICE_LIST_STRATEGY", "envvar") == "envvar", obj["metadata"]["name"]
    a40 = next(p for p in shipped_stack("hybrid").plan["summary"]["nodePools"] if p["name"] == "a40")
    assert DEV_CHAR_SYMLINKS in a40["gpuRuntime"]["serverCommands"]
