"""Grafana dashboards as JSON files (package data, so a non-editable install ships them).

Each file is a complete Grafana dashboard model; its Prometheus panels use the `${datasource}` variable (a
Prometheus data source picker) and its CloudWatch panels the `cloudwatch` data source uid, never a data source
name. `components.planning.addons.grafana` turns them into ConfigMaps for Grafana's dashboard sidecar, and
`tests/test_dashboards.py` checks their structure and that every metric they query is one our exporters emit
(`components/catalog/metrics.yaml`).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

DASHBOARDS_DIR = Path(__file__).parent


def names() -> list[str]:
    """Every shipped dashboard, by file name without `.json`."""
    return sorted(p.stem for p in DASHBOARDS_DIR.glob("*.json"))


@cache
def _text(name: str) -> str:
    return (DASHBOARDS_DIR / f"{name}.json").read_text(encoding="utf-8")


def load(name: str) -> dict[str, Any]:
    """A fresh copy of a dashboard's JSON model."""
    board: dict[str, Any] = json.loads(_text(name))
    return board
