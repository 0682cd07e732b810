"""Every PromQL expression the stacks ship is covered by the promtool tests (`.ci/run promql`): each is parsed by
promtool (tests/test_promql_expressions_promtool.py), each alert has scenarios (tests/test_alert_rules_promtool.py)
and each autoscaler query's shape has scenarios (tests/test_serving_rule_promtool.py for the GPU-utilization rule,
tests/test_queue_rule_promtool.py for the queue rule). The expressions are found in
the plans (tests/promql_expressions.py), so a new one, such as a KEDA trigger on vLLM's queue, fails here until it
is given its scenarios."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path

import pytest

from tests.promql_expressions import (
    ALERT,
    PANEL,
    RECORD,
    SCALER,
    UNKNOWN,
    VARIABLE,
    Expression,
    collect,
    every_expression,
    shape,
)
from tests.test_alert_rules_promtool import SCENARIOS
from tests.test_node_health_rules_promtool import NODE_HEALTH_SCENARIOS
from tests.test_queue_rule_promtool import covered_queue_shapes
from tests.test_serving_rule_promtool import covered_scaler_shapes

ROOT = Path(__file__).resolve().parent.parent
#: Recording rules with promtool scenarios (none ship yet).
RECORD_SCENARIOS: frozenset[str] = frozenset()


def uncovered(expressions: Iterable[Expression]) -> list[str]:
    """What the promtool tests do not cover: alerts and recording rules without scenarios, autoscaler queries of a
    shape no scenario evaluates, and PromQL found where the collector does not read it."""
    alerts = {s.alert for s in [*SCENARIOS, *NODE_HEALTH_SCENARIOS]}
    scalers = covered_scaler_shapes() | covered_queue_shapes()
    missing = []
    for e in expressions:
        if (
            (e.kind == ALERT and e.name not in alerts)
            or (e.kind == RECORD and e.name not in RECORD_SCENARIOS)
            or (e.kind == SCALER and shape(e.expr) not in scalers)
            or e.kind == UNKNOWN
        ):
            missing.append(f"{e.source}: {e.expr}")
    return missing


@pytest.mark.program
def test_every_shipped_expression_is_covered() -> None:
    expressions = list(every_expression())
    assert {ALERT, SCALER, PANEL, VARIABLE} <= {e.kind for e in expressions}
    assert uncovered(expressions) == []
    scenarios = {s.alert for s in [*SCENARIOS, *NODE_HEALTH_SCENARIOS]}
    assert scenarios <= {e.name for e in expressions if e.kind == ALERT}  # no stale scenarios


def _keda_trigger(query: str) -> dict[str, object]:
    return {
        "type": "kubernetes:keda.sh/v1alpha1:ScaledObject",
        "name": "chat-scaler",
        "inputs": {"spec": {"triggers": [{"type": "prometheus", "metadata": {"query": query, "threshold": "5"}}]}},
    }


@pytest.mark.program
def test_a_new_autoscaler_query_is_found_and_uncovered() -> None:
    """A KEDA trigger on vLLM's queue is found, and is uncovered until a scenario evaluates its shape; the shipped
    query built for another workload and thresholds is the same shape."""
    queue = 'sum(vllm:num_requests_waiting{namespace="inference",pod=~"chat-.*"})'
    (found,) = collect("x", [_keda_trigger(queue)]).expressions
    assert (found.kind, found.expr) == (SCALER, queue)
    assert uncovered([found]) == [f"{found.source}: {queue}"]
    (shipped,) = covered_scaler_shapes()
    other = shipped.replace('""', '"other"')  # the shape holds no label values or numbers
    assert shape(other) == shipped


@pytest.mark.program
def test_promql_in_a_place_the_collector_does_not_read_is_reported() -> None:
    resource = {"type": "kubernetes:core/v1:ConfigMap", "name": "x", "inputs": {"data": {"q": "rate(foo_total[5m])"}}}
    (found,) = collect("x", [resource]).expressions
    assert found.kind == UNKNOWN and uncovered([found])
    script = {"type": "t", "name": "x", "inputs": {"command": ["sh", "-c", "for c in tx_bytes; do echo $c; done"]}}
    assert collect("x", [script]).expressions == []


def test_dashboard_variables_become_valid_promql() -> None:
    target = {"refId": "A", "expr": 'rate(x{node=~"$node"}[$__rate_interval])'}
    board = json.dumps({"panels": [{"title": "t", "targets": [target]}]})
    (panel,) = collect("x", [{"type": "t", "name": "d", "inputs": {"data": board}}]).expressions
    assert panel.kind == PANEL and panel.promql == 'rate(x{node=~".*"}[1m])'


#: Text in a source file that reads as PromQL (stricter than the plan scan: code has its own `sum(` and `max(`). A
#: metric name is tried from its first letter only: a match from inside a name is one from its start too, and trying
#: every position of every word was most of the scan's time.
_SOURCE_PROMQL = re.compile(
    r"(?<![a-zA-Z_:])[a-zA-Z_:][\w:]*\{\s*[a-zA-Z_]\w*\s*(?:=~|!~|!=|=)\s*\"|\b(?:[a-z]+_over_time|rate|irate|increase|changes"
    r"|histogram_quantile)\(|\bgroup_(?:left|right)\b|\bbool\s+\d|\[\d+[smh](?::\d+[smh])?\]|\bvector\("
)
#: The files that write PromQL, each read by the collector through the plans: the rules, the serving query and the
#: Grafana dashboards.
PROMQL_SOURCES = {
    "components/planning/addons/monitoring.py",
    "components/planning/addons/node_monitoring.py",
    "components/planning/serving_autoscaling.py",
    "components/catalog/dashboards/efa.json",
    "components/catalog/dashboards/gpus.json",
    "components/catalog/dashboards/nodes.json",
    "components/catalog/dashboards/serving.json",
    "components/catalog/dashboards/training.json",
}


def test_components_write_promql_only_where_the_collector_reads_it() -> None:
    """A new file writing PromQL fails here: make sure its expressions reach a plan the collector reads (a shipped
    stack or a chart-test variant), then add it."""
    found = {
        str(path.relative_to(ROOT))
        for path in (ROOT / "components").rglob("*")
        if path.is_file()
        and path.suffix in {".py", ".json", ".yaml", ".yml"}
        and _SOURCE_PROMQL.search(path.read_text())
    }
    assert found == PROMQL_SOURCES


@pytest.mark.program
def test_no_shipped_expression_depends_on_what_prometheus_3_changed() -> None:
    """CI's promtool is 2.42 and the cluster's Prometheus 3.x ([PROM3]): `holt_winters` parses in CI but not on the
    cluster, so it is refused here (docs/addons.md, "Which Prometheus evaluates the rules")."""
    assert not [e.source for e in every_expression() if "holt_winters" in e.expr]
