"""The offline monitor: answers as the SDK's mock monitor would, on the event loop's own thread."""

from __future__ import annotations

import asyncio
import gc
import inspect
import random
import threading
from typing import Any

import pulumi
import pulumi.runtime.resource as sdk_registration
import pulumi_aws as aws
import pytest
from pulumi.runtime import rpc
from pulumi.runtime.mocks import MockCallArgs, MockResourceArgs

from blueprint.plan.mocks import PlanMocks
from blueprint.plan.monitor import RecordingMonitor, _struct
from blueprint.plan.runner import contains_unknowns, run_mocked, run_offline
from components.errors import ConfigError, Problem

#: What mocks answer: plain values at every depth, with `None` at the top level and inside maps and lists.
ANSWER: dict[str, Any] = {
    "arn": "arn:aws:iam::123456789012:role/node",
    "absent": None,
    "count": 3,
    "ratio": 0.5,
    "enabled": False,
    "tags": {"team": "a", "empty": None},
    "rules": [{"port": 443, "cidr": None}, None, "text"],
    "unknown": rpc.UNKNOWN,
}


#: The SDK's own functions that a run swaps for its own (`runner._swapped`), read when the module is collected,
#: before any run.
SDK_CONTAINS_UNKNOWNS = rpc.contains_unknowns
SDK_STACK_TRACE = sdk_registration._get_stack_trace


def test_answers_are_encoded_as_the_sdks_serializer_encodes_them() -> None:
    loop = asyncio.new_event_loop()
    try:
        expected = loop.run_until_complete(rpc.serialize_properties(ANSWER, {}))
    finally:
        loop.close()
    assert _struct(ANSWER) == expected
    assert "absent" not in _struct(ANSWER)
    assert _struct(ANSWER)["rules"][1] is None


