"""`blueprint verify`'s `drivers` check reads GPU feature discovery's version labels, or on a `gpuAllocation: dra`
pool the DRA driver's ResourceSlice attributes: rendered through the pinned charts, every device-plugin GPU pool the
check judges has a GPU feature discovery pod and an NFD worker that fit its nodes, both on the host directory the
labels pass through, every judged DRA pool the DRA driver's kubelet plugin, and a stack with a device-plugin pool one
NFD master that may write `nvidia.com` labels."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from blueprint.verify.expectations import node_software
from components.planning.dra import allocates_through_dra
from tests.charts.conftest import Case
from tests.charts.rendering import fits, pod_spec
from tests.charts.test_rendered_releases import _nodes, objects_of, rendered

pytestmark = pytest.mark.charts

#: Where GPU feature discovery writes its labels and NFD's worker reads them ([NVDP] templates/daemonset-gfd.yml).
FEATURES_DIR = "/etc/kubernetes/node-feature-discovery/features.d"


def _chart_objects(case: Case, chart: str) -> list[dict[str, Any]]:
    return [obj for r in rendered(case) if r.chart_dir.startswith(f"{chart}-") for obj in objects_of(r)]


def _device_plugin_objects(case: Case) -> list[dict[str, Any]]:
    return _chart_objects(case, "nvidia-device-plugin")


def _host_paths(obj: dict[str, Any]) -> set[str]:
    spec = pod_spec(obj) or {}
    return {str(v["hostPath"]["path"]).rstrip("/") for v in spec.get("volumes") or [] if "hostPath" in v}


def test_every_judged_gpu_pool_runs_gpu_feature_discovery_and_an_nfd_worker(case: Case) -> None:
    objs = _device_plugin_objects(case)
    daemonsets = [o for o in objs if o["kind"] == "DaemonSet"]
    gfd = [o for o in daemonsets if o["metadata"]["name"].endswith("gpu-feature-discovery")]
    workers = [o for o in daemonsets if o["metadata"]["name"].endswith("node-feature-discovery-worker")]
    assert all(FEATURES_DIR in _host_paths(o) for o in gfd + workers), case.name
    dra_plugins = [o for o in _chart_objects(case, "nvidia-dra-driver-gpu") if o["kind"] == "DaemonSet"]
    judged = {p.name for p in case.pools if node_software(p)[0] is not None}
    dra = {p.name for p in case.pools if allocates_through_dra(p)}
    missing = []
    for node in _nodes(case, existing_only=False):
        if node.pool not in judged:
            continue
        readers = [("DRA kubelet plugin", dra_plugins)] if node.pool in dra else []
        readers = readers or [("GPU feature discovery", gfd), ("NFD worker", workers)]
        for what, found in readers:
            if not any(not fits(pod_spec(o) or {}, node) for o in found):
                missing.append(f"{node.pool}: no {what} pod fits")
    assert judged or case.name == "training-bottlerocket", f"{case.name}: no GPU pool is judged"
    assert not missing, f"{case.name}: " + "; ".join(missing)


def test_one_nfd_master_per_cluster_labels_the_nvidia_namespace(case: Case) -> None:
    """A stack whose GPU pools all allocate through DRA runs no device plugin, so no GPU feature discovery and no
    NFD: its versions come from the DRA driver's ResourceSlices."""
    objs = _device_plugin_objects(case)
    masters = [o for o in objs if o["kind"] == "Deployment" and o["metadata"]["name"].endswith("-master")]
    device_plugin_pools = [p for p in case.pools if p.is_gpu and not allocates_through_dra(p)]
    if not device_plugin_pools:
        assert not masters, case.name
        return
    assert len(masters) == 1, f"{case.name}: {[m['metadata']['name'] for m in masters]}"
    (conf,) = [o for o in objs if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("master-conf")]
    config = yaml.safe_load(next(iter(conf["data"].values())))
    assert "nvidia.com" in config["extraLabelNs"]
