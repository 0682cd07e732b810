"""The loop's CloudWatch publishing against botocore's Stubber: the heartbeat on every publish, counters as deltas,
and a restarted loop (a new publisher over counters back at zero) sending its first event."""

from __future__ import annotations

from typing import Any

import botocore.session
import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber

from programs.node_health import names
from programs.node_health.cloudwatch import CloudWatchPublisher
from programs.node_health.metrics import Metrics

NAMESPACE = "GpuClusters/NodeHealth"
HELD = {"pool": "h100", "reason": "hourly-cap"}


def client() -> Any:
    return botocore.session.get_session().create_client(
        "cloudwatch", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )


def heartbeat() -> dict[str, Any]:
    return {
        "MetricName": "LoopPasses",
        "Dimensions": [{"Name": "ClusterName", "Value": "c"}],
        "Value": 1.0,
        "Unit": "Count",
    }


def held(value: float) -> dict[str, Any]:
    return {
        "MetricName": "RepairsHeld",
        "Dimensions": [
            {"Name": "ClusterName", "Value": "c"},
            {"Name": "Pool", "Value": "h100"},
            {"Name": "Reason", "Value": "hourly-cap"},
        ],
        "Value": value,
        "Unit": "Count",
    }


def test_counters_go_as_deltas_and_the_heartbeat_every_time() -> None:
    cw = client()
    metrics = Metrics()
    publisher = CloudWatchPublisher(cw, NAMESPACE, "c")
    with Stubber(cw) as stub:
        stub.add_response("put_metric_data", {}, {"Namespace": NAMESPACE, "MetricData": [heartbeat()]})
        publisher.publish(metrics)
        metrics.inc(names.REPAIRS_HELD_METRIC, HELD)
        metrics.inc(names.REPAIRS_HELD_METRIC, HELD)
        stub.add_response("put_metric_data", {}, {"Namespace": NAMESPACE, "MetricData": [heartbeat(), held(2.0)]})
        publisher.publish(metrics)
        stub.add_response("put_metric_data", {}, {"Namespace": NAMESPACE, "MetricData": [heartbeat(), held(0.0)]})
        publisher.publish(metrics)
        stub.assert_no_pending_responses()


def test_a_restarted_loop_sends_its_first_held_repair() -> None:
    cw = client()
    restarted = Metrics()
    restarted.inc(names.REPAIRS_HELD_METRIC, HELD)
    with Stubber(cw) as stub:
        stub.add_response("put_metric_data", {}, {"Namespace": NAMESPACE, "MetricData": [heartbeat(), held(1.0)]})
        CloudWatchPublisher(cw, NAMESPACE, "c").publish(restarted)
        stub.assert_no_pending_responses()


def test_more_than_twenty_data_go_in_batches() -> None:
    cw = client()
    metrics = Metrics()
    for i in range(25):
        metrics.inc(names.CHECKS_METRIC, {"pool": f"p{i:02}", "kind": "gate", "result": "passed"})
    with Stubber(cw) as stub:
        stub.add_response("put_metric_data", {})
        stub.add_response("put_metric_data", {})
        CloudWatchPublisher(cw, NAMESPACE, "c").publish(metrics)
        stub.assert_no_pending_responses()


def test_a_failed_publish_sends_its_deltas_with_the_next() -> None:
    cw = client()
    metrics = Metrics()
    metrics.inc(names.REPAIRS_HELD_METRIC, HELD)
    publisher = CloudWatchPublisher(cw, NAMESPACE, "c")
    with Stubber(cw) as stub:
        stub.add_client_error("put_metric_data", "Throttling")
        with pytest.raises(ClientError):
            publisher.publish(metrics)
        stub.add_response("put_metric_data", {}, {"Namespace": NAMESPACE, "MetricData": [heartbeat(), held(1.0)]})
        publisher.publish(metrics)
        stub.assert_no_pending_responses()
