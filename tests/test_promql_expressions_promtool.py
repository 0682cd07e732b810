"""`promtool check rules` over every PromQL expression the stacks and variants ship (tests/promql_expressions.py):
the rule groups as they are, and the autoscaler queries and dashboard expressions wrapped as recording rules, so
Prometheus's own parser reads each one."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.promql_expressions import ALERT, RECORD, found_in, stack_names
from tests.promtool import check_rules, needs_promtool

pytestmark = [pytest.mark.program, needs_promtool]


def test_every_shipped_expression_parses(tmp_path: Path) -> None:
    files = {}
    for index, stack in enumerate(stack_names()):
        found = found_in(stack)
        if found.rule_groups:
            files[f"{stack}-rules.yaml"] = [g.group for g in found.rule_groups]
        wrapped = [
            {"record": f"blueprint:expression_{number}", "expr": e.promql, "labels": {"source": e.source}}
            for number, e in enumerate(found.expressions)
            if e.kind not in (ALERT, RECORD)
        ]
        if wrapped:
            files[f"{stack}-expressions.yaml"] = [{"name": f"expressions-{index}", "rules": wrapped}]
    assert len(files) >= 2  # the rules and the other expressions of at least one stack
    check_rules(tmp_path, files)
