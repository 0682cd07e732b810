"""`blueprint verify` check `drivers`: each GPU node's NVIDIA driver and CUDA version, from GPU feature discovery
labels or the DRA driver's ResourceSlices, against what the catalog pins for its AMI release or the on-prem runbook."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from blueprint.verify import command, drivers
from blueprint.verify.context import Context, Options
from blueprint.verify.expectations import Expectations, expectations, load_spec
from blueprint.verify.kube import KubernetesApi
from blueprint.verify.model import Result
from blueprint.verify.pods import PodSession
from components.catalog.citations import CatalogError
from components.catalog.node_software import (
    ami_release_software,
    load_node_software,
    on_prem_software,
    version_matches,
)
from tests.builders import P5, SYSTEM, pool, stack_config
from tests.verify_fakes import FakeApi, node

RELEASE = "v20260714"  # the release the shipped stacks pin (stacks/*.yaml `cluster.amiRelease`)


@cache
def expect(stack: str) -> Expectations:
    return expectations(load_spec(stack, None))


def run(api: FakeApi, expect_: Expectations) -> list[Result]:
    ctx = Context(api, expect_, PodSession(api, "abc123", "default", sleep=lambda s: None), Options())
    return drivers.check(ctx)


def gfd(driver: str, cuda: str = "13.0") -> dict[str, str]:
    return {"nvidia.com/cuda.driver-version.full": driver, "nvidia.com/cuda.runtime-version.full": cuda}


def dra_slice(node_name: str, *versions: tuple[str, str], driver: str = "gpu.nvidia.com") -> dict[str, Any]:
    """A ResourceSlice as the API returns it: one device per (driverVersion, cudaDriverVersion) pair."""
    devices = [
        {
            "name": f"gpu-{i}",
            "attributes": {
                "driverVersion": {"version": d},
                "cudaDriverVersion": {"version": c},
                "productName": {"string": "NVIDIA H100 80GB HBM3"},
            },
        }
        for i, (d, c) in enumerate(versions)
    ]
    return {
        "metadata": {"name": f"{node_name}-{driver}"},
        "spec": {"driver": driver, "nodeName": node_name, "devices": devices},
    }


def training_nodes(**gpu_node: Any) -> list[dict[str, Any]]:
    return [
        node("ip-10-0-0-1", "system", "m7i.xlarge"),
        node("ip-10-0-1-0", "h100", "p5.48xlarge", gpus=8, efa=32, **gpu_node),
    ]


def by_target(results: list[Result]) -> dict[str, Result]:
    return {r.target: r for r in results}


# ----------------------------------------------------------------------------------------------- the catalog
def test_the_pinned_release_and_the_runbook_carry_their_versions_and_sources() -> None:
    image = ami_release_software(RELEASE)
    assert image is not None
    assert (image.nvidia_driver, image.cuda, image.container_toolkit) == ("580.159.03", "13.0", "1.19.1")
    assert image.source == "AMINVIDIA+CUDA580"
    runbook = on_prem_software()
    assert (runbook.nvidia_driver, runbook.cuda, runbook.container_toolkit) == ("580", "13.0", "1.19.1")
    assert "RUNBOOK" in runbook.source.split("+")
    assert ami_release_software("v20200101") is None


def test_versions_match_by_their_numbers_and_a_branch_matches_its_releases() -> None:
    assert version_matches("580.159.3", "580.159.03")  # the DRA driver's semver form of the same release
    assert version_matches("13.0.0", "13.0") and version_matches("580.95.05", "580")
    assert not version_matches("580.159.04", "580.159.03")
    assert not version_matches("570.195.03", "580") and not version_matches("5800.1", "580")
    assert not version_matches("13.1", "13.0") and not version_matches("not-a-version", "580")


def test_a_node_software_entry_without_a_known_source_or_with_a_range_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "versions.yaml"
    body = (
        "sources:\n  AMI: {title: changelog}\nnode_software:\n  al2023_nvidia:\n"
        "    - {release: v20260714, nvidia_driver: '580.159.03', cuda: '13.0', container_toolkit: '1.19.1', "
        "source: %s}\n  on_prem: {nvidia_driver: '%s', cuda: '13.0', container_toolkit: '1.19.1', source: AMI}\n"
    )
    path.write_text(body % ("NOPE", "580"))
    with pytest.raises(CatalogError, match="NOPE"):
        load_node_software(path)
    path.write_text(body % ("AMI", "580.x"))
    with pytest.raises(CatalogError, match=re.escape("on_prem: nvidia_driver '580.x' is not a dotted version")):
        load_node_software(path)
    path.write_text(body % ("AMI", "580"))
    assert load_node_software(path).releases[RELEASE].nvidia_driver == "580.159.03"


def test_expectations_take_the_pin_from_the_pool_image_or_the_runbook() -> None:
    h100 = expect("hybrid").pool("h100")
    a40 = expect("hybrid").pool("a40")
    system = expect("hybrid").pool("system")
    assert h100 is not None and a40 is not None and system is not None
    assert h100.node_software == ami_release_software(RELEASE)
    assert a40.node_software == on_prem_software()
    assert system.node_software is None and system.node_software_gap is None  # CPU pools are not checked


# ----------------------------------------------------------------------------------------------- GFD labels
def test_a_node_with_the_pinned_driver_and_cuda_passes_and_the_toolkit_is_reported_unknown() -> None:
    (result,) = run(FakeApi(training_nodes(gfd=gfd("580.159.03"))), expect("training"))
    assert (result.target, result.status) == ("h100/ip-10-0-1-0", "pass")
    assert "driver 580.159.03, CUDA 13.0 as AMI release v20260714 pins" in result.detail
    assert result.measured["source"] == drivers.GFD_SOURCE
    assert result.measured["containerToolkit"] is None
    assert "containerRuntimeVersion is containerd's" in result.measured["containerToolkitUnknown"]
    assert result.expected == {
        "driver": "580.159.03",
        "cuda": "13.0",
        "containerToolkit": "1.19.1",
        "pinnedBy": "AMI release v20260714",
    }


def test_a_driver_mismatch_fails_naming_the_node_the_pin_and_what_was_found() -> None:
    (result,) = run(FakeApi(training_nodes(gfd=gfd("580.126.09"))), expect("training"))
    assert result.status == "fail" and result.target == "h100/ip-10-0-1-0"
    assert "driver 580.126.09, AMI release v20260714 pins 580.159.03" in result.detail
    assert result.measured["driver"] == "580.126.09" and result.expected["driver"] == "580.159.03"


def test_a_cuda_mismatch_fails_too() -> None:
    (result,) = run(FakeApi(training_nodes(gfd=gfd("580.159.03", "12.9"))), expect("training"))
    assert result.status == "fail" and "CUDA 12.9, AMI release v20260714 pins 13.0" in result.detail


def test_a_node_without_labels_or_slices_is_reported_missing() -> None:
    (result,) = run(FakeApi(training_nodes(gfd={})), expect("training"))
    assert result.status == "fail"
    assert "no nvidia.com/cuda.driver-version.full label" in result.detail
    assert "no gpu.nvidia.com ResourceSlice" in result.detail
    assert result.measured["source"] is None


def test_a_node_with_the_driver_label_but_not_the_cuda_label_names_the_missing_one() -> None:
    labels = {"nvidia.com/cuda.driver-version.full": "580.159.03"}
    (result,) = run(FakeApi(training_nodes(gfd=labels)), expect("training"))
    assert result.status == "fail" and "no CUDA version in the GPU feature discovery labels" in result.detail


# ----------------------------------------------------------------------------------------------- DRA attributes
def test_dra_attributes_stand_in_for_the_labels_in_their_semver_form() -> None:
    slices = [
        dra_slice("ip-10-0-1-0", *[("580.159.3", "13.0.0")] * 8),
        dra_slice("ip-10-0-1-0", ("1.0.0", "1.0.0"), driver="efa.amazonaws.com"),
    ]
    (result,) = run(FakeApi(training_nodes(gfd={}), slices=slices), expect("training"))
    assert result.status == "pass", result.detail
    assert result.measured == {**result.measured, "driver": "580.159.3", "cuda": "13.0.0", "source": drivers.DRA_SOURCE}


def test_dra_devices_of_another_node_do_not_count_and_a_mismatch_or_disagreement_fails() -> None:
    other = [dra_slice("ip-10-0-1-9", ("580.159.3", "13.0.0"))]
    (missing,) = run(FakeApi(training_nodes(gfd={}), slices=other), expect("training"))
    assert missing.status == "fail" and "no gpu.nvidia.com ResourceSlice" in missing.detail
    old = [dra_slice("ip-10-0-1-0", ("570.195.3", "12.8.0"))]
    (mismatch,) = run(FakeApi(training_nodes(gfd={}), slices=old), expect("training"))
    assert mismatch.status == "fail"
    assert "driver 570.195.3, AMI release v20260714 pins 580.159.03" in mismatch.detail
    assert "CUDA 12.8.0, AMI release v20260714 pins 13.0" in mismatch.detail
    mixed = [dra_slice("ip-10-0-1-0", ("580.159.3", "13.0.0"), ("580.126.9", "13.0.0"))]
    (disagree,) = run(FakeApi(training_nodes(gfd={}), slices=mixed), expect("training"))
    assert disagree.status == "fail" and "devices disagree on the driver: 580.126.9, 580.159.3" in disagree.detail


# ----------------------------------------------------------------------------------------------- hybrid stack
def test_hybrid_servers_are_held_to_the_runbook_branch_and_cloud_nodes_to_the_ami_release() -> None:
    nodes = [
        node("ip-10-0-1-0", "h100", "p5.48xlarge", gpus=8, efa=32, gfd=gfd("580.95.05")),
        node("a40-0", "a40", gpus=4, hybrid=True, gfd=gfd("580.95.05")),
        node("a40-1", "a40", gpus=4, hybrid=True, gfd=gfd("570.195.03", "12.8")),
    ]
    results = by_target(run(FakeApi(nodes), expect("hybrid")))
    assert results["a40/a40-0"].status == "pass"
    assert "as the on-prem runbook pins" in results["a40/a40-0"].detail
    assert results["a40/a40-1"].status == "fail"
    assert "driver 570.195.03, the on-prem runbook pins 580" in results["a40/a40-1"].detail
    assert results["a40/a40-1"].expected["pinnedBy"] == "the on-prem runbook"
    # the same 580.95.05 is not the AMI's release: a cloud node running it did not boot the pinned image
    assert results["h100/ip-10-0-1-0"].status == "fail"


# ----------------------------------------------------------------------------------------------- no pin
def test_a_release_the_catalog_does_not_list_and_a_bottlerocket_pool_are_skipped_with_the_reason() -> None:
    unknown = expectations(stack_config(SYSTEM, P5, cluster={"amiRelease": "v20200101"}))
    (skip,) = run(FakeApi(training_nodes()), unknown)
    assert skip.status == "skip" and skip.target == "h100"
    assert "no driver versions for AMI release v20200101 (it knows v20260714)" in skip.detail
    bottlerocket = expectations(
        stack_config(SYSTEM, pool(P5, amiFamily="bottlerocket"), cluster={"bottlerocketRelease": "1.42.0"})
    )
    (skip,) = run(FakeApi(training_nodes()), bottlerocket)
    assert skip.status == "skip" and skip.detail.startswith("bottlerocket pool")


def test_a_pool_at_zero_reads_no_slices_and_reports_nothing() -> None:
    api = FakeApi([node("ip-10-0-0-1", "system", "m7i.xlarge")])
    api.list_resource_slices = None  # type: ignore[assignment,method-assign]  # would raise if called
    assert run(api, expect("training")) == []


# ----------------------------------------------------------------------------------------------- the command
@pytest.fixture
def kubeconfig(tmp_path: Path) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text("apiVersion: v1\nkind: Config\n")
    return path


def test_the_command_exits_1_on_a_mismatch_and_the_json_carries_the_per_node_versions(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], kubeconfig: Path
) -> None:
    from blueprint import cli

    api = FakeApi(training_nodes(gfd=gfd("580.126.09")))
    monkeypatch.setattr(command, "connect", lambda path: api)
    args = ["verify", "--stack", "training", "--kubeconfig", str(kubeconfig), "--only", "drivers"]
    assert cli.main([*args, "--format", "json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    (result,) = doc["results"]
    assert (result["check"], result["target"], result["status"]) == ("drivers", "h100/ip-10-0-1-0", "fail")
    assert (result["measured"]["driver"], result["expected"]["driver"]) == ("580.126.09", "580.159.03")
    api.nodes = training_nodes(gfd=gfd("580.159.03"))
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    assert "drivers" in out and "PASS" in out and "ip-10-0-1-0" in out


def test_the_adapter_lists_resource_slices_and_reads_a_missing_api_as_none() -> None:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    device = client.V1Device(name="gpu-0", attributes={"driverVersion": client.V1DeviceAttribute(version="580.159.3")})
    spec = client.V1ResourceSliceSpec(
        driver="gpu.nvidia.com",
        node_name="n1",
        pool=client.V1ResourcePool(name="n1", generation=1, resource_slice_count=1),
        devices=[device],
    )

    class Resource:
        def list_resource_slice(self) -> client.V1ResourceSliceList:
            return client.V1ResourceSliceList(
                items=[client.V1ResourceSlice(metadata=client.V1ObjectMeta(name="s"), spec=spec)]
            )

    class NotServed:
        def list_resource_slice(self) -> None:
            raise ApiException(status=404, reason="Not Found")

    (listed,) = KubernetesApi(object(), client.ApiClient(), Resource()).list_resource_slices()
    assert listed["spec"]["nodeName"] == "n1"
    assert listed["spec"]["devices"][0]["attributes"]["driverVersion"] == {"version": "580.159.3"}
    assert KubernetesApi(object(), client.ApiClient(), NotServed()).list_resource_slices() == []


def test_the_operations_guide_states_the_catalog_pins() -> None:
    """docs/operations.md's table of pins says what the catalog says (one source, the catalog)."""
    text = (Path(__file__).parents[1] / "docs" / "operations.md").read_text()
    image, runbook = ami_release_software(RELEASE), on_prem_software()
    assert image is not None
    assert f"| AMI release `{RELEASE}` | {image.nvidia_driver} | {image.cuda} | {image.container_toolkit} |" in text
    assert (
        f"| [the runbook](#on-prem-servers-the-runbook) | {runbook.nvidia_driver} (any {runbook.nvidia_driver}.x) "
        f"| {runbook.cuda} | {runbook.container_toolkit} |" in text
    )
