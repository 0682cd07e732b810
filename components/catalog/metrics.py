"""The metric names our exporters and AWS services publish, as sourced data (``metrics.yaml``).

Why a list at all: a dashboard that queries a name nobody emits shows "No data" forever, and nothing fails. The
dashboards may only query names listed here (or the DCGM exporter's own counter list, `DCGM_COUNTERS`), and
`tests/test_dashboards.py` checks every query against them. Each list cites the exporter version or AWS page it
was read from; the EFA port counters are also what the node-exporter textfile sidecar exports, so the sidecar and
the dashboards cannot disagree.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from components.catalog.citations import CatalogError, check_tags, citation_texts, read_sources, read_yaml
from components.catalog.versions import version_sources

__all__ = ["METRICS_PATH", "cloudwatch_metrics", "efa_metric_name", "efa_port_counters", "prometheus_metrics"]

METRICS_PATH = Path(__file__).parent / "metrics.yaml"


@cache
def _metrics() -> dict[str, Any]:
    data = read_yaml(METRICS_PATH)
    known = {**version_sources(), **citation_texts(read_sources(data.get("sources"), METRICS_PATH))}
    sections = [
        *((f"prometheus.{name}", entry) for name, entry in (data.get("prometheus") or {}).items()),
        ("efa_port_counters", data.get("efa_port_counters") or {}),
        *((f"cloudwatch.{name}", entry) for name, entry in (data.get("cloudwatch") or {}).items()),
    ]
    for where, entry in sections:
        names = entry.get("metrics", entry.get("counters"))
        if not isinstance(names, list) or not names or len(set(names)) != len(names):
            raise CatalogError(f"{METRICS_PATH}: {where}: a non-empty list of distinct names is required")
        check_tags(f"{METRICS_PATH}: {where}", str(entry.get("source", "")), known)
    return data


def prometheus_metrics() -> Mapping[str, frozenset[str]]:
    """Exporter name -> the Prometheus metric names it emits that the dashboards may use."""
    return {name: frozenset(entry["metrics"]) for name, entry in _metrics()["prometheus"].items()}


def efa_port_counters() -> tuple[str, ...]:
    """The EFA driver's per-port hw_counters the textfile sidecar exports ([EFADRV])."""
    return tuple(_metrics()["efa_port_counters"]["counters"])


def efa_metric_name(counter: str) -> str:
    """The Prometheus name of an EFA port counter: `rx_bytes` -> `node_efa_rx_bytes_total` (a counter)."""
    return f"node_efa_{counter}_total"


def cloudwatch_metrics() -> Mapping[str, frozenset[str]]:
    """CloudWatch namespace -> the metric names published there that the dashboards may use."""
    return {ns: frozenset(entry["metrics"]) for ns, entry in _metrics()["cloudwatch"].items()}
