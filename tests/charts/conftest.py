"""The chart tests' cases: every shipped stack, and variants of them that turn on each optional path, each planned
once per session with its pools (the nodes the charts' pods must fit).

Without the chart sources (a clone without the shared reference folder beside it) every test here is skipped with
the reason; with `BLUEPRINT_REQUIRE_UPSTREAM=1` (CI's `charts` step) it fails instead.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from blueprint.plan.runner import list_stacks, load_stack, run_program, stack_file
from components.gpu_cluster import GpuCluster
from components.planning.pools import PoolPlan
from components.program import main
from tests.charts.rendering import REQUIRE_ENV, UPSTREAM_ENV, Release, charts_root, releases_of

PROJECT = "gpu-clusters"


def _pool(raw: dict[str, Any], name: str) -> dict[str, Any]:
    pool: dict[str, Any] = next(p for p in raw[f"{PROJECT}:nodePools"] if p["name"] == name)
    return pool


def _runtime_class(raw: dict[str, Any]) -> None:
    _pool(raw, "a40")["gpuRuntime"] = "runtime-class"


def _mig(raw: dict[str, Any]) -> None:
    """The p5 pool partitioned; the reference training job, which takes whole GPUs, leaves the stack."""
    _pool(raw, "h100")["devicePlugin"] = {"migDevices": {"1g.10gb": 7}}
    raw.get(f"{PROJECT}:workloads", {}).pop("training", None)
    raw.setdefault(f"{PROJECT}:addons", {}).setdefault("nvidiaDevicePlugin", {})["migStrategy"] = "single"


def _prometheus(raw: dict[str, Any]) -> None:
    """The Prometheus path instead of Container Insights (validation allows one DCGM exporter per GPU node)."""
    raw.setdefault(f"{PROJECT}:addons", {})["monitoring"] = {"containerInsights": False, "dcgmPrometheus": True}


def _mig_prometheus(raw: dict[str, Any]) -> None:
    """MIG on the Prometheus path: the DCGM exporter release that must wait for the partitions."""
    _mig(raw)
    _prometheus(raw)


def _container_insights(raw: dict[str, Any]) -> None:
    """Container Insights instead of the Prometheus path the training stack ships on (the add-on's own exporter)."""
    raw.setdefault(f"{PROJECT}:addons", {})["monitoring"] = {"containerInsights": True, "dcgmPrometheus": False}


def _mig_container_insights(raw: dict[str, Any]) -> None:
    """MIG on Container Insights: the add-on's exporter on partitioned GPUs."""
    _mig(raw)
    _container_insights(raw)


def _time_sliced(raw: dict[str, Any]) -> None:
    """The inference stack's L40S pool time-sliced in two (through the device plugin, which time-slices), its
    replicas each taking half of the budget."""
    _pool(raw, "l40s")["devicePlugin"] = {"timeSlicingReplicas": 2}
    for workload in raw[f"{PROJECT}:workloads"]["serving"]:
        workload["gpuMemoryUtilization"] = 0.45


def _dra(raw: dict[str, Any]) -> None:
    """The inference stack's L40S pool allocating its GPUs through NVIDIA's DRA driver (it ships on the device
    plugin, whose GPUs Kueue's quotas count)."""
    _pool(raw, "l40s")["gpuAllocation"] = "dra"


def _mixed_allocation(raw: dict[str, Any]) -> None:
    """The inference stack with its L40S pool on DRA and a second GPU pool on the device plugin beside it."""
    _dra(raw)
    raw[f"{PROJECT}:nodePools"].append(
        {"name": "l4", "role": "inference", "instanceType": "g6.xlarge", "scaling": {"min": 0, "max": 2}}
    )


def _bottlerocket(raw: dict[str, Any]) -> None:
    raw[f"{PROJECT}:cluster"]["bottlerocketRelease"] = "1.42.0"
    for pool in raw[f"{PROJECT}:nodePools"]:
        if pool.get("kind", "aws") == "aws":
            pool["amiFamily"] = "bottlerocket"


def _gpu_utilization_rule(raw: dict[str, Any]) -> None:
    """The inference stack's serving replicas on the GPU-utilization rule (the pool's `mode: gpu-utilization`)
    instead of the default queue rule."""
    _pool(raw, "l40s")["scaling"]["mode"] = "gpu-utilization"


#: Variants: (base stack, change to its config) for each optional path the shipped stacks leave off. Container
#: Insights on a training (EFA) stack is one: the smoke stack runs it without EFA.
VARIANTS: dict[str, tuple[str, Callable[[dict[str, Any]], None]]] = {
    "hybrid-runtime-class": ("hybrid", _runtime_class),
    "inference-gpu-utilization": ("inference", _gpu_utilization_rule),
    "training-mig": ("training", _mig_container_insights),
    "training-mig-prometheus": ("training", _mig_prometheus),
    "training-container-insights": ("training", _container_insights),
    "training-bottlerocket": ("training", _bottlerocket),
    "inference-time-sliced": ("inference", _time_sliced),
    "inference-dra": ("inference", _dra),
    "inference-mixed-allocation": ("inference", _mixed_allocation),
}
CASES = [*list_stacks(), *VARIANTS]


@dataclass(frozen=True)
class Case:
    """A planned stack: its plan resources (as `blueprint plan` lists them) and its pools."""

    name: str
    resources: list[dict[str, Any]]
    pools: list[PoolPlan]
    region: str

    @property
    def releases(self) -> list[Release]:
        return releases_of(self.resources, self.region)


def require_charts() -> None:
    """Skip (or, under `BLUEPRINT_REQUIRE_UPSTREAM=1`, fail) when the chart sources are not here."""
    root = charts_root()
    if root.is_dir():
        return
    reason = (
        f"chart sources not found at {root} (the shared reference folder beside the project, or ${UPSTREAM_ENV}); "
        "CI's `charts` step renders every release through them"
    )
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(reason)
    pytest.skip(reason)


@cache
def planned_case(name: str, tmp_root: Path) -> Case:
    if name in VARIANTS:
        base, change = VARIANTS[name]
        document = yaml.safe_load(stack_file(base).read_text())
        config = copy.deepcopy(document["config"])
        change(config)
        path = tmp_root / f"Pulumi.{name}.yaml"
        path.write_text(yaml.safe_dump({"config": config}))
        files = load_stack(config_file=path)
    else:
        files = load_stack(name)
    built: list[GpuCluster] = []

    def program() -> None:
        built.append(main())

    run = run_program(program, files)
    return Case(name, [r.to_json() for r in run.registrations], list(built[0].pool_plans), built[0].spec.region)


@pytest.fixture(scope="session")
def _variant_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("variants")


@pytest.fixture(scope="session", params=CASES)
def case(request: pytest.FixtureRequest, _variant_dir: Path) -> Case:
    """Every shipped stack and every variant, planned once per session."""
    require_charts()
    return planned_case(request.param, _variant_dir)
