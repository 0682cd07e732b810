"""The result table (stdout), and the JSON document of `--format json` (its shape is stable: add, never rename)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from blueprint.verify.model import Result

STYLE = {"pass": "green", "fail": "bold red", "error": "bold red", "skip": "yellow"}


def summary(results: list[Result]) -> dict[str, int]:
    return {s: sum(r.status == s for r in results) for s in ("pass", "fail", "error", "skip")}


def passed(results: list[Result]) -> bool:
    return not any(r.status in ("fail", "error") for r in results)


def document(stack: str, cluster: str, run_id: str, checks: list[str], results: list[Result]) -> dict[str, Any]:
    return {
        "stack": stack,
        "cluster": cluster,
        "runId": run_id,
        "checks": checks,
        "passed": passed(results),
        "summary": summary(results),
        "results": [r.to_json() for r in results],
    }


def table(results: list[Result], console: Console) -> None:
    grid = Table(title="blueprint verify", show_lines=False)
    for column in ("check", "target", "result", "detail"):
        grid.add_column(column, overflow="fold")
    for r in results:
        grid.add_row(r.check, r.target, f"[{STYLE[r.status]}]{r.status.upper()}[/]", r.detail)
    console.print(grid)
    counts = summary(results)
    console.print(", ".join(f"{n} {s}" for s, n in counts.items() if n) or "no results")
