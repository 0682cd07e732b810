"""The health loop on a Container Insights stack, as the training stack plans it on that path (it ships on the
Prometheus path): the loop's `config.json` names where it publishes, its role may write there only, the stack registers
the loop's alarms and dashboard widgets on the series it publishes, and the loop itself, from that `config.json`,
publishes those series through a Stubber-backed client."""

from __future__ import annotations

import json
from typing import Any

import botocore.session
import pytest
from botocore.stub import ANY, Stubber

from blueprint.plan.plan import PlannedStack
from components.planning import node_health as planned
from components.planning.addons import node_monitoring
from components.planning.addons.cloudwatch_dashboard import NODE_HEALTH_NOTE, cloudwatch_dashboard
from components.planning.addons.node_health_alarms import node_health_alarms
from components.planning.stack_plan import plan_pools
from programs.node_health import cloudwatch, names
from programs.node_health.checks import HealthLoop, Settings, format_time, parse_time
from programs.node_health.loop import tick
from programs.node_health.metrics import Metrics
from tests.builders import SYSTEM_POOL, TRAINING_POOL, shipped_stack, stack_config, training_on_container_insights
from tests.fake_kube import FakeKube

ALARM = "aws:cloudwatch/metricAlarm:MetricAlarm"
DASHBOARD = "aws:cloudwatch/dashboard:Dashboard"
T0 = parse_time("2026-11-27T04:00:00Z") or 0.0
TAINT = {"key": names.STARTUP_TAINT_KEY, "value": "true", "effect": "NoSchedule"}
NAMESPACE = "GpuClusters/NodeHealth"


def stubbed_client() -> Any:
    return botocore.session.get_session().create_client(
        "cloudwatch", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )


