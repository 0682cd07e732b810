"""The human renderings show what the plan summary says per pool: the terminal table and the Markdown table carry
every pool's maxPods and Lustre client, as the JSON does."""

from __future__ import annotations

import io
from typing import Any

import pytest
from rich.console import Console

from blueprint.plan.render import markdown, table
from tests.builders import shipped_plan


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


def _renderings(plan: dict[str, Any]) -> tuple[str, str]:
    out = io.StringIO()
    table(plan, Console(file=out, width=400, color_system=None))
    return out.getvalue(), markdown(plan)


def test_spot_saving_is_shown_only_when_a_pool_runs_on_spot(each_shipped_plan: dict[str, Any]) -> None:
    saving = each_shipped_plan["summary"]["hourlyUsd"]["spotSaving"]
    for text in _renderings(each_shipped_plan):
        assert ("spot saves ~" in text) == (round(saving, 2) > 0)


@pytest.mark.program
def test_a_stack_without_spot_does_not_claim_a_zero_saving() -> None:
    """The training stack has no spot pool: no "spot saves ~$0.00/h"; the inference stack's spot pool saves money."""
    training, inference = shipped_plan("training"), shipped_plan("inference")
    assert training["summary"]["hourlyUsd"]["spotSaving"] == 0
    assert all("spot saves" not in text for text in _renderings(training))
    assert all("spot saves ~$" in text for text in _renderings(inference))
