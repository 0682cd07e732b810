"""The health loop on a Container Insights stack, as the training stack plans it on that path (it ships on the
Prometheus path): the loop's `config.json` names where it publishes, its role may write there only, the stack registers
the loop's alarms and dashboard widgets on the series it publishes, and the loop itself, from that `config.json`,
publishes those series through a Stubber-backed client."""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple

import pytest
from botocore.stub import ANY

from blueprint.plan.plan import PlannedStack
from components.planning import node_health as planned
from components.planning.addons import node_monitoring
from components.planning.addons.cloudwatch_dashboard import NODE_HEALTH_NOTE, cloudwatch_dashboard
from components.planning.addons.node_health_alarms import (
    METRICS_INSIGHTS_ALARM_SECONDS,
    pool_alarms,
    watched_pools,
)
from components.planning.stack_plan import plan_pools
from programs.node_health import cloudwatch, names
from programs.node_health.checks import HealthLoop, Settings, format_time, parse_time
from programs.node_health.loop import tick
from programs.node_health.metrics import Metrics
from tests.builders import SYSTEM_POOL, TRAINING_POOL, shipped_stack, stack_config, training_on_container_insights
from tests.fake_kube import FakeKube
from tests.stubbed_aws import Lease, stubbed_client

ALARM = "aws:cloudwatch/metricAlarm:MetricAlarm"
DASHBOARD = "aws:cloudwatch/dashboard:Dashboard"
T0 = parse_time("2026-11-27T04:00:00Z") or 0.0
TAINT = {"key": names.STARTUP_TAINT_KEY, "value": "true", "effect": "NoSchedule"}
NAMESPACE = "GpuClusters/NodeHealth"


def capture(lease: Lease) -> list[dict[str, Any]]:
    """Every PutMetricData call's parameters, as the lent client is asked to send them."""
    sent: list[dict[str, Any]] = []
    lease.on("provide-client-params.cloudwatch.PutMetricData", lambda params, **_: sent.append(params))
    return sent


def planned_stack(stack: str) -> PlannedStack:
    """`training` on Container Insights, where the loop publishes to CloudWatch; `inference` as shipped (Prometheus)."""
    return training_on_container_insights() if stack == "training" else shipped_stack(stack)


def registered(stack: str, type_token: str, name: str) -> dict[str, Any]:
    return planned_stack(stack).run.one(type_token, name).inputs


def loop_config(stack: str) -> dict[str, Any]:
    data = registered(stack, "kubernetes:core/v1:ConfigMap", f"{stack_prefix(stack)}-addons-node-health-settings")
    return dict(json.loads(data["data"]["config.json"]))


def stack_prefix(stack: str) -> str:
    return {"training": "train", "inference": "serve"}[stack]


def health_alarms(stack: str) -> dict[str, dict[str, Any]]:
    prefix = f"{stack_prefix(stack)}-node-health-"
    return {
        r.name.removeprefix(prefix): r.inputs
        for r in planned_stack(stack).run.of_type(ALARM)
        if r.name.startswith(prefix)
    }


class Query(NamedTuple):
    """What a Metrics Insights query of the alarms reads: `FUNCTION(metric)` in one schema, filtered, grouped."""

    function: str
    metric: str
    namespace: str
    schema: frozenset[str]
    where: dict[str, str]
    group_by: str


QUERY = re.compile(
    r'SELECT (?P<function>\w+)\("(?P<metric>\w+)"\) FROM SCHEMA\("(?P<namespace>[^"]+)", (?P<schema>[\w", ]+)\) '
    r'WHERE (?P<where>.+) GROUP BY "(?P<group_by>\w+)" ORDER BY (?P=function)\(\) DESC'
)


def parse(query: str) -> Query:
    """The query's parts ([CWMIQL] syntax), or the test fails on a query of another shape."""
    match = QUERY.fullmatch(query)
    assert match, query
    where: dict[str, str] = {}
    for term in match["where"].split(" AND "):
        condition = re.fullmatch(r"\"(\w+)\" = '([^']*)'", term)
        assert condition, term
        where[condition[1]] = condition[2]
    names = [name.strip() for name in match["schema"].split(",")]
    assert all(re.fullmatch(r'"\w+"', name) for name in names), names
    schema = frozenset(name.strip('"') for name in names)
    return Query(match["function"], match["metric"], match["namespace"], schema, where, match["group_by"])


