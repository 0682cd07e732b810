"""Stubbed AWS for the tests: one botocore client per (service, Region, config) for the whole test session, lent to
one test at a time under a fresh `Stubber` (`stubbed_client`), and over those the repair path's AWS calls
(`programs.node_health.aws_calls.Boto3Calls`) for its scenarios (`stubbed`).

Why a client may be shared: making one costs tens of milliseconds (EC2's class gets a method for each of its
operations), and a call its Stubber answers changes nothing on it but through its event handlers. The Stubber's
`before-call` handler returns the response, so `BaseClient._make_api_call` (botocore `client.py`) skips
`_make_request`: no endpoint, retry handler, signer or HTTP pool is reached. A lease registers the Stubber's handlers
and the test's own (`Lease.on`) on the client's events and unregisters every one of them on leaving, whether the test
passed, failed or raised with answers still queued; the next lease starts with a new Stubber and an empty queue.
One lease per client at a time: the Stubber registers under fixed `unique_id`s, so a second active Stubber on the
same client would be silently ignored (botocore `hooks.py`, `HierarchicalEmitter._register_section`).

The repair path turns any error of a call into "retried on the next pass", so a call the Stubber refuses (one not
expected, or with other parameters) would not fail a scenario by itself: every call made is recorded as the client
emits it (`provide-client-params`, before the Stubber sees it) and compared with what was expected.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from typing import Any

import botocore.session
from botocore.config import Config
from botocore.stub import Stubber

from programs.node_health.aws_calls import Boto3Calls

BLOCK = "cr-0123456789abcdef0"
#: The Region of every stubbed client unless a test names another.
REGION = "us-east-1"


@cache
def session() -> botocore.session.Session:
    """One session for every client the tests make: it reads each service's model once (a new session reads it
    again from disk, a tenth of a second for EC2's)."""
    return botocore.session.get_session()


_clients: dict[tuple[str, str, str | None, tuple[tuple[str, str], ...]], Any] = {}
_leased: set[int] = set()


def _config_key(config: Config | None) -> tuple[tuple[str, str], ...]:
    """Every option of `config` (retries, timeouts, endpoint and signing settings...), so two clients are one only
    when they were asked for with the same settings."""
    if config is None:
        return ()
    return tuple((name, repr(getattr(config, name))) for name in sorted(Config.OPTION_DEFAULTS))


def shared_client(
    service: str, region_name: str | None = REGION, config: Config | None = None, endpoint_url: str | None = None
) -> Any:
    """The session's client for `service` in `region_name` with `config` and `endpoint_url`, made on first use.
    Tests that make calls take it through `stubbed_client`; one that only looks at how a client was asked for may
    take it here."""
    key = (service, region_name or "", endpoint_url, _config_key(config))
    if key not in _clients:
        _clients[key] = session().create_client(
            service,
            region_name=region_name,
            endpoint_url=endpoint_url,
            config=config,
            aws_access_key_id="test",
            aws_secret_access_key="test",
        )
    return _clients[key]


@dataclass
class Lease:
    """A shared client lent to one test: its Stubber, and the handlers the test added (removed on return)."""

    stub: Stubber
    handlers: list[tuple[str, Callable[..., Any]]] = field(default_factory=list)

    @property
    def client(self) -> Any:
        return self.stub.client

    def on(self, event: str, handler: Callable[..., Any]) -> None:
        """Register `handler` on the client's `event` for this lease only."""
        self.client.meta.events.register(event, handler)
        self.handlers.append((event, handler))


@contextmanager
def stubbed_client(service: str, region: str = REGION) -> Iterator[Lease]:
    """The shared client under a new active Stubber; on a normal exit every queued answer must have been used. On
    any exit the Stubber and the test's handlers come off the client."""
    client = shared_client(service, region)
    if id(client) in _leased:
        raise RuntimeError(f"the {service} client in {region} is already lent: one Stubber per client at a time")
    lease = Lease(Stubber(client))
    lease.stub.activate()
    _leased.add(id(client))
    try:
        yield lease
        lease.stub.assert_no_pending_responses()
    finally:
        for event, handler in lease.handlers:
            client.meta.events.unregister(event, handler)
        lease.stub.deactivate()
        _leased.discard(id(client))


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
    with stubbed_client("autoscaling") as autoscaling, stubbed_client("ec2") as ec2:
        stub = StubbedAws(Boto3Calls(autoscaling.client, ec2.client), autoscaling.stub, ec2.stub)
        for lease in (autoscaling, ec2):
            lease.on("provide-client-params.*.*", stub.record)
        yield stub
        assert stub.made == stub.expected
