"""The repair path's AWS calls (`programs.node_health.aws_calls.Boto3Calls`) over real botocore clients wrapped in
botocore's Stubber, for its scenarios: each call a scenario expects is queued with its exact parameters, and on
leaving `stubbed()` the calls made must be exactly the ones expected, in order.

The repair path turns any error of a call into "retried on the next pass", so a call the Stubber refuses (one not
expected, or with other parameters) would not fail a scenario by itself: every call made is recorded as the client
emits it (`provide-client-params`, before the Stubber sees it) and compared with what was expected.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from typing import Any

import botocore.session
from botocore.stub import Stubber

from programs.node_health.aws_calls import Boto3Calls

BLOCK = "cr-0123456789abcdef0"


@cache
def session() -> botocore.session.Session:
    """One session for every test that makes botocore clients: it reads each service's model once (a new session
    reads it again from disk, a tenth of a second for EC2's); each test still gets fresh clients, whose event hooks
    (and so their Stubbers) are their own."""
    return botocore.session.get_session()


def _client(service: str) -> Any:
    return session().create_client(
        service, region_name="us-west-2", aws_access_key_id="test", aws_secret_access_key="test"
    )


@dataclass
class StubbedAws:
    """The stubbed clients, the `AwsCalls` over them, and the calls expected and made (operation, parameters)."""

    aws: Boto3Calls
    autoscaling: Stubber
    ec2: Stubber
    expected: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    made: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def expect_replacement(self, instance: str) -> None:
        """`SetInstanceHealth Unhealthy` on `instance`, the grace period not respected."""
        params = {"InstanceId": instance, "HealthStatus": "Unhealthy", "ShouldRespectGracePeriod": False}
        self.autoscaling.add_response("set_instance_health", {}, params)
        self.expected.append(("SetInstanceHealth", params))

    def expect_block(self, state: str, end: datetime, available: int = 0, total: int = 2) -> None:
        """`DescribeCapacityReservations` of `BLOCK`, answering with its state, counts and end."""
        params = {"CapacityReservationIds": [BLOCK]}
        reservation = {
            "CapacityReservationId": BLOCK,
            "State": state,
            "AvailableInstanceCount": available,
            "TotalInstanceCount": total,
            "EndDate": end,
        }
        self.ec2.add_response("describe_capacity_reservations", {"CapacityReservations": [reservation]}, params)
        self.expected.append(("DescribeCapacityReservations", params))

    def record(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        self.made.append((model.name, dict(params)))


@contextmanager
def stubbed() -> Iterator[StubbedAws]:
    """Stubbed clients with nothing expected yet; on exit, the calls made are exactly the calls expected."""
    autoscaling, ec2 = _client("autoscaling"), _client("ec2")
    with Stubber(autoscaling) as asg_stub, Stubber(ec2) as ec2_stub:
        stub = StubbedAws(Boto3Calls(autoscaling, ec2), asg_stub, ec2_stub)
        for client in (autoscaling, ec2):
            client.meta.events.register("provide-client-params.*.*", stub.record)
        yield stub
        assert stub.made == stub.expected
        asg_stub.assert_no_pending_responses()
        ec2_stub.assert_no_pending_responses()
