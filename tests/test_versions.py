"""Tests for the pinned versions: exact pins, sources, autoscaler per minor, minimums, support status."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from components import clock
from components.catalog.images import hybrid_node_images
from components.catalog.versions import (
    EKS_ADDON_VERSION,
    EXACT_VERSION,
    VERSIONS_PATH,
    VersionsError,
    chart,
    charts,
    cluster_autoscaler_chart,
    default_kubernetes_version,
    kubernetes_minor,
    kubernetes_version_support,
    load_versions,
    managed_addon,
    managed_addon_policy,
    managed_addon_version,
    managed_addons,
    supported_kubernetes_versions,
    version_at_least,
    version_sources,
)
from tests.catalog_files import shipped_data, write_yaml

REQUIRED_CHARTS = [
    "nvidia-device-plugin",
    "aws-efa-k8s-device-plugin",
    "aws-node-termination-handler",
    "dcgm-exporter",
    "kube-prometheus-stack",
    "csi-driver-nfs",
    "cilium",
]
REQUIRED_ADDONS = [
    "vpc-cni",
    "coredns",
    "kube-proxy",
    "eks-pod-identity-agent",
    "aws-ebs-csi-driver",
    "aws-efs-csi-driver",
    "aws-fsx-csi-driver",
    "amazon-cloudwatch-observability",
]


def _cited(source: str) -> bool:
    return all(tag in version_sources() for tag in source.split("+"))


# ------------------------------------------------------------------------------------------- shipped pins


@pytest.mark.parametrize("name", REQUIRED_CHARTS)
def test_charts_are_pinned_exactly_and_sourced(name: str) -> None:
    pin = chart(name)
    assert EXACT_VERSION.match(pin.version), pin.version
    assert pin.repository.startswith(("https://", "oci://"))
    assert _cited(pin.source)


def test_facts_pins() -> None:
    assert chart("nvidia-device-plugin").version == "0.20.0"
    assert chart("aws-efa-k8s-device-plugin").version == "v0.5.30"
    assert chart("aws-efa-k8s-device-plugin").app_version == "v0.5.20"
    nth = chart("aws-node-termination-handler")
    assert (nth.version, nth.is_oci) == ("0.27.6", True)
    assert nth.chart_ref == "oci://public.ecr.aws/aws-ec2/helm/aws-node-termination-handler"
    assert chart("dcgm-exporter").version == "4.8.2"
    assert chart("csi-driver-nfs").version == "4.13.4"
    assert chart("nvidia-device-plugin").chart_ref == "nvidia-device-plugin"


def test_efa_device_plugin_is_past_the_nvlink_miscount_release() -> None:
    pin = chart("aws-efa-k8s-device-plugin")
    assert pin.app_version is not None
    assert version_at_least(pin.app_version, "v0.5.10")
    assert pin.minimum_app_version == "v0.5.10"


def test_cilium_is_on_an_aws_supported_line_and_flagged_partial() -> None:
    pin = chart("cilium")
    assert pin.chart_ref.startswith("oci://public.ecr.aws/eks/cilium/")
    assert kubernetes_minor(pin.version) in {"1.17", "1.18"}
    assert pin.partially_confirmed and pin.notes


def test_every_chart_cites_a_source() -> None:
    for pin in charts().values():
        assert _cited(pin.source), pin.name


@pytest.mark.parametrize("name", REQUIRED_ADDONS)
def test_managed_addons_are_listed_and_sourced(name: str) -> None:
    addon = managed_addon(name)
    assert addon.name == name and _cited(addon.source)


def test_vpc_cni_minimum_supports_efa_only_interfaces() -> None:
    """v1.18.5 is the first release whose ipamd accepts an interface without IP addresses (an efa-only one);
    v1.18.4 fails `DescribeAllENIs` on it (aws/amazon-vpc-cni-k8s CHANGELOG v1.18.5, #3047)."""
    vpc_cni = managed_addon("vpc-cni")
    assert vpc_cni.minimum_version == "v1.18.5"
    assert vpc_cni.accepts("v1.18.5-eksbuild.1")
    assert vpc_cni.accepts("v1.19.2-eksbuild.5")
    assert not vpc_cni.accepts("v1.18.4-eksbuild.1")
    assert not vpc_cni.accepts("v1.18.3-eksbuild.2")


def test_cloudwatch_minimum_for_gpu_metrics() -> None:
    cw = managed_addon("amazon-cloudwatch-observability")
    assert cw.minimum_version == "v1.3.0-eksbuild.1"
    assert not cw.accepts("v1.2.9-eksbuild.1")
    assert cw.feature_minimums["efa-metrics"] == "v1.5.2-eksbuild.1"


def test_addons_without_a_minimum_accept_anything() -> None:
    assert managed_addon("coredns").minimum_version is None
    assert managed_addon("coredns").accepts("v1.0.0-eksbuild.1")


def test_addon_policy_never_asks_eks_for_a_default() -> None:
    assert "never asks EKS" in managed_addon_policy()
    assert set(REQUIRED_ADDONS) <= set(managed_addons())


@pytest.mark.parametrize("name", REQUIRED_ADDONS)
def test_every_addon_has_an_exact_sourced_version_for_every_kubernetes_version(name: str) -> None:
    addon = managed_addon(name)
    assert _cited(addon.version_source)
    for kubernetes in supported_kubernetes_versions(on=dt.date(2026, 1, 1)):
        version = managed_addon_version(name, kubernetes)
        assert EKS_ADDON_VERSION.match(version) and addon.accepts(version)
    assert managed_addon_version(name, "1.35.2") == managed_addon_version(name, "1.35")


def test_kube_proxy_versions_follow_the_kubernetes_minor() -> None:
    for minor in managed_addon("kube-proxy").by_kubernetes_minor:
        assert kubernetes_minor(managed_addon_version("kube-proxy", minor)) == minor


def test_unknown_names_raise_key_errors_listing_known_ones() -> None:
    with pytest.raises(KeyError, match="nvidia-device-plugin"):
        chart("nvidia-plugin")
    with pytest.raises(KeyError, match="vpc-cni"):
        managed_addon("vpc_cni")


# ------------------------------------------------------------------------------------------- Kubernetes


def test_default_kubernetes_version() -> None:
    assert default_kubernetes_version() == "1.35"
    assert default_kubernetes_version() in supported_kubernetes_versions(dt.date(2026, 11, 21))


def test_supported_versions_follow_the_end_dates() -> None:
    late_nov = supported_kubernetes_versions(dt.date(2026, 11, 21))
    assert late_nov == ["1.36", "1.35", "1.34", "1.33", "1.32", "1.31"]
    # 1.31 leaves extended support on 2026-11-26.
    assert "1.31" not in supported_kubernetes_versions(dt.date(2026, 11, 27))


def test_support_status() -> None:
    support = kubernetes_version_support("1.34.2")
    assert support is not None and support.version == "1.34"
    assert support.status(dt.date(2026, 11, 1)) == "standard"
    assert support.status(dt.date(2027, 1, 1)) == "extended"
    assert support.status(dt.date(2028, 1, 1)) == "end-of-life"
    assert kubernetes_version_support("1.20") is None
    assert kubernetes_version_support("latest") is None


@pytest.mark.parametrize("version", ["1.31", "1.32", "1.33", "1.34", "1.35", "1.36"])
def test_cluster_autoscaler_image_matches_each_minor(version: str) -> None:
    pin = cluster_autoscaler_chart(version)
    assert pin.image_tag is not None
    assert kubernetes_minor(pin.image_tag) == version
    assert EXACT_VERSION.match(pin.version)
    assert pin.repository == "https://kubernetes.github.io/autoscaler"


def test_cluster_autoscaler_facts_tags_and_patch_versions() -> None:
    assert cluster_autoscaler_chart("1.36").image_tag == "v1.36.1"
    assert cluster_autoscaler_chart("1.35.2").image_tag == "v1.35.2"
    assert cluster_autoscaler_chart("1.34").image_tag == "v1.34.5"
    assert cluster_autoscaler_chart("1.34").version == "9.53.0"
    with pytest.raises(KeyError):
        cluster_autoscaler_chart("1.29")


def test_version_comparison() -> None:
    assert version_at_least("v0.5.20", "v0.5.10")
    assert not version_at_least("v0.5.9", "v0.5.10")  # numeric, not lexicographic
    assert version_at_least("v1.18.4-eksbuild.1", "v1.18.4")
    with pytest.raises(ValueError):
        version_at_least("latest", "1.0.0")


# ------------------------------------------------------------------------------------------- loader rejects bad data


def _write(tmp_path: Path, data: dict[str, Any]) -> Path:
    return write_yaml(tmp_path, data, "versions.yaml")


def _chart_entry(data: dict[str, Any], name: str) -> dict[str, Any]:
    return next(e for e in data["charts"] if e["name"] == name)


def test_loader_accepts_the_shipped_file_copied(tmp_path: Path) -> None:
    assert set(load_versions(_write(tmp_path, shipped_data(VERSIONS_PATH))).charts) == set(charts())


@pytest.mark.parametrize("floating", ["latest", "~0.20", "0.20.x", ">=0.20.0", "", "0.20"])
def test_loader_rejects_floating_chart_versions(tmp_path: Path, floating: str) -> None:
    data = shipped_data(VERSIONS_PATH)
    _chart_entry(data, "nvidia-device-plugin")["version"] = floating
    with pytest.raises(VersionsError, match="not an exact version"):
        load_versions(_write(tmp_path, data))


def test_loader_rejects_a_chart_without_source(tmp_path: Path) -> None:
    data = shipped_data(VERSIONS_PATH)
    del _chart_entry(data, "dcgm-exporter")["source"]
    with pytest.raises(VersionsError, match="no source"):
        load_versions(_write(tmp_path, data))


def test_loader_rejects_an_unknown_source_tag(tmp_path: Path) -> None:
    data = shipped_data(VERSIONS_PATH)
    data["managed_addons"]["addons"][0]["source"] = "BLOG"
    with pytest.raises(VersionsError, match="source tag"):
        load_versions(_write(tmp_path, data))


def test_loader_rejects_an_efa_plugin_below_the_minimum(tmp_path: Path) -> None:
    data = shipped_data(VERSIONS_PATH)
    _chart_entry(data, "aws-efa-k8s-device-plugin")["app_version"] = "v0.4.4"
    with pytest.raises(VersionsError, match="below the minimum"):
        load_versions(_write(tmp_path, data))


def test_loader_rejects_a_kubernetes_version_without_autoscaler(tmp_path: Path) -> None:
    data = shipped_data(VERSIONS_PATH)
    del data["cluster_autoscaler"]["by_kubernetes_minor"]["1.33"]
    with pytest.raises(VersionsError, match=r"no cluster-autoscaler pin for Kubernetes 1\.33"):
        load_versions(_write(tmp_path, data))


def test_loader_rejects_an_autoscaler_image_for_another_minor(tmp_path: Path) -> None:
    data = shipped_data(VERSIONS_PATH)
    data["cluster_autoscaler"]["by_kubernetes_minor"]["1.33"]["image_tag"] = "v1.34.5"
    with pytest.raises(VersionsError, match=r"not an exact 1\.33\.x release"):
        load_versions(_write(tmp_path, data))


def test_loader_rejects_an_unlisted_default(tmp_path: Path) -> None:
    data = shipped_data(VERSIONS_PATH)
    data["kubernetes"]["default"] = "1.29"
    with pytest.raises(VersionsError, match="default Kubernetes version"):
        load_versions(_write(tmp_path, data))


def test_loader_rejects_a_floating_addon_minimum(tmp_path: Path) -> None:
    data = shipped_data(VERSIONS_PATH)
    data["managed_addons"]["addons"][0]["minimum_version"] = "latest"
    with pytest.raises(VersionsError, match="not exact"):
        load_versions(_write(tmp_path, data))


def _addon_entry(data: dict[str, Any], name: str) -> dict[str, Any]:
    return next(a for a in data["managed_addons"]["addons"] if a["name"] == name)


def test_loader_rejects_an_addon_missing_a_kubernetes_version(tmp_path: Path) -> None:
    data = shipped_data(VERSIONS_PATH)
    del _addon_entry(data, "kube-proxy")["by_kubernetes_minor"]["1.33"]
    with pytest.raises(VersionsError, match="by_kubernetes_minor must cover"):
        load_versions(_write(tmp_path, data))


@pytest.mark.parametrize("version", ["v1.22.4", "latest", "v1.22.x-eksbuild.1"])
def test_loader_rejects_an_addon_version_that_is_not_exact(tmp_path: Path, version: str) -> None:
    data = shipped_data(VERSIONS_PATH)
    _addon_entry(data, "vpc-cni")["version"] = version
    with pytest.raises(VersionsError, match=r"not an exact vX\.Y\.Z-eksbuild\.N"):
        load_versions(_write(tmp_path, data))


def test_loader_rejects_an_addon_version_below_its_minimum(tmp_path: Path) -> None:
    data = shipped_data(VERSIONS_PATH)
    _addon_entry(data, "vpc-cni")["version"] = "v1.18.4-eksbuild.1"
    with pytest.raises(VersionsError, match=r"below the minimum v1\.18\.5"):
        load_versions(_write(tmp_path, data))


def test_loader_rejects_an_addon_with_both_or_neither_version_form(tmp_path: Path) -> None:
    data = shipped_data(VERSIONS_PATH)
    _addon_entry(data, "vpc-cni")["by_kubernetes_minor"] = dict(_addon_entry(data, "kube-proxy")["by_kubernetes_minor"])
    with pytest.raises(VersionsError, match="exactly one of"):
        load_versions(_write(tmp_path, data))
    del _addon_entry(data, "vpc-cni")["by_kubernetes_minor"], _addon_entry(data, "vpc-cni")["version"]
    with pytest.raises(VersionsError, match="exactly one of"):
        load_versions(_write(tmp_path, data))


def test_the_support_calendar_reads_the_one_clock() -> None:
    """Without a day, the calendar reads `clock.today()`: the real UTC date, or the pinned one (the tests pin it)."""
    with clock.calendar_pinned(dt.date(2026, 11, 27)):
        assert "1.31" not in supported_kubernetes_versions()
    with clock.calendar_pinned(dt.date(2026, 11, 26)):
        assert "1.31" in supported_kubernetes_versions()


def test_cilium_is_the_newest_1_17_patch_aws_validates_for_hybrid_nodes() -> None:
    """The 1.17 line (1.18 needs kernel 5.10, which Ubuntu 20.04 and RHEL 8 lack), at the patch AWS's own source
    names: its user guide's pull request announcing the ECR Public image 1.17.9-0 (CILIUMTAG)."""
    from components.catalog.versions import chart, load_versions, parse_version

    pin = chart("cilium")
    source = load_versions().sources["CILIUMTAG"]
    assert pin.version.startswith("1.17.")
    assert f"cilium:{pin.version}" in source
    assert parse_version(pin.version) >= parse_version("1.17.9-0")
    assert pin.app_version == pin.version.split("-")[0]


def test_cilium_images_on_the_servers_carry_the_pinned_chart_tag() -> None:
    # The Cilium chart is not rendered offline, so its images' tags are held to the chart pin here.
    images = hybrid_node_images("cilium")
    assert {i.image.rsplit("/", 1)[-1] for i in images} == {"cilium", "operator-generic"}
    assert {i.tag for i in images} == {f"v{chart('cilium').version}"}
