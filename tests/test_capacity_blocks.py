"""Reserved capacity: a reservation's pool launches only in the reservation's AZ, and a Capacity Block's nodes are
drained before the block ends (a scheduled scale-to-zero whose terminations pass the drain hook)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from blueprint.plan.runner import PLAN_TIME, ProgramRun
from components import clock
from components.config import StackConfig
from components.errors import ConfigError
from components.node_pool import NodePool
from components.planning.reservations import scale_in_lead, scale_in_time
from components.planning.stack_plan import plan_pools
from tests.builders import SYSTEM_POOL, TRAINING_POOL, asg_name, pool, run_addons, run_with_context, stack_config

SCHEDULE = "aws:autoscaling/schedule:Schedule"
RULE = "aws:cloudwatch/eventRule:EventRule"
BLOCK_ID = "cr-0123456789abcdef0"
END = "2030-03-01T11:30:00Z"
#: The training pool with no AZ of its own: a reserved pool takes its reservation's.
UNPLACED = {key: value for key, value in TRAINING_POOL.items() if key != "placement"}


def block(**capacity: Any) -> dict[str, Any]:
    """The training pool (p5.48xlarge) on a Capacity Block ending at END, in us-east-1b unless told otherwise."""
    fields = {"type": "capacity-block", "reservationId": BLOCK_ID, "availabilityZone": "us-east-1b", "endTime": END}
    return {**UNPLACED, "capacity": {**fields, **capacity}}


def problems(*pools: dict[str, Any], **sections: Any) -> dict[str, str]:
    """{path: message} of what validation refuses (empty when the stack is valid)."""
    try:
        with clock.pinned(PLAN_TIME):
            stack_config(*pools, validated=True, **sections)
    except ConfigError as error:
        return {p.path: p.message for p in error.problems}
    return {}


# ----------------------------------------------------------------------------------------------- the reservation AZ
def test_a_block_pool_launches_only_in_the_reservation_zone():
    """EFA pools default to the network's first AZ (us-east-1a); the block is in us-east-1b, so the pool is too."""
    spec = stack_config(SYSTEM_POOL, block())
    (plan,) = [p for p in plan_pools(spec) if p.name == "h100"]
    assert plan.availability_zones == ("us-east-1b",)


def test_the_zone_may_come_from_a_single_placement_zone():
    capacity = {"type": "capacity-block", "reservationId": BLOCK_ID, "endTime": END}
    placed = pool(UNPLACED, capacity=capacity, placement={"availabilityZones": ["us-east-1b"]})
    assert problems(SYSTEM_POOL, placed) == {}
    assert [p.availability_zones for p in plan_pools(stack_config(SYSTEM_POOL, placed))][1] == ("us-east-1b",)


@pytest.mark.parametrize(
    ("changes", "path", "fragment"),
    [
        ({"availabilityZone": None}, "nodePools[1] (h100).capacity.availabilityZone", "give the AZ of reservation"),
        (
            {"availabilityZone": "us-east-1d"},
            "nodePools[1] (h100).capacity.availabilityZone",
            "not one of the network's AZs",
        ),
    ],
)
def test_a_block_without_its_zone_or_outside_the_network_is_refused(changes, path, fragment):
    capacity = {k: v for k, v in {**block()["capacity"], **changes}.items() if v is not None}
    found = problems(SYSTEM_POOL, pool(UNPLACED, capacity=capacity))
    assert fragment in found[path]


def test_a_placement_that_disagrees_with_the_reservation_is_refused():
    placed = pool(block(), placement={"availabilityZones": ["us-east-1a"]})
    assert (
        "the reservation is in 'us-east-1b'"
        in problems(SYSTEM_POOL, placed)["nodePools[1] (h100).placement.availabilityZones"]
    )


def test_a_reservation_by_id_is_pinned_too_but_a_resource_group_is_not():
    by_id = pool(UNPLACED, capacity={"type": "reservation", "reservationId": BLOCK_ID})
    assert "give the AZ" in problems(SYSTEM_POOL, by_id)["nodePools[1] (h100).capacity.availabilityZone"]
    arn = "arn:aws:resource-groups:us-east-1:123456789012:group/gpus"
    group = pool(TRAINING_POOL, capacity={"type": "reservation", "reservationResourceGroupArn": arn})
    assert problems(SYSTEM_POOL, group) == {}
    on_demand = pool(TRAINING_POOL, capacity={"type": "on-demand", "availabilityZone": "us-east-1a"})
    assert "not on-demand" in problems(SYSTEM_POOL, on_demand)["nodePools[1] (h100).capacity.availabilityZone"]


