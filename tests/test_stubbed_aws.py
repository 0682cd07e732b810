"""The shared stubbed clients (tests/stubbed_aws.py): whatever one test leaves on a lent client, queued answers, its
own handlers or a raised error, the next lease of that client sees none of it; and a client is shared only between
requests for the same service, Region and settings."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from botocore.stub import UnStubbedResponseError

from tests.stubbed_aws import shared_client, stubbed_client

DATUM = {"Namespace": "N", "MetricData": [{"MetricName": "M", "Value": 1.0}]}


def test_a_lease_that_raises_with_answers_queued_leaves_the_client_bare() -> None:
    seen: list[dict[str, Any]] = []
    with pytest.raises(RuntimeError, match="mid-way"), stubbed_client("cloudwatch") as lease:
        lease.on("provide-client-params.cloudwatch.PutMetricData", lambda params, **_: seen.append(params))
        lease.stub.add_response("put_metric_data", {})
        lease.stub.add_client_error("put_metric_data", "Throttling")
        raise RuntimeError("mid-way")
    with stubbed_client("cloudwatch") as lease:
        with pytest.raises(UnStubbedResponseError):  # the first lease's answers are gone with its Stubber
            lease.client.put_metric_data(**DATUM)
        lease.stub.add_response("put_metric_data", {}, DATUM)
        lease.client.put_metric_data(**DATUM)  # this lease's Stubber answers, not the first one's
    assert seen == []  # the first lease's handler came off the client


def test_a_lease_with_answers_left_fails_and_still_gives_the_client_back() -> None:
    with pytest.raises(AssertionError, match="1 responses remaining"), stubbed_client("cloudwatch") as lease:
        lease.stub.add_response("put_metric_data", {})
    with stubbed_client("cloudwatch") as lease:
        lease.stub.add_client_error("put_metric_data", "Throttling")
        with pytest.raises(ClientError, match="Throttling"):
            lease.client.put_metric_data(**DATUM)


def test_one_lease_of_a_client_at_a_time() -> None:
    # a second Stubber on the client would register under the first one's unique ids, that is not at all
    with stubbed_client("cloudwatch"), pytest.raises(RuntimeError, match="already lent"), stubbed_client("cloudwatch"):
        pass
    with stubbed_client("cloudwatch", "us-east-1"), stubbed_client("cloudwatch", "eu-west-1") as other:
        assert other.client.meta.region_name == "eu-west-1"


def test_clients_are_shared_only_for_the_same_service_region_and_settings() -> None:
    bounded = {"connect_timeout": 3, "retries": {"mode": "standard", "total_max_attempts": 2}}
    one = shared_client("cloudwatch", config=Config(**bounded))
    assert shared_client("cloudwatch", config=Config(**bounded)) is one
    assert one.meta.config.connect_timeout == 3
    assert shared_client("cloudwatch") is not one
    assert shared_client("cloudwatch", config=Config(**{**bounded, "connect_timeout": 4})) is not one
    assert shared_client("cloudwatch", config=Config(**{**bounded, "retries": {"mode": "legacy"}})) is not one
    assert shared_client("cloudwatch", "eu-west-1", config=Config(**bounded)) is not one
    assert shared_client("cloudwatch", endpoint_url="http://127.0.0.1:1", config=Config(**bounded)) is not one