def query_alarms(stack: str) -> dict[str, tuple[dict[str, Any], Query]]:
    """The stack's Metrics Insights alarms of the loop, each with its parsed query."""
    return {
        name: (alarm, parse(alarm["metricQueries"][0]["expression"]))
        for name, alarm in health_alarms(stack).items()
        if alarm.get("metricQueries")
    }


# ----------------------------------------------------------------------------------------------------- the names
def test_the_program_publishes_under_the_planned_names() -> None:
    for name in (
        "CONDITIONS_FALSE_METRIC",
        "CLOUDWATCH_CHECKS",
        "CLOUDWATCH_REPAIRS",
        "CLOUDWATCH_REPAIRS_HELD",
        "CLOUDWATCH_CONDITIONS_FALSE",
        "CLOUDWATCH_HEARTBEAT",
        "CLOUDWATCH_NODES",
        "CLOUDWATCH_CLUSTER_DIMENSION",
    ):
        assert getattr(names, name) == getattr(planned, name), name
    assert names.AGENT_CONDITIONS == node_monitoring.AGENT_CONDITIONS
    # the publisher names a label's dimension by its key capitalized: the planned dimensions are those
    metrics = Metrics()
    metrics.inc(names.CHECKS_METRIC, {"pool": "h100", "kind": "gate", "result": "failed"})
    metrics.set_gauge(names.CONDITIONS_FALSE_METRIC, {(("condition", "KernelReady"), ("pool", "h100")): 1.0})
    metrics.set_gauge(names.NODES_METRIC, {(("pool", "h100"), ("state", "failed")): 1.0})
    with stubbed_client("cloudwatch") as lease:
        lease.stub.add_response("put_metric_data", {}, {"Namespace": NAMESPACE, "MetricData": ANY})
        sent = capture(lease)
        cloudwatch.CloudWatchPublisher(lease.client, NAMESPACE, "train").publish(metrics)
    dimensions = {x["Name"] for datum in sent[0]["MetricData"] for x in datum["Dimensions"]}
    assert dimensions == {
        planned.CLOUDWATCH_CLUSTER_DIMENSION,
        planned.CLOUDWATCH_POOL_DIMENSION,
        planned.CLOUDWATCH_KIND_DIMENSION,
        planned.CLOUDWATCH_RESULT_DIMENSION,
        planned.CLOUDWATCH_CONDITION_DIMENSION,
        planned.CLOUDWATCH_STATE_DIMENSION,
    }


# -------------------------------------------------------------------------------------------- the loop's config
@pytest.mark.program
def test_the_training_loop_publishes_to_cloudwatch_and_the_prometheus_stack_does_not() -> None:
    assert loop_config("training")["cloudWatch"] == {"namespace": NAMESPACE, "clusterName": "train"}
    # inference runs Prometheus, not Container Insights: the loop is scraped there and publishes nothing
    assert "cloudWatch" not in loop_config("inference")


@pytest.mark.program
def test_the_loop_role_may_publish_into_its_namespace_only_when_it_publishes() -> None:
    statements = json.loads(registered("training", "aws:iam/rolePolicy:RolePolicy", "train-node-health")["policy"])
    publish = [s for s in statements["Statement"] if s["Sid"] == "PublishHealthMetrics"]
    assert publish == [
        {
            "Sid": "PublishHealthMetrics",
            "Effect": "Allow",
            "Action": ["cloudwatch:PutMetricData"],
            "Resource": "*",
            "Condition": {"StringEquals": {"cloudwatch:namespace": NAMESPACE}},
        }
    ]
    other = json.loads(registered("inference", "aws:iam/rolePolicy:RolePolicy", "serve-node-health")["policy"])
    assert [s["Sid"] for s in other["Statement"]] == ["ReplaceOwnNodes", "ReadCapacityBlocks"]


# ------------------------------------------------------------------------------------------------------ alarms
def query_alarm_inputs(query: str, period: int, comparison: str, threshold: float) -> dict[str, Any]:
    return {
        "metricQueries": [{"id": "q1", "expression": query, "period": period, "returnData": True}],
        "comparisonOperator": comparison,
        "threshold": threshold,
        "evaluationPeriods": 1,
        "treatMissingData": "notBreaching",  # no datum is no event; a series with no data is no contributor
    }