# ------------------------------------------------------------------------------------------------- the block's end
@pytest.mark.program
def test_the_pool_goes_to_zero_an_hour_before_the_end_by_default():
    """EC2 terminates from 30 minutes before the end; the 12-minute hook (600 s drain + 2 min) and 15 minutes of
    slack fit in the one-hour minimum, so the scheduled action fires at 10:30 for an 11:30 end."""
    (_, plan) = plan_pools(stack_config(SYSTEM_POOL, block()))
    assert plan.scale_to_zero_at == datetime(2030, 3, 1, 10, 30, tzinfo=UTC)
    (schedule,) = build(stack_config(SYSTEM_POOL, block())).of_type(SCHEDULE)
    assert schedule.inputs["recurrence"] == "30 10 1 3 *"
    assert schedule.inputs["timeZone"] == "Etc/UTC"
    assert (schedule.inputs["minSize"], schedule.inputs["maxSize"], schedule.inputs["desiredCapacity"]) == (0, 0, 0)
    assert schedule.inputs["autoscalingGroupName"] == "demo-h100"


@pytest.mark.program
def test_the_scale_in_survives_its_first_run_and_never_sends_a_past_start_time():
    """AWS deletes a one-time action after it runs, and refuses to recreate one whose start time has passed: the
    action recurs (yearly, at the scale-in minute) and leaves its start time to AWS."""
    (schedule,) = build(stack_config(SYSTEM_POOL, block())).of_type(SCHEDULE)
    assert "startTime" not in schedule.inputs and "endTime" not in schedule.inputs
    assert schedule.inputs["recurrence"]


@pytest.mark.program
def test_the_next_block_replaces_the_action_instead_of_updating_it():
    """The scale-in moment is in the action's name (a new name replaces the action), so an update never resends the
    start time AWS computed for the old block."""
    first, second = (
        build(stack_config(SYSTEM_POOL, block(endTime=end))).one(SCHEDULE).inputs
        for end in (END, "2030-04-02T07:05:00Z")
    )
    assert first["scheduledActionName"].endswith("-capacity-block-end-20300301T1030Z")
    assert second["scheduledActionName"].endswith("-capacity-block-end-20300402T0605Z")
    assert second["recurrence"] == "5 6 2 4 *"


def test_a_longer_drain_moves_the_scale_in_earlier():
    """A 1-hour drain: 30 min + 62 min hook + 15 min = 1 h 47 min before the end."""
    assert scale_in_lead(3720).total_seconds() == (30 + 62 + 15) * 60
    end = datetime(2030, 3, 1, 11, 30, tzinfo=UTC)
    assert scale_in_time(end, 3720) == datetime(2030, 3, 1, 9, 43, tzinfo=UTC)


@pytest.mark.program
def test_only_block_pools_get_a_schedule():
    assert build(stack_config(SYSTEM_POOL, TRAINING_POOL)).of_type(SCHEDULE) == []


@pytest.mark.parametrize(
    ("capacity", "fragment"),
    [
        ({"endTime": None}, "give the end of Capacity Block cr-0123456789abcdef0"),
        ({"endTime": "2024-12-31T23:00:00Z"}, "remove the pool, or give the new end of an extended block"),
    ],
)
def test_a_block_without_an_end_or_already_draining_is_refused(capacity, fragment):
    fields = {k: v for k, v in {**block()["capacity"], **capacity}.items() if v is not None}
    found = problems(SYSTEM_POOL, pool(UNPLACED, capacity=fields))
    assert fragment in found["nodePools[1] (h100).capacity.endTime"]


@pytest.mark.parametrize("end", ["2030-03-01T11:30:00", "1893497400", 1893497400])
def test_an_end_without_an_offset_or_as_a_number_is_refused(end):
    found = problems(SYSTEM_POOL, block(endTime=end))
    assert "nodePools[1] (h100).capacity.endTime" in found


def test_an_end_time_on_another_capacity_type_is_refused():
    spot = pool(TRAINING_POOL, capacity={"type": "on-demand", "endTime": END})
    assert "has no end time" in problems(SYSTEM_POOL, spot)["nodePools[1] (h100).capacity.endTime"]


def test_a_block_needs_the_handler_that_drains_it():
    found = problems(SYSTEM_POOL, block(), addons={"nodeTerminationHandler": {"enabled": "off"}})
    assert "node termination handler" in found["nodePools[1] (h100).capacity.type"]


@pytest.mark.program
def test_the_expiry_warning_is_routed_nowhere_the_hook_carries_the_drain():
    """The handler drops the Capacity Block expiration warning (it knows three aws.ec2 detail types and the event
    names a reservation): no rule sends it to the queue, while the block's group is hooked like every other."""
    spec = stack_config(SYSTEM_POOL, block())
    run = run_addons(spec)
    detail_types = {t for r in run.of_type(RULE) for t in json.loads(r.inputs["eventPattern"])["detail-type"]}
    assert not any(t.startswith("Capacity Block") for t in detail_types)
    hooked = {h.inputs["autoscalingGroupName"] for h in run.of_type("aws:autoscaling/lifecycleHook:LifecycleHook")}
    assert asg_name(spec, "h100") in hooked


def build(spec: StackConfig) -> ProgramRun:
    """The stack's node pools, under mocks (each named `<cluster>-<pool>`, as the cluster names them)."""
    return run_with_context(
        spec, lambda ctx: [NodePool(f"{spec.cluster.name}-{p.name}", p, ctx) for p in plan_pools(spec)]
    )
