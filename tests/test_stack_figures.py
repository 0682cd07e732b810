"""The README's stacks table and docs/stacks.md's figures are the plans' (`blueprint.stack_figures`), and
`blueprint schema --check` fails, saying what to run, when they drift."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from blueprint import reference, stack_figures
from blueprint.plan.runner import list_stacks
from tests.builders import CliResult, shipped_plan

README = stack_figures.README_PATH
STACKS_DOC = stack_figures.STACKS_DOC_PATH


def _readme_rows() -> dict[str, list[str]]:
    """The README table's cells by stack, as the README reads now."""
    start, end = "<!-- stacks-table:start -->", "<!-- stacks-table:end -->"
    table = README.read_text().split(start, 1)[1].split(end, 1)[0]
    rows = [[cell.strip() for cell in line.strip("|").split(" | ")] for line in table.strip().splitlines()[2:]]
    return {row[0]: row for row in rows}


def _dollars(text: str) -> float:
    match = re.match(r"\$([\d,]+\.\d\d)", text)
    assert match, text
    return float(match.group(1).replace(",", ""))


@pytest.mark.program
@pytest.mark.parametrize("stack", list_stacks())
def test_the_readme_table_shows_each_stacks_plan(stack: str) -> None:
    plan = shipped_plan(stack)
    summary = plan["summary"]
    row = _readme_rows()[stack]
    assert int(row[4]) == len(plan["resources"])
    assert _dollars(row[5]) == pytest.approx(summary["hourlyUsd"]["idle"], abs=0.005)
    assert _dollars(row[6]) == pytest.approx(summary["hourlyUsd"]["max"], abs=0.005)
    assert row[2].startswith(f"{summary['gpus']['min']}..{summary['gpus']['max']}:")


@pytest.mark.program
@pytest.mark.parametrize("stack", stack_figures.documented_stacks(STACKS_DOC.read_text()))
def test_stacks_md_shows_each_stacks_plan(stack: str) -> None:
    plan = shipped_plan(stack)
    text = STACKS_DOC.read_text()
    figures = text.split(f"<!-- stack-figures-{stack}:start -->", 1)[1].split("<!--", 1)[0]
    assert f"{len(plan['resources'])} resources" in figures
    assert f"${plan['summary']['hourlyUsd']['max']:,.2f}/h at max" in figures


def test_every_stack_section_of_stacks_md_has_its_figures() -> None:
    text = STACKS_DOC.read_text()
    described = re.findall(r"^## .*\(`stacks/Pulumi\.([\w-]+)\.yaml`\)$", text, re.M)
    assert described
    assert stack_figures.documented_stacks(text) == described


@pytest.mark.program
def test_a_figure_the_summary_changes_reaches_the_table() -> None:
    plan = copy.deepcopy(shipped_plan("training"))
    plan["summary"]["hourlyUsd"]["idle"] = 1234.5
    plan["resources"].append(plan["resources"][0])
    row = stack_figures.table_row("training", plan).split(" | ")
    assert row[4] == str(len(shipped_plan("training")["resources"]) + 1)
    assert row[5] == "$1,234.50"


@pytest.mark.program
def test_a_new_stack_gets_a_row_after_the_described_ones() -> None:
    parts = stack_figures.generated_parts(
        [*list_stacks(), "extra"], lambda s: shipped_plan(s.replace("extra", "hybrid"))
    )
    (table,) = [text for path, marker, text in parts if marker == stack_figures.TABLE_MARKER]
    stacks = [line.split(" | ")[0].strip("| ") for line in table.splitlines()[2:]]
    assert stacks == [*stack_figures.documented_stacks(STACKS_DOC.read_text()), "extra"]


def test_figures_for_a_stack_that_is_not_shipped_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = tmp_path / "stacks.md"
    doc.write_text(STACKS_DOC.read_text() + "\n<!-- stack-figures-gone:start -->\n<!-- stack-figures-gone:end -->\n")
    monkeypatch.setattr(stack_figures, "STACKS_DOC_PATH", doc)
    with pytest.raises(ValueError, match="gone"):
        stack_figures.generated_parts(list_stacks(), shipped_plan)


@pytest.fixture
def drifted_readme(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the README whose training row shows another idle cost, in place of the README."""
    row = _readme_rows()["training"]
    text = README.read_text()
    drifted = text.replace(f"| {row[4]} | {row[5]} |", f"| {row[4]} | $999.99 |", 1)
    assert drifted != text
    path = tmp_path / "README.md"
    path.write_text(drifted)
    monkeypatch.setattr(stack_figures, "README_PATH", path)
    monkeypatch.setattr(reference, "_plan_shipped", shipped_plan)
    return path


@pytest.mark.program
def test_schema_check_fails_on_a_drifted_readme_saying_what_to_run(
    drifted_readme: Path, blueprint_cli: Callable[..., CliResult]
) -> None:
    result = blueprint_cli("schema", "--check")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [f"blueprint: {drifted_readme} is out of date; run `blueprint schema --write`"]


@pytest.mark.program
def test_the_generated_table_restores_a_drifted_readme(drifted_readme: Path) -> None:
    text = drifted_readme.read_text()
    for path, marker, generated in stack_figures.generated_parts(list_stacks(), shipped_plan):
        if path == drifted_readme:
            text = reference.with_generated(text, marker, generated)
    assert text == README.read_text()
