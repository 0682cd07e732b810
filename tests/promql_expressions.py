"""Every PromQL expression the stacks ship, found in the plans of the shipped stacks and of the chart tests' variants
(tests/charts/conftest.py), never listed by hand: so an expression added anywhere is found and must be covered by
the promtool tests (tests/test_promql_expressions.py says which tests cover which kind).

Where PromQL lives in a plan:
- rule groups (`groups` of `rules`, e.g. kube-prometheus-stack's `additionalPrometheusRulesMap` or a
  PrometheusRule's spec): each alert's and recording rule's `expr`;
- autoscaler triggers (KEDA `type: prometheus`, in a ScaledObject or ScaledJob): `metadata.query`;
- Grafana dashboards (JSON strings with `panels`): every `expr`, and the series selectors of the Prometheus
  template variables (`label_values(<selector>, <label>)`, `query_result(<query>)`).
Any other string that looks like PromQL is reported as `unknown`: a place this module does not read yet.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from blueprint.plan.runner import list_stacks
from tests.builders import shipped_plan

#: Kinds of expressions, by where they were found.
ALERT, RECORD, SCALER, PANEL, VARIABLE, UNKNOWN = "alert", "record", "scaler", "panel", "variable", "unknown"

#: Text that reads as PromQL: a function or aggregation call, or a selector with a label matcher.
_FUNCTION = re.compile(
    r"\b(?:[a-z]+_over_time|rate|irate|increase|changes|delta|idelta|deriv|resets|histogram_quantile|label_replace"
    r"|absent|sum|avg|count|topk|bottomk|quantile|stddev)\s*(?:by|without)?\s*\("
)
_SELECTOR = re.compile(r"[a-zA-Z_:][\w:]*\{\s*[a-zA-Z_]\w*\s*(?:=~|!~|!=|=)\s*\"")
#: Grafana's template variables: the interval ones become a duration, the others (inside label matchers) a regex.
_INTERVALS = re.compile(r"\$(?:__rate_interval|__interval|__range)\b|\$\{__(?:rate_interval|interval|range)\}")
_VARIABLES = re.compile(r"\$\{?\w+\}?")
_LABEL_VALUES = re.compile(r"^\s*label_values\((.*),\s*[a-zA-Z_]\w*\s*\)\s*$", re.S)
_QUERY_RESULT = re.compile(r"^\s*query_result\((.*)\)\s*$", re.S)


def looks_like_promql(text: str) -> bool:
    return bool(_FUNCTION.search(text) or _SELECTOR.search(text))


@dataclass(frozen=True)
class Expression:
    """One expression: the stack (or variant) and plan resource it came from, where in it, and its text."""

    stack: str
    resource: str
    kind: str
    name: str
    expr: str

    @property
    def source(self) -> str:
        return f"{self.stack}: {self.resource}: {self.kind} {self.name}"

    @property
    def promql(self) -> str:
        """The expression as Prometheus would run it: Grafana's variables filled in (intervals as `1m`, which
        `$__rate_interval` never goes below at a 15 s scrape interval; the rest, always inside label matchers,
        as `.*`)."""
        return _VARIABLES.sub(".*", _INTERVALS.sub("1m", self.expr))


@dataclass(frozen=True)
class RuleGroup:
    stack: str
    resource: str
    group: dict[str, Any]


@dataclass
class Found:
    expressions: list[Expression]
    rule_groups: list[RuleGroup]


def _is_rule_groups(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(g, dict) and isinstance(g.get("rules"), list) for g in value)
    )


def _dashboard(text: str) -> dict[str, Any] | None:
    if not text.lstrip().startswith("{"):
        return None
    try:
        board = json.loads(text)
    except ValueError:
        return None
    return board if isinstance(board, dict) and "panels" in board else None


def _variable_query(variable: dict[str, Any]) -> str | None:
    """The PromQL inside a Prometheus template variable's query, if it has one."""
    query = variable.get("query")
    text = query.get("query") if isinstance(query, dict) else query
    if not isinstance(text, str):
        return None
    for pattern in (_LABEL_VALUES, _QUERY_RESULT):
        match = pattern.match(text)
        if match:
            return match.group(1)
    return None


