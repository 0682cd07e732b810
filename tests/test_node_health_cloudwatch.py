"""The loop's CloudWatch publishing against botocore's Stubber: the heartbeat on every publish, counters as deltas (by
their labels and summed per pool, the series the alarms read), and a restarted loop (a new publisher over counters
back at zero) sending its first event."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from programs.node_health import names
from programs.node_health.cloudwatch import CloudWatchPublisher
from programs.node_health.metrics import Labels, Metrics
from tests.stubbed_aws import shared_client, stubbed_client

NAMESPACE = "GpuClusters/NodeHealth"
HELD = {"pool": "h100", "reason": "hourly-cap"}


def heartbeat() -> dict[str, Any]:
    return {
        "MetricName": "LoopPasses",
        "Dimensions": [{"Name": "ClusterName", "Value": "c"}],
        "Value": 1.0,
        "Unit": "Count",
    }


def held(value: float) -> list[dict[str, Any]]:
    """The held repairs' delta: summed per pool (what the pool's alarm reads), then by pool and reason."""
    pool = [{"Name": "ClusterName", "Value": "c"}, {"Name": "Pool", "Value": "h100"}]
    return [
        {"MetricName": "RepairsHeld", "Dimensions": pool, "Value": value, "Unit": "Count"},
        {
            "MetricName": "RepairsHeld",
            "Dimensions": [*pool, {"Name": "Reason", "Value": "hourly-cap"}],
            "Value": value,
            "Unit": "Count",
        },
    ]


def test_counters_go_as_deltas_and_the_heartbeat_every_time() -> None:
    metrics = Metrics()
    with stubbed_client("cloudwatch") as lease:
        cw, stub = lease.client, lease.stub
        publisher = CloudWatchPublisher(cw, NAMESPACE, "c")
        stub.add_response("put_metric_data", {}, {"Namespace": NAMESPACE, "MetricData": [heartbeat()]})
        publisher.publish(metrics)
        metrics.inc(names.REPAIRS_HELD_METRIC, HELD)
        metrics.inc(names.REPAIRS_HELD_METRIC, HELD)
        stub.add_response("put_metric_data", {}, {"Namespace": NAMESPACE, "MetricData": [heartbeat(), *held(2.0)]})
        publisher.publish(metrics)
        stub.add_response("put_metric_data", {}, {"Namespace": NAMESPACE, "MetricData": [heartbeat(), *held(0.0)]})
        publisher.publish(metrics)
        stub.assert_no_pending_responses()


def test_a_restarted_loop_sends_its_first_held_repair() -> None:
    restarted = Metrics()
    restarted.inc(names.REPAIRS_HELD_METRIC, HELD)
    with stubbed_client("cloudwatch") as lease:
        cw, stub = lease.client, lease.stub
        stub.add_response("put_metric_data", {}, {"Namespace": NAMESPACE, "MetricData": [heartbeat(), *held(1.0)]})
        CloudWatchPublisher(cw, NAMESPACE, "c").publish(restarted)
        stub.assert_no_pending_responses()


def test_more_than_twenty_data_go_in_batches() -> None:
    metrics = Metrics()
    for i in range(12):  # 12 series and their 12 per-pool sums, and the heartbeat: 25 data
        metrics.inc(names.CHECKS_METRIC, {"pool": f"p{i:02}", "kind": "gate", "result": "passed"})
    with stubbed_client("cloudwatch") as lease:
        cw, stub = lease.client, lease.stub
        stub.add_response("put_metric_data", {})
        stub.add_response("put_metric_data", {})
        CloudWatchPublisher(cw, NAMESPACE, "c").publish(metrics)
        stub.assert_no_pending_responses()


def test_per_pool_sums_add_up_the_other_labels_and_gauges_go_as_values() -> None:
    metrics = Metrics()
    metrics.inc(names.CHECKS_METRIC, {"pool": "h100", "kind": "gate", "result": "failed"})
    metrics.inc(names.CHECKS_METRIC, {"pool": "h100", "kind": "idle", "result": "failed"}, 2)
    conditions: dict[Labels, float] = {
        (("condition", c), ("pool", "h100")): 1.0 for c in ("KernelReady", "StorageReady")
    }
    metrics.set_gauge(names.CONDITIONS_FALSE_METRIC, conditions)
    sent: list[dict[str, Any]] = []
    with stubbed_client("cloudwatch") as lease:
        cw, stub = lease.client, lease.stub
        lease.on("provide-client-params.cloudwatch.PutMetricData", lambda params, **_: sent.append(params))
        publisher = CloudWatchPublisher(cw, NAMESPACE, "c")
        stub.add_response("put_metric_data", {})
        stub.add_response("put_metric_data", {})
        publisher.publish(metrics)
        publisher.publish(metrics)
    values = [
        {(d["MetricName"], tuple(x["Value"] for x in d["Dimensions"][1:])): d["Value"] for d in call["MetricData"]}
        for call in sent
    ]
    assert values[0][("Checks", ("h100",))] == 3 and values[1][("Checks", ("h100",))] == 0
    assert values[0][("Checks", ("idle", "h100", "failed"))] == 2
    # the gauge's value on every publish, and its per-pool sum: what the pool's conditions alarm reads
    for sent_values in values:
        assert sent_values[("AgentConditionsFalse", ("h100",))] == 2
        assert sent_values[("AgentConditionsFalse", ("KernelReady", "h100"))] == 1


def test_a_failed_publish_sends_its_deltas_with_the_next() -> None:
    metrics = Metrics()
    metrics.inc(names.REPAIRS_HELD_METRIC, HELD)
    with stubbed_client("cloudwatch") as lease:
        cw, stub = lease.client, lease.stub
        publisher = CloudWatchPublisher(cw, NAMESPACE, "c")
        stub.add_client_error("put_metric_data", "Throttling")
        with pytest.raises(ClientError):
            publisher.publish(metrics)
        stub.add_response("put_metric_data", {}, {"Namespace": NAMESPACE, "MetricData": [heartbeat(), *held(1.0)]})
        publisher.publish(metrics)
        stub.assert_no_pending_responses()


def test_a_batch_that_fails_after_one_that_went_is_sent_again_alone() -> None:
    metrics = Metrics()
    for i in range(12):  # the heartbeat and 24 counter data: two calls
        metrics.inc(names.REPAIRS_METRIC, {"pool": f"p{i:02}", "action": "replace"})
    sent: list[dict[str, Any]] = []
    with stubbed_client("cloudwatch") as lease:
        cw, stub = lease.client, lease.stub
        lease.on("provide-client-params.cloudwatch.PutMetricData", lambda params, **_: sent.append(params))
        publisher = CloudWatchPublisher(cw, NAMESPACE, "c")
        stub.add_response("put_metric_data", {})
        stub.add_client_error("put_metric_data", "Throttling")
        with pytest.raises(ClientError):
            publisher.publish(metrics)
        stub.add_response("put_metric_data", {})
        stub.add_response("put_metric_data", {})
        publisher.publish(metrics)
        stub.assert_no_pending_responses()
    total = sum(
        d["Value"]
        for call in (sent[0], *sent[2:])  # the calls CloudWatch took
        for d in call["MetricData"]
        if d["MetricName"] == "Repairs" and len(d["Dimensions"]) == 2
    )
    assert total == 12  # each pool's one repair, once


# ------------------------------------------------------------------------------------------- an unreachable AWS
def recorded_clients(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    """A boto3 (the loop's image ships it; the test environment has botocore only) whose `client` records each
    service with the botocore Config it was asked for, and hands back botocore's client for those arguments."""
    import sys
    import types

    made: list[tuple[str, Any]] = []

    def record(service: str, **kwargs: Any) -> Any:
        made.append((service, kwargs.get("config")))
        return shared_client(service, **kwargs)

    monkeypatch.setitem(sys.modules, "boto3", types.SimpleNamespace(client=record))
    return made


def test_the_loops_aws_clients_give_up_within_seconds_not_minutes(monkeypatch: pytest.MonkeyPatch) -> None:
    # botocore's defaults (60 s to connect, 60 s to read, legacy retries) would hold a pass for minutes on an
    # unreachable endpoint: the loop's publisher and its repair clients are all bounded
    from programs.node_health import cloudwatch
    from programs.node_health.aws_calls import Boto3Calls

    made = recorded_clients(monkeypatch)
    assert cloudwatch.from_settings({"cloudWatch": {"namespace": NAMESPACE, "clusterName": "c"}}, "us-east-1")
    Boto3Calls.from_environment("us-east-1")
    assert [service for service, _ in made] == ["cloudwatch", "autoscaling", "ec2"]
    for service, config in made:
        assert config is not None, service
        assert (config.connect_timeout, config.read_timeout) == (3, 10), service
        assert config.retries == {"mode": "standard", "total_max_attempts": 2}, service


def test_an_unreachable_cloudwatch_fails_the_publish_not_the_pass() -> None:
    from botocore.exceptions import EndpointConnectionError

    from programs.node_health.checks import HealthLoop, Settings
    from programs.node_health.loop import tick
    from tests.fake_kube import FakeKube

    class Unreachable:
        def put_metric_data(self, **kwargs: Any) -> Any:
            raise EndpointConnectionError(endpoint_url="https://monitoring.us-east-1.amazonaws.com/")

    api, metrics = FakeKube(), Metrics()
    metrics.inc(names.REPAIRS_HELD_METRIC, HELD)
    settings = Settings(
        templates={},
        idle_check_seconds=None,
        max_concurrent_checks=1,
        check_timeout_seconds=60.0,
        schedule_timeout_seconds=60.0,
    )
    loop = HealthLoop(api, settings, lambda *_: None, metrics)
    publisher = CloudWatchPublisher(Unreachable(), NAMESPACE, "c")
    assert tick(loop, publisher, 1_000.0)  # the pass finished: the heartbeat is what goes missing, and pages
    # what could not be sent is still owed: the next publish that reaches CloudWatch sends the whole delta
    sent: list[dict[str, Any]] = []
    publisher._client = type("Back", (), {"put_metric_data": lambda self, **kw: sent.append(kw)})()
    publisher.publish(metrics)
    assert held(1.0)[0] in sent[0]["MetricData"]