def capture(client: Any) -> list[dict[str, Any]]:
    """Every PutMetricData call's parameters, as the client is asked to send them."""
    sent: list[dict[str, Any]] = []
    client.meta.events.register(
        "provide-client-params.cloudwatch.PutMetricData", lambda params, **_: sent.append(params)
    )
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
    client = stubbed_client()
    metrics = Metrics()
    metrics.inc(names.CHECKS_METRIC, {"pool": "h100", "kind": "gate", "result": "failed"})
    metrics.set_gauge(names.CONDITIONS_FALSE_METRIC, {(("condition", "KernelReady"), ("pool", "h100")): 1.0})
    metrics.set_gauge(names.NODES_METRIC, {(("pool", "h100"), ("state", "failed")): 1.0})
    with Stubber(client) as stub:
        stub.add_response("put_metric_data", {}, {"Namespace": NAMESPACE, "MetricData": ANY})
        sent = capture(client)
        cloudwatch.CloudWatchPublisher(client, NAMESPACE, "train").publish(metrics)
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
@pytest.mark.program
def test_the_training_stack_alarms_on_the_loop_per_pool_to_its_alerts_topic() -> None:
    alarms = health_alarms("training")
    assert set(alarms) == {
        "system-repairs-held",
        "h100-repairs-held",
        "system-failed-too-long",
        "h100-failed-too-long",
        "h100-gate-failures",
        "system-conditions",
        "h100-conditions",
        "heartbeat",
    }
    pool = {"ClusterName": "train", "Pool": "h100"}
    held, gate = alarms["h100-repairs-held"], alarms["h100-gate-failures"]
    conditions, heartbeat = alarms["h100-conditions"], alarms["heartbeat"]
    for alarm in alarms.values():
        assert alarm["namespace"] == NAMESPACE
    # any held repair within the last hour (the storm cap hit)
    assert (held["metricName"], held["dimensions"], held["statistic"]) == ("RepairsHeld", pool, "Sum")
    assert (held["comparisonOperator"], held["threshold"], held["period"], held["evaluationPeriods"]) == (
        "GreaterThanThreshold",
        0,
        3600,
        1,
    )
    # two gate failures of the pool within the last hour
    assert (gate["metricName"], gate["dimensions"]) == ("Checks", {**pool, "Kind": "gate", "Result": "failed"})
    assert (gate["statistic"], gate["comparisonOperator"], gate["threshold"], gate["period"]) == (
        "Sum",
        "GreaterThanOrEqualToThreshold",
        node_monitoring.GATE_FAILURES_PER_HOUR,
        3600,
    )
    # an agent condition False all through 5 minutes (the Prometheus rule's `for`)
    assert (conditions["metricName"], conditions["dimensions"], conditions["statistic"]) == (
        "AgentConditionsFalse",
        pool,
        "Minimum",
    )
    assert (conditions["comparisonOperator"], conditions["threshold"], conditions["period"]) == (
        "GreaterThanThreshold",
        0,
        node_monitoring.CONDITION_FALSE_MINUTES * 60,
    )
    # a node of the pool labelled failed all through the last hour (the Prometheus rule's `for`): the loop sends the
    # pool's failed count as 0 when none is, so the minimum over the hour is above 0 only if it never fell to 0
    failed = alarms["h100-failed-too-long"]
    assert (failed["metricName"], failed["dimensions"], failed["statistic"]) == (
        "Nodes",
        {**pool, "State": "failed"},
        "Minimum",
    )
    assert (failed["comparisonOperator"], failed["threshold"], failed["period"], failed["evaluationPeriods"]) == (
        "GreaterThanThreshold",
        0,
        node_monitoring.FAILED_TOO_LONG_MINUTES * 60,
        1,
    )
    for alarm in (held, gate, conditions, failed):
        assert alarm["treatMissingData"] == "notBreaching"  # no datum is no event
    # the heartbeat: no finished pass for 10 minutes, a missing datum breaching
    assert (heartbeat["metricName"], heartbeat["dimensions"], heartbeat["statistic"]) == (
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
    # to wherever the stack's GPU alarms go
    gpu_idle = registered("training", ALARM, "train-gpu-idle")
    for alarm in alarms.values():
        assert alarm.get("alarmActions") == gpu_idle.get("alarmActions")


@pytest.mark.program
def test_a_stack_without_container_insights_gets_none_of_the_loops_alarms() -> None:
    assert health_alarms("inference") == {}


def test_the_alarms_follow_the_pools() -> None:
    spec = stack_config(SYSTEM_POOL, TRAINING_POOL, {**TRAINING_POOL, "name": "h200", "healthGate": {"enabled": False}})
    suffixes = {a.suffix for a in node_health_alarms(plan_pools(spec))}
    # every pool's repairs can be held and every EC2 pool reports agent conditions; only gated pools have a gate
    assert "node-health-h200-repairs-held" in suffixes and "node-health-h200-conditions" in suffixes
    assert "node-health-h200-gate-failures" not in suffixes and "node-health-h100-gate-failures" in suffixes


# --------------------------------------------------------------------------------------------------- dashboard
@pytest.mark.program
def test_the_dashboard_graphs_the_loops_series_in_place_of_the_note() -> None:
    body = json.loads(registered("training", DASHBOARD, "train-gpu-cluster")["dashboardBody"])
    rows = [row for w in body["widgets"] if w["type"] == "metric" for row in w["properties"]["metrics"]]
    # a row is [namespace, metric, dimension, value, ..., options]
    series = [(row[1], dict(zip(row[2:-1:2], row[3:-1:2], strict=True))) for row in rows if row[0] == NAMESPACE]
    for name, alarm in health_alarms("training").items():
        assert (alarm["metricName"], alarm["dimensions"]) in series, name
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
    client = stubbed_client()
    sent = capture(client)
    publisher = cloudwatch.from_settings(raw, "us-east-1", client)
    assert publisher is not None
    api, metrics = FakeKube(), Metrics()
    gpu_node(api, "n1", "False")
    gpu_node(api, "n2", "True")
    api.add_node("s1", "system")["status"] = {"conditions": [{"type": "KernelReady", "status": "True"}]}
    health = HealthLoop(api, Settings.from_json(json.dumps(raw)), HeldRepairs(metrics), metrics)
    with Stubber(client) as stub:
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
    checked = []
    for name, alarm in health_alarms("training").items():
        key = (alarm["metricName"], tuple(sorted(alarm["dimensions"].items())))
        if name.startswith("system-") and alarm["metricName"] == "RepairsHeld":
            continue  # the system pool is in the repair map only: nothing of it held, nothing counted
        assert key in published, name
        checked.append(alarm["metricName"])
    # not vacuous: every kind of alarm was matched against a published series
    assert sorted(checked) == sorted(
        ["RepairsHeld", "Checks", "AgentConditionsFalse", "AgentConditionsFalse", "Nodes", "Nodes", "LoopPasses"]
    )
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
    client = stubbed_client()
    publisher = cloudwatch.CloudWatchPublisher(client, NAMESPACE, "train")

    class Down(FakeKube):
        def list_nodes(self, label_selector: str = "") -> list[dict[str, Any]]:
            from programs.node_health.kube import KubeError

            raise KubeError("connection refused")

    raw = loop_config("training")
    health = HealthLoop(Down(), Settings.from_json(json.dumps(raw)), HeldRepairs(Metrics()))
    with Stubber(client) as stub:  # no response queued: a call would fail the test
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
