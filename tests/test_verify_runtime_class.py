"""`blueprint verify`'s GPU pods on hybrid pools with `gpuRuntime: runtime-class` name the `nvidia` RuntimeClass:
there containerd runs the NVIDIA runtime only for pods that ask for it, so a pod without it sees no GPU."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from blueprint.verify import dcgm, topology
from blueprint.verify.context import Context, Options
from blueprint.verify.expectations import Expectations, expectations, load_spec
from blueprint.verify.pods import PodSession
from tests.verify_fakes import FakeApi, node


@pytest.fixture(scope="module")
def runtime_class(tmp_path_factory: pytest.TempPathFactory) -> Expectations:
    raw = yaml.safe_load(Path("stacks/Pulumi.hybrid.yaml").read_text())
    a40 = next(p for p in raw["config"]["gpu-clusters:nodePools"] if p["name"] == "a40")
    a40["gpuRuntime"] = "runtime-class"
    path = tmp_path_factory.mktemp("verify") / "Pulumi.runtime-class.yaml"
    path.write_text(yaml.safe_dump(raw))
    return expectations(load_spec(None, path))


def created(expect: Expectations, check: Any) -> dict[str, dict[str, Any]]:
    """The pods `check` creates on one a40 server and one g6e node: {pool: pod spec}."""
    nodes = [
        node("a40-0", "a40", gpus=4, hybrid=True),
        node("burst-0", "burst", instance_type="g6e.12xlarge", gpus=4),
    ]
    api = FakeApi(nodes)
    check.check(Context(api, expect, PodSession(api, "abc123", "default", sleep=lambda s: None), Options()))
    return {
        body["spec"]["nodeSelector"]["kubernetes.io/hostname"].split("-")[0]: body["spec"]
        for body in api.created.values()
    }


@pytest.mark.parametrize("check", [dcgm, topology], ids=["dcgm", "topology"])
def test_gpu_pods_name_the_pools_runtime_class(runtime_class: Expectations, check: Any) -> None:
    pods = created(runtime_class, check)
    assert pods["a40"]["runtimeClassName"] == "nvidia"
    assert "runtimeClassName" not in pods["burst"]


def test_only_runtime_class_pools_expect_it(runtime_class: Expectations) -> None:
    assert {p.name: p.runtime_class for p in runtime_class.pools if p.is_gpu} == {
        "h100": None,
        "a40": "nvidia",
        "burst": None,
    }