@pytest.mark.program
def test_the_training_stack_alarms_on_the_loop_once_per_condition_to_its_alerts_topic() -> None:
    alarms = health_alarms("training")
    # one alarm per condition for the whole stack, each pool a contributor of it (GROUP BY Pool), and the heartbeat
    assert set(alarms) == {"repairs-held", "failed-too-long", "gate-failures", "conditions", "heartbeat"}
    schema = f'SCHEMA("{NAMESPACE}", "ClusterName", "Pool"'
    expected = {
        # any held repair within the last hour (the storm cap hit)
        "repairs-held": query_alarm_inputs(
            f'SELECT SUM("RepairsHeld") FROM {schema}) WHERE "ClusterName" = \'train\' GROUP BY "Pool" '
            "ORDER BY SUM() DESC",
            3600,
            "GreaterThanThreshold",
            0,
        ),
        # a node of the pool labelled failed all through the last hour (the Prometheus rule's `for`): the loop sends
        # the pool's failed count as 0 when none is, so the minimum over the hour is above 0 only if it never fell
        "failed-too-long": query_alarm_inputs(
            f'SELECT MIN("Nodes") FROM {schema}, "State") WHERE "ClusterName" = \'train\' AND "State" = \'failed\' '
            'GROUP BY "Pool" ORDER BY MIN() DESC',
            node_monitoring.FAILED_TOO_LONG_MINUTES * 60,
            "GreaterThanThreshold",
            0,
        ),
        # two gate failures of a pool within the last hour
        "gate-failures": query_alarm_inputs(
            f'SELECT SUM("Checks") FROM {schema}, "Kind", "Result") WHERE "ClusterName" = \'train\' '
            'AND "Kind" = \'gate\' AND "Result" = \'failed\' GROUP BY "Pool" ORDER BY SUM() DESC',
            3600,
            "GreaterThanOrEqualToThreshold",
            node_monitoring.GATE_FAILURES_PER_HOUR,
        ),
        # an agent condition False all through 5 minutes (the Prometheus rule's `for`)
        "conditions": query_alarm_inputs(
            f'SELECT MIN("AgentConditionsFalse") FROM {schema}) WHERE "ClusterName" = \'train\' '
            'GROUP BY "Pool" ORDER BY MIN() DESC',
            node_monitoring.CONDITION_FALSE_MINUTES * 60,
            "GreaterThanThreshold",
            0,
        ),
    }
    for name, inputs in expected.items():
        alarm = alarms[name]
        assert {key: alarm.get(key) for key in inputs} == inputs, name
        # a query alarm names no metric, statistic or dimensions of its own (PutMetricAlarm: Metrics or those)
        assert not {"metricName", "namespace", "statistic", "dimensions", "period"} & set(alarm), name
        # the query reads at most the last 3 hours, all a Metrics Insights alarm evaluates
        assert alarm["metricQueries"][0]["period"] * alarm["evaluationPeriods"] <= METRICS_INSIGHTS_ALARM_SECONDS
    # the heartbeat: no finished pass for 10 minutes, a missing datum breaching
    heartbeat = alarms["heartbeat"]
    assert (heartbeat["namespace"], heartbeat["metricName"], heartbeat["dimensions"], heartbeat["statistic"]) == (
        NAMESPACE,
        "LoopPasses",
        {"ClusterName": "train"},
        "Sum",
    )
    assert (heartbeat["comparisonOperator"], heartbeat["threshold"], heartbeat["period"]) == (
        "LessThanThreshold",
        1,
        60,
    )
    assert (heartbeat["evaluationPeriods"], heartbeat["treatMissingData"]) == (
        node_monitoring.LOOP_ABSENT_MINUTES,
        "breaching",
    )
    # to wherever the stack's GPU alarms go, on ALARM and on OK (each contributor notifies on its own)
    gpu_idle = registered("training", ALARM, "train-gpu-idle")
    for alarm in alarms.values():
        assert alarm.get("alarmActions") == gpu_idle.get("alarmActions")
        assert alarm.get("okActions") == gpu_idle.get("okActions")