class _Collector:
    def __init__(self, stack: str) -> None:
        self.stack = stack
        self.found = Found([], [])

    def add(self, resource: str, kind: str, name: str, expr: str) -> None:
        self.found.expressions.append(Expression(self.stack, resource, kind, name, expr))

    def walk(self, resource: str, value: Any, path: str) -> None:
        if isinstance(value, dict):
            if value.get("type") == "prometheus" and isinstance(value.get("metadata"), dict):
                query = value["metadata"].get("query")
                if isinstance(query, str):
                    self.add(resource, SCALER, path, query)
                rest = {k: v for k, v in value["metadata"].items() if k != "query"}
                self.walk(resource, rest, f"{path}.metadata")
                return
            for key, item in value.items():
                if key.endswith(".py"):
                    continue  # an in-cluster program's source (programs/, shipped as a ConfigMap): no PromQL runs it
                if key == "groups" and _is_rule_groups(item):
                    self.rule_groups(resource, item, f"{path}.groups")
                else:
                    self.walk(resource, item, f"{path}.{key}")
        elif isinstance(value, list):
            for index, item in enumerate(value):
                self.walk(resource, item, f"{path}[{index}]")
        elif isinstance(value, str):
            board = _dashboard(value)
            if board is not None:
                self.dashboard(resource, board, path)
            elif looks_like_promql(value):
                self.add(resource, UNKNOWN, path, value)

    def rule_groups(self, resource: str, groups: list[dict[str, Any]], path: str) -> None:
        for group in groups:
            self.found.rule_groups.append(RuleGroup(self.stack, resource, group))
            for rule in group["rules"]:
                kind, name = (ALERT, rule["alert"]) if "alert" in rule else (RECORD, rule.get("record", "?"))
                self.add(resource, kind, name, rule["expr"])

    def dashboard(self, resource: str, board: dict[str, Any], path: str) -> None:
        title = board.get("title", path)
        for variable in board.get("templating", {}).get("list", []):
            query = _variable_query(variable)
            if query is not None:
                self.add(resource, VARIABLE, f"{title} ${variable['name']}", query)
        self.dashboard_strings(resource, {k: v for k, v in board.items() if k != "templating"}, title)

    def dashboard_strings(self, resource: str, value: Any, where: str) -> None:
        if isinstance(value, dict):
            here = f"{where} / {value['title']}" if isinstance(value.get("title"), str) else where
            for key, item in value.items():
                if key == "expr" and isinstance(item, str):
                    self.add(resource, PANEL, f"{here} {value.get('refId', '')}".strip(), item)
                else:
                    self.dashboard_strings(resource, item, here)
        elif isinstance(value, list):
            for item in value:
                self.dashboard_strings(resource, item, where)
        elif isinstance(value, str) and looks_like_promql(value):
            self.add(resource, UNKNOWN, where, value)


def collect(stack: str, resources: list[dict[str, Any]]) -> Found:
    """Every expression and rule group in one plan's resources."""
    collector = _Collector(stack)
    for resource in resources:
        collector.walk(f"{resource['type']} {resource['name']}", resource.get("inputs", {}), "inputs")
    return collector.found


@cache
def _variant_folder() -> Path:
    return Path(tempfile.mkdtemp(prefix="promql-variants-"))


def stack_names() -> list[str]:
    """The shipped stacks, then the chart tests' variants (each turns on an optional path the stacks leave off)."""
    from tests.charts.conftest import VARIANTS

    return [*list_stacks(), *VARIANTS]


def plan_resources(stack: str) -> list[dict[str, Any]]:
    """The plan resources of one shipped stack or variant, planned once per session."""
    if stack in list_stacks():
        resources: list[dict[str, Any]] = shipped_plan(stack)["resources"]
        return resources
    from tests.charts.conftest import planned_case

    return planned_case(stack, _variant_folder()).resources


@cache
def found_in(stack: str) -> Found:
    """The expressions of one shipped stack or variant, planned once per session."""
    return collect(stack, plan_resources(stack))


def every_expression() -> Iterator[Expression]:
    for stack in stack_names():
        yield from found_in(stack).expressions


#: A query's shape: its text with label values and numbers blanked, so the same rule built for another workload,
#: namespace, exporter or thresholds has the same shape, and a different query (another metric or logic) does not.
_STRINGS = re.compile(r'"(?:\\.|[^"\\])*"')
_NUMBERS = re.compile(r"(?<![\w:])\d+(?:\.\d+)?(?:[smhdwy])?(?![\w:])")


def shape(expr: str) -> str:
    return _NUMBERS.sub("N", _STRINGS.sub('""', expr))
