"""The human renderings show what the plan summary says per pool: the terminal table and the Markdown table carry
every pool's maxPods and Lustre client, as the JSON does."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console

from blueprint.plan.render import markdown, table


def _markdown_rows(plan: dict[str, Any]) -> dict[str, dict[str, str]]:
    """{pool name: its cells} of the Markdown pool table, keyed by the header's column names."""
    lines = markdown(plan).splitlines()
    header = next(line for line in lines if line.startswith("| pool |"))
    columns = [cell.strip() for cell in header.strip("|").split("|")]
    names = {pool["name"] for pool in plan["summary"]["nodePools"]}
    rows: dict[str, dict[str, str]] = {}
    for line in lines:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if line.startswith("| ") and cells[0] in names:
            rows[cells[0]] = dict(zip(columns, cells, strict=True))
    return rows


def test_markdown_shows_each_pools_max_pods_and_lustre_client(each_shipped_plan: dict[str, Any]) -> None:
    rows = _markdown_rows(each_shipped_plan)
    for pool in each_shipped_plan["summary"]["nodePools"]:
        row = rows[pool["name"]]
        assert row["pods/node"] == ("-" if pool["maxPods"] is None else str(pool["maxPods"]))
        assert row["Lustre"] == (pool["lustreClient"] or "-")


def test_table_has_max_pods_and_lustre_columns(each_shipped_plan: dict[str, Any]) -> None:
    out = io.StringIO()
    table(each_shipped_plan, Console(file=out, width=400, color_system=None))
    text = out.getvalue()
    assert "pods/node" in text and "Lustre" in text
    for pool in each_shipped_plan["summary"]["nodePools"]:
        line = next(line for line in text.splitlines() if f" {pool['name']} " in line)
        assert f" {pool['maxPods'] or '-'} " in line and f" {pool['lustreClient'] or '-'} " in line