@pytest.mark.program
def test_the_query_alarms_are_valid_put_metric_alarm_requests() -> None:
    # botocore's model of PutMetricAlarm ([CWMIALARM]): the registered inputs as the provider sends them (numbers
    # come back from the engine as floats; the whole ones are the API's integers)
    def whole(value: float) -> int:
        assert value == int(value), value
        return int(value)

    for name, (alarm, _) in query_alarms("training").items():
        (query,) = alarm["metricQueries"]
        params = {
            "AlarmName": f"train-node-health-{name}",
            "Metrics": [
                {
                    "Id": query["id"],
                    "Expression": query["expression"],
                    "Period": whole(query["period"]),
                    "ReturnData": True,
                }
            ],
            "EvaluationPeriods": whole(alarm["evaluationPeriods"]),
            "Threshold": alarm["threshold"],
            "ComparisonOperator": alarm["comparisonOperator"],
            "TreatMissingData": alarm["treatMissingData"],
        }
        with stubbed_client("cloudwatch") as lease:
            lease.stub.add_response("put_metric_alarm", {}, params)
            lease.client.put_metric_alarm(**params)  # the stub validates the parameters against the model
            lease.stub.assert_no_pending_responses()


@pytest.mark.program
def test_a_stack_without_container_insights_gets_none_of_the_loops_alarms() -> None:
    assert health_alarms("inference") == {}


def test_a_pool_added_later_needs_no_new_alarm_and_a_gate_alarm_needs_a_gated_pool() -> None:
    two = plan_pools(stack_config(SYSTEM_POOL, TRAINING_POOL))
    three = plan_pools(stack_config(SYSTEM_POOL, TRAINING_POOL, {**TRAINING_POOL, "name": "h200"}))
    assert pool_alarms(three) == pool_alarms(two)  # the queries group by pool: the new one is a contributor
    assert [p.name for p in watched_pools(three)["node-health-gate-failures"]] == ["h100", "h200"]
    ungated = plan_pools(stack_config(SYSTEM_POOL, {**TRAINING_POOL, "healthGate": {"enabled": False}}))
    assert [a.suffix for a in pool_alarms(ungated)] == [
        "node-health-repairs-held",
        "node-health-failed-too-long",
        "node-health-conditions",
    ]


#: The words a query of the alarms may use unquoted: the grammar's keywords and the functions it calls ([CWMIQL]).
QUERY_KEYWORDS = frozenset({"SELECT", "FROM", "SCHEMA", "WHERE", "AND", "GROUP", "BY", "ORDER", "DESC", "SUM", "MIN"})


def test_every_name_a_pool_alarm_queries_is_quoted() -> None:
    """Metrics Insights refuses a query that names a reserved keyword (a long list of SQL words) unquoted: the
    queries quote every namespace, metric and dimension name, so none of ours can be one; values are in single
    quotes."""
    for alarm in pool_alarms(plan_pools(stack_config(SYSTEM_POOL, TRAINING_POOL))):
        unquoted = re.sub(r'"[^"]*"|\'[^\']*\'', " ", alarm.query)
        words = set(re.findall(r"[A-Za-z_]\w*", unquoted))
        assert words <= QUERY_KEYWORDS, (alarm.suffix, words - QUERY_KEYWORDS)


# --------------------------------------------------------------------------------------------------- dashboard
@pytest.mark.program
def test_the_dashboard_graphs_the_loops_series_in_place_of_the_note() -> None:
    body = json.loads(registered("training", DASHBOARD, "train-gpu-cluster")["dashboardBody"])
    rows = [row for w in body["widgets"] if w["type"] == "metric" for row in w["properties"]["metrics"]]
    # a row is [namespace, metric, dimension, value, ..., options]
    series = [(row[1], dict(zip(row[2:-1:2], row[3:-1:2], strict=True))) for row in rows if row[0] == NAMESPACE]
    # every pool an alarm watches (both pools; the gated h100 for gate failures) has its line on the dashboard, on
    # the dimensions the alarm's query reads
    watched = {"repairs-held": 2, "failed-too-long": 2, "gate-failures": 1, "conditions": 2}
    for name, (_, query) in query_alarms("training").items():
        lines = [
            dimensions
            for metric, dimensions in series
            if metric == query.metric
            and set(dimensions) == query.schema
            and all(dimensions.get(key) == value for key, value in query.where.items())
        ]
        assert len(lines) == watched.pop(name), name
    assert watched == {}
    heartbeat = health_alarms("training")["heartbeat"]
    assert (heartbeat["metricName"], heartbeat["dimensions"]) in series
    texts = [w["properties"]["markdown"] for w in body["widgets"] if w["type"] == "text"]
    assert NODE_HEALTH_NOTE not in texts
    # without the loop, the dashboard still says where the conditions are read
    without = cloudwatch_dashboard(
        "train", "us-east-1", plan_pools(stack_config(SYSTEM_POOL, TRAINING_POOL)), None, None
    )
    assert NODE_HEALTH_NOTE in [w["properties"].get("markdown") for w in without["widgets"]]


