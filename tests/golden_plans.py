"""The recorded plans of the shipped stacks (`tests/data/plans/<stack>.json`), which `test_golden_plans` compares
fresh plans to, so a refactor that should not change what a stack builds is proven not to.

When a change to a plan is deliberate, rewrite the records and review their diff:

    python -m tests.golden_plans
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from blueprint.plan.runner import list_stacks

PLANS_DIR = Path(__file__).parent / "data" / "plans"
REGENERATE = "python -m tests.golden_plans"


def plan_text(plan: dict[str, Any]) -> str:
    """The plan as `blueprint plan --format json` prints it."""
    return json.dumps(plan, indent=2, sort_keys=False, default=str) + "\n"


def golden_path(stack: str) -> Path:
    return PLANS_DIR / f"{stack}.json"


def main() -> None:
    from blueprint.plan.plan import make_plan

    PLANS_DIR.mkdir(parents=True, exist_ok=True)
    for stack in list_stacks():
        golden_path(stack).write_text(plan_text(make_plan(stack)))
        print(f"wrote {golden_path(stack)}")


if __name__ == "__main__":
    main()
