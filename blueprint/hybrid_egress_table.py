"""The runbook's table of what the on-prem servers reach, generated from the shipped hybrid stack's plan (its
`summary.hybrid.egress`, derived from the images the plan runs on the servers), so the docs cannot drift from it.
`blueprint schema --write` writes it into docs/operations.md between the `hybrid-egress` markers."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

OPERATIONS_DOC_PATH = Path(__file__).resolve().parents[1] / "docs" / "operations.md"
EGRESS_MARKER = "hybrid-egress"
#: The shipped stack whose plan the table shows.
EGRESS_STACK = "hybrid"


def egress_markdown(plan: Mapping[str, Any]) -> str:
    """A markdown table of the plan's `summary.hybrid.egress`: host, when, why (all HTTPS on TCP 443)."""
    lines = ["| host (TCP 443) | when | why |", "| --- | --- | --- |"]
    for rule in plan["summary"]["hybrid"]["egress"]:
        lines.append(f"| `{rule['host']}` | {rule['phase']} | {rule['why']} |")
    return "\n".join(lines)