# -------------------------------------------------------------------------------------- the loop, publishing


def gpu_node(api: FakeKube, name: str, accelerated: str) -> None:
    node = api.add_node(name, "h100", [TAINT])
    node["status"] = {
        "conditions": [
            {"type": "AcceleratedHardwareReady", "status": accelerated, "reason": "NvidiaXID79"},
            {"type": "KernelReady", "status": "True"},
            {"type": "Ready", "status": "True"},
        ]
    }


class HeldRepairs:
    """The repair path at its hourly cap: every failed node's repair is held (and counted so)."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def __call__(self, api: Any, node: dict[str, Any], reason: str, now: float) -> None:
        self.metrics.inc(names.REPAIRS_HELD_METRIC, {"pool": "h100", "reason": "hourly-cap"})


@pytest.mark.program
def test_the_planned_loop_publishes_every_series_its_alarms_read() -> None:
    raw = loop_config("training")
    api, metrics = FakeKube(), Metrics()
    gpu_node(api, "n1", "False")
    gpu_node(api, "n2", "True")
    api.add_node("s1", "system")["status"] = {"conditions": [{"type": "KernelReady", "status": "True"}]}
    health = HealthLoop(api, Settings.from_json(json.dumps(raw)), HeldRepairs(metrics), metrics)
    with stubbed_client("cloudwatch") as lease:
        stub, sent = lease.stub, capture(lease)
        publisher = cloudwatch.from_settings(raw, "us-east-1", lease.client)
        assert publisher is not None
        stub.add_response("put_metric_data", {}, {"Namespace": NAMESPACE, "MetricData": ANY})
        assert tick(health, publisher, T0)  # the gate checks start
        first = len(sent)
        for pod in api.check_pods():
            api.bind(pod, format_time(T0 + 10))
            api.end(pod, 1, json.dumps({"result": "failed", "step": "dcgm", "detail": "diag level 1 failed"}))
        api.now = format_time(T0 + 60)
        stub.add_response("put_metric_data", {}, {"Namespace": NAMESPACE, "MetricData": ANY})
        assert tick(health, publisher, T0 + 60)  # both fail the gate; their repairs are held
        stub.assert_no_pending_responses()
    assert first == 1 and len(sent) == 2
    second = sent[1]["MetricData"]
    published = {
        (d["MetricName"], tuple(sorted((x["Name"], x["Value"]) for x in d["Dimensions"]))): d["Value"] for d in second
    }
    # Each query's series, as CloudWatch would match them: the query's metric, exactly its schema's dimensions
    # ([CWMIQL]: SCHEMA matches metrics with exactly those dimensions), its WHERE values; one per pool it groups.
    # A metric or dimension the loop does not publish matches nothing, and the pools below would not be found.
    contributors = {}
    for name, (_, query) in query_alarms("training").items():
        assert (query.namespace, query.group_by, query.where["ClusterName"]) == (NAMESPACE, "Pool", "train"), name
        contributors[name] = sorted(
            dict(dimensions)[query.group_by]
            for metric, dimensions in published
            if metric == query.metric
            and {key for key, _ in dimensions} == query.schema
            and all(dict(dimensions).get(key) == value for key, value in query.where.items())
        )
    assert contributors == {
        "repairs-held": ["h100"],  # the system pool is in the repair map only: nothing of it held, nothing counted
        "failed-too-long": ["h100", "system"],
        "gate-failures": ["h100"],
        "conditions": ["h100", "system"],
    }
    heartbeat = health_alarms("training")["heartbeat"]
    assert ("LoopPasses", tuple(sorted(heartbeat["dimensions"].items()))) in published
    h100 = (("ClusterName", "train"), ("Pool", "h100"))
    assert published[("RepairsHeld", h100)] == 2  # both held this pass: the delta since the first publish
    assert published[("Checks", (*h100[:1], ("Kind", "gate"), h100[1], ("Result", "failed")))] == 2
    assert published[("AgentConditionsFalse", h100)] == 1  # n1's AcceleratedHardwareReady
    assert published[("AgentConditionsFalse", (h100[0], ("Pool", "system")))] == 0  # reported, none False
    assert published[("LoopPasses", h100[:1])] == 1
    # both h100 nodes are labelled failed now; the ungated system pool's failed count is there, at 0
    assert published[("Nodes", (*h100, ("State", "failed")))] == 2
    assert published[("Nodes", (h100[0], ("Pool", "system"), ("State", "failed")))] == 0


@pytest.mark.program
def test_a_failed_pass_publishes_no_heartbeat() -> None:
    class Down(FakeKube):
        def list_nodes(self, label_selector: str = "") -> list[dict[str, Any]]:
            from programs.node_health.kube import KubeError

            raise KubeError("connection refused")

    raw = loop_config("training")
    health = HealthLoop(Down(), Settings.from_json(json.dumps(raw)), HeldRepairs(Metrics()))
    with stubbed_client("cloudwatch") as lease:  # no response queued: a call would fail the test
        stub = lease.stub
        publisher = cloudwatch.CloudWatchPublisher(lease.client, NAMESPACE, "train")
        assert not tick(health, publisher, T0)
        stub.assert_no_pending_responses()


@pytest.mark.program
@pytest.mark.parametrize("status", ["True", "False"])
def test_the_conditions_gauge_counts_false_conditions_per_pool(status: str) -> None:
    api = FakeKube()
    gpu_node(api, "n1", status)
    health = HealthLoop(api, Settings.from_json(json.dumps(loop_config("training"))), HeldRepairs(Metrics()))
    health.run_once(T0)
    snapshot = health.metrics.snapshot(names.CONDITIONS_FALSE_METRIC)
    assert snapshot == {
        (("condition", "AcceleratedHardwareReady"), ("pool", "h100")): float(status == "False"),
        (("condition", "KernelReady"), ("pool", "h100")): 0.0,
    }


@pytest.mark.program
def test_the_nodes_gauge_says_0_failed_rather_than_go_silent_when_a_repair_finishes() -> None:
    # The failed-too-long alarm reads the minimum of the pool's failed count over an hour: a series that vanished
    # when its failed node left would leave the alarm the 1s it sent before, and page for a finished repair.
    api = FakeKube()
    gpu_node(api, "n1", "True")
    api.nodes["n1"]["metadata"]["labels"][names.HEALTH_STATE_LABEL] = names.FAILED
    system = api.add_node("s1", "system")
    system["metadata"]["labels"][names.HEALTH_STATE_LABEL] = names.FAILED  # failed by an agent condition
    health = HealthLoop(api, Settings.from_json(json.dumps(loop_config("training"))), HeldRepairs(Metrics()))
    health.run_once(T0)
    failed = {"h100": 1.0, "system": 1.0}
    assert {
        dict(labels)["pool"]: value
        for labels, value in health.metrics.snapshot(names.NODES_METRIC).items()
        if dict(labels)["state"] == names.FAILED
    } == failed
    del api.nodes["n1"], api.nodes["s1"]  # both replaced by their groups
    api.add_node("s2", "system")  # the system pool's replacement registered; h100's not yet
    health.run_once(T0 + 60)
    snapshot = health.metrics.snapshot(names.NODES_METRIC)
    # the gated pool: every state, at 0 with no node; the ungated pool: `failed` only, at 0
    assert snapshot == {
        (("pool", "h100"), ("state", state)): 0.0 for state in (names.PENDING, names.PASSED, names.FAILED)
    } | {(("pool", "system"), ("state", names.FAILED)): 0.0}
