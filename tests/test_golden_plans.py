"""Every shipped stack plans to the plan recorded in `tests/data/plans/` (`tests.golden_plans`)."""

from __future__ import annotations

import difflib
from typing import Any

from tests.golden_plans import REGENERATE, golden_path, plan_text


def test_a_fresh_plan_matches_the_recorded_one(each_shipped_plan: dict[str, Any]):
    stack = each_shipped_plan["stack"]
    path = golden_path(stack)
    assert path.exists(), f"no recorded plan for stack {stack!r}: run `{REGENERATE}`"
    recorded, fresh = path.read_text(), plan_text(each_shipped_plan)
    if fresh != recorded:
        diff = "".join(
            list(difflib.unified_diff(recorded.splitlines(True), fresh.splitlines(True), "recorded", "fresh"))[:60]
        )
        raise AssertionError(
            f"the plan of stack {stack!r} differs from {path.name}; if the change is deliberate, run "
            f"`{REGENERATE}` and review the diff.\n{diff}"
        )
