"""Serving capacity facts (``serving_capacity.yaml``): what one vLLM replica of a model serves on a GPU, and how
long a new node and a model load take. Why a catalog: the simulation's verdicts are only as good as these figures,
so each one cites where it came from, and a pair without a figure is said to have none."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from components.catalog.citations import CatalogError, check_tags, citation_texts, read_sources, read_yaml

__all__ = ["SERVING_CAPACITY_PATH", "Delay", "Throughput", "model_load_minutes", "node_start_minutes", "throughput"]

SERVING_CAPACITY_PATH = Path(__file__).parent / "serving_capacity.yaml"


@dataclass(frozen=True)
class Throughput:
    model: str
    gpu: str
    requests_per_second: float
    concurrency: int
    workload: str
    source: str


@dataclass(frozen=True)
class Delay:
    minutes: int
    source: str


@cache
def _data() -> dict[str, Any]:
    data = read_yaml(SERVING_CAPACITY_PATH)
    known = citation_texts(read_sources(data.get("sources"), SERVING_CAPACITY_PATH))
    seen: set[tuple[str, str]] = set()
    for entry in data.get("throughput") or []:
        key = (str(entry.get("model")), str(entry.get("gpu")))
        where = f"{SERVING_CAPACITY_PATH}: throughput {key[0]} on {key[1]}"
        if key in seen:
            raise CatalogError(f"{where}: listed twice")
        seen.add(key)
        if not float(entry.get("requests_per_second", 0)) > 0 or not int(entry.get("concurrency", 0)) > 0:
            raise CatalogError(f"{where}: requests_per_second and concurrency must be above 0")
        check_tags(where, str(entry.get("source", "")), known)
    for name in ("node_start_minutes", "model_load_minutes"):
        entry = data.get(name) or {}
        if not isinstance(entry.get("value"), int) or entry["value"] < 0:
            raise CatalogError(f"{SERVING_CAPACITY_PATH}: {name}: a whole number of minutes, 0 or more, is required")
        check_tags(f"{SERVING_CAPACITY_PATH}: {name}", str(entry.get("source", "")), known)
    return data


def throughput(model: str, gpu: str) -> Throughput | None:
    """The sourced figure for the model (the last part of its weights directory) on the GPU model, or None."""
    name = model.rsplit("/", 1)[-1]
    for entry in _data().get("throughput") or []:
        if entry["model"] == name and entry["gpu"] == gpu:
            return Throughput(
                name,
                gpu,
                float(entry["requests_per_second"]),
                int(entry["concurrency"]),
                str(entry["workload"]),
                str(entry["source"]),
            )
    return None


def node_start_minutes() -> Delay:
    entry = _data()["node_start_minutes"]
    return Delay(int(entry["value"]), str(entry["source"]))


def model_load_minutes() -> Delay:
    entry = _data()["model_load_minutes"]
    return Delay(int(entry["value"]), str(entry["source"]))