class ThreadNotingMocks(PlanMocks):
    """PlanMocks that note the thread each registration and invoke is answered on."""

    def __init__(self) -> None:
        super().__init__("us-east-1")
        self.threads: set[int] = set()

    def new_resource(self, args: MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        self.threads.add(threading.get_ident())
        return super().new_resource(args)

    def call(self, args: MockCallArgs) -> Any:
        self.threads.add(threading.get_ident())
        return super().call(args)


def two_roles() -> pulumi.Output[str]:
    zones = aws.get_availability_zones_output()
    first = aws.iam.Role("first", assume_role_policy="{}")
    second = aws.iam.Role("second", assume_role_policy=first.arn, tags={"zone": zones.names[0]})
    return second.arn


@pytest.mark.program
def test_the_monitor_answers_on_the_event_loops_thread_and_records_in_the_sdks_order() -> None:
    mocks = ThreadNotingMocks()
    monitor = RecordingMonitor(mocks)
    run_offline(two_roles, monitor, "gpu-clusters", "test", {"aws:region": "us-east-1"})
    assert mocks.threads == {threading.get_ident()}
    second = next(r for r in monitor.registrations if r.name == "second")
    assert second.inputs["assumeRolePolicy"] == "arn:aws:iam::123456789012:role/first"
    assert second.inputs["tags"] == {"zone": mocks.azs[0]}
    assert second.property_dependencies["assumeRolePolicy"] == [
        "urn:pulumi:test::gpu-clusters::pulumi:pulumi:Stack$aws:iam/role:Role::first"
    ]


@pytest.mark.program
def test_a_failing_answer_fails_the_run_and_the_next_run_starts_clean() -> None:
    def unknown_invoke() -> None:
        pulumi.runtime.invoke("aws:index/getNothing:getNothing", {})

    with pytest.raises(NotImplementedError, match=r"teach PlanMocks\.call"):
        run_mocked(unknown_invoke)
    assert [r.name for r in run_mocked(two_roles).registrations] == ["first", "second"]


@pytest.mark.program
def test_a_resource_read_by_id_is_answered_in_place() -> None:
    mocks = ThreadNotingMocks()
    read: dict[str, Any] = {}

    def program() -> pulumi.Output[None]:
        role = aws.iam.Role.get("existing", "existing-role")
        return pulumi.Output.all(role.id, role.arn).apply(lambda values: read.update(id=values[0], arn=values[1]))

    run_offline(program, RecordingMonitor(mocks), "gpu-clusters", "test", {"aws:region": "us-east-1"})
    assert mocks.threads == {threading.get_ident()}
    # the id asked for; no state, as under the SDK's monitor (a read's MockResourceArgs are not `custom`)
    assert read == {"id": "existing-role", "arn": None}


@pytest.mark.program
@pytest.mark.timeout(60)  # a read that pumped the loop from inside the last one stalled the run for good
def test_reads_made_together_complete() -> None:
    def program() -> pulumi.Output[list[Any]]:
        return pulumi.Output.all(*(aws.iam.Role.get(f"existing-{i}", f"role-{i}").id for i in range(150)))

    monitor = RecordingMonitor(PlanMocks("us-east-1"))
    run_offline(program, monitor, "gpu-clusters", "test", {"aws:region": "us-east-1"})
    assert len(monitor.resources) == 150


@pytest.mark.program
def test_a_resource_looked_up_by_urn_gets_what_was_registered_under_it() -> None:
    found: dict[str, Any] = {}

    def program() -> pulumi.Output[None]:
        first = aws.iam.Role("first", assume_role_policy="{}")

        def look_up(urn: str) -> pulumi.Output[None]:
            again = aws.iam.Role("again", opts=pulumi.ResourceOptions(urn=urn))
            return pulumi.Output.all(again.id, again.arn).apply(lambda v: found.update(id=v[0], arn=v[1]))

        return first.urn.apply(look_up)

    run_offline(program, RecordingMonitor(PlanMocks("us-east-1")), "gpu-clusters", "test", {"aws:region": "us-east-1"})
    assert found == {"id": "first", "arn": "arn:aws:iam::123456789012:role/first"}


def _nested_values(seed: int, count: int) -> list[Any]:
    """Random maps and lists of plain values, unknowns, tuples and outputs, some sharing parts or holding
    themselves, up to a few levels deep."""
    chooser = random.Random(seed)
    shared: list[Any] = [pulumi.UNKNOWN]
    leaves = ["text", 3, 0.5, None, True, pulumi.UNKNOWN, (pulumi.UNKNOWN,), pulumi.Output.from_input("x")]

    def value(depth: int) -> Any:
        kind = chooser.randrange(6 if depth < 4 else 2)
        if kind < 2:
            return chooser.choice(leaves)
        if kind == 2:
            return shared
        if kind == 3:
            return [value(depth + 1) for _ in range(chooser.randrange(4))]
        mapping = {f"k{i}": value(depth + 1) for i in range(chooser.randrange(4))}
        if chooser.random() < 0.2:
            mapping["self"] = mapping
        return mapping

    return [value(0) for _ in range(count)]


class _UnreadableAfterUnknown(dict[str, Any]):
    """A map whose `late` value cannot be read: the SDK's walk stops at the unknown before it."""

    def __getitem__(self, key: str) -> Any:
        if key == "late":
            raise LookupError(key)
        return super().__getitem__(key)


def _nested(depth: int, leaf: Any) -> Any:
    value = leaf
    for i in range(depth):
        value = {"next": value} if i % 2 else [value]
    return value


def test_the_plans_unknowns_check_answers_as_the_sdks() -> None:
    assert SDK_CONTAINS_UNKNOWNS.__module__ == rpc.__name__
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)  # `Output.from_input` needs a loop
    try:
        cases: list[Any] = [
            pulumi.UNKNOWN,
            rpc.UNKNOWN,  # the wire's marker is not an unknown value
            "text",
            {"a": [1, {"b": pulumi.UNKNOWN}]},
            {"a": (pulumi.UNKNOWN,)},  # tuples are not looked into
            [[], {}, [None]],
            pulumi.Output.from_input(pulumi.UNKNOWN),  # nor outputs
            _UnreadableAfterUnknown(early=pulumi.UNKNOWN, late=1),
            _nested(200, pulumi.UNKNOWN),
            _nested(200, "known"),
        ]
        looped: list[Any] = [1]
        looped.append(looped)
        cases += [looped, [looped, pulumi.UNKNOWN], *_nested_values(seed=7, count=400)]
        answers = [SDK_CONTAINS_UNKNOWNS(case) for case in cases]
        assert [contains_unknowns(case) for case in cases] == answers
        assert 50 < sum(answers) < len(cases) - 50  # both answers are well represented
        # where the SDK's recursion gives up, the same walk still answers
        assert contains_unknowns(_nested(5000, pulumi.UNKNOWN)) is True
    finally:
        asyncio.set_event_loop(None)
        loop.close()


@pytest.mark.program
def test_a_run_checks_unknowns_without_leaving_garbage_and_gives_the_sdk_its_own_check_back() -> None:
    during: list[object] = []

    def program() -> pulumi.Output[str]:
        during.append(rpc.contains_unknowns)
        return two_roles()

    collecting = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        run_offline(program, RecordingMonitor(PlanMocks("us-east-1")), "gpu-clusters", "test", {})
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        left = [o for o in gc.garbage if inspect.isfunction(o) and o.__qualname__.startswith("contains_unknowns.")]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if collecting:
            gc.enable()
    assert during == [contains_unknowns]
    assert (rpc.contains_unknowns, sdk_registration._get_stack_trace) == (SDK_CONTAINS_UNKNOWNS, SDK_STACK_TRACE)
    assert left == []


@pytest.mark.program
def test_a_run_that_fails_gives_the_sdk_its_functions_back() -> None:
    def program() -> None:
        aws.iam.Role("first", assume_role_policy="{}")
        raise ConfigError([Problem("cluster.name", "missing")])

    with pytest.raises(ConfigError):
        run_offline(program, RecordingMonitor(PlanMocks("us-east-1")), "gpu-clusters", "test", {})
    assert (rpc.contains_unknowns, sdk_registration._get_stack_trace) == (SDK_CONTAINS_UNKNOWNS, SDK_STACK_TRACE)
