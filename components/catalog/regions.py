"""The AWS regions a stack may name, as sourced data (`regions.yaml`), by partition."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from components.yaml_loader import parse_yaml

REGIONS_PATH = Path(__file__).parent / "regions.yaml"


@cache
def partitions() -> dict[str, tuple[str, ...]]:
    """Partition (`aws`, `aws-cn`, ...) -> its regions."""
    data = parse_yaml(REGIONS_PATH.read_text())
    return {partition: tuple(names) for partition, names in data["regions"].items()}


def partition_of(region: str) -> str:
    """The partition of a region (`aws` for one the catalog does not list: validation refuses those)."""
    return next((partition for partition, names in partitions().items() if region in names), "aws")


def regions() -> tuple[str, ...]:
    """Every region, the commercial partition first."""
    return tuple(name for names in partitions().values() for name in names)


def source() -> str:
    return str(parse_yaml(REGIONS_PATH.read_text())["source"])
