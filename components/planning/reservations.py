"""Reserved capacity: where a reservation's instances can launch, and when a Capacity Block's nodes must be drained.

Invariants: a pool targeting one reservation launches only in its Availability Zone; a Capacity Block pool is scaled
to zero by a scheduled action early enough that every node drains through its terminate hook before EC2 terminates
from 30 minutes before the end. Why and sources: docs/design-notes.md#reserved-capacity-and-capacity-block-ends; the
user view: docs/node-pools.md#after-the-block.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from components.config import NodePool

#: Capacity types whose instances AWS places itself: a capacity block or reservation is already a fixed set of hosts,
#: and forcing a cluster placement group on it fails with InsufficientInstanceCapacity (terraform-aws-eks PR #3730,
#: eksctl #7949, aws-gpu-facts.md §2 "Placement / AZ").
RESERVED_CAPACITY_TYPES = ("capacity-block", "reservation")
#: EC2 starts terminating a Capacity Block's instances this long before the block ends.
EC2_TERMINATES_BEFORE_END = timedelta(minutes=30)
#: Time for the scheduled action to fire and the group to start its terminations (scheduled actions run "within
#: minutes" of their start time, not to the second).
SCHEDULE_SLACK = timedelta(minutes=15)
#: Never less than an hour ahead: the 40-minute warning is then still a backstop, not the plan.
MINIMUM_LEAD = timedelta(hours=1)


def pinned_to_one_zone(pool: NodePool) -> bool:
    """Capacity blocks and reservations targeted by id launch in the reservation's one AZ."""
    capacity = pool.capacity
    return capacity.type == "capacity-block" or (capacity.type == "reservation" and bool(capacity.reservation_id))


def reservation_zone(pool: NodePool) -> str | None:
    """The reservation's AZ: `capacity.availabilityZone`, or the pool's one placement AZ when that is left out."""
    if not pinned_to_one_zone(pool):
        return None
    if pool.capacity.availability_zone:
        return pool.capacity.availability_zone
    zones = pool.placement.availability_zones or []
    return zones[0] if len(zones) == 1 else None


def scale_in_lead(hook_timeout_seconds: int) -> timedelta:
    """How long before a block's end its pool goes to zero: EC2's 30 minutes, plus the longest a terminate hook
    holds a node for its drain, plus the scheduled action's slack; at least an hour."""
    lead = EC2_TERMINATES_BEFORE_END + timedelta(seconds=hook_timeout_seconds) + SCHEDULE_SLACK
    return max(lead, MINIMUM_LEAD)


def scale_in_time(end_time: datetime, hook_timeout_seconds: int) -> datetime:
    """When a Capacity Block pool's group is set to zero, in UTC, to the minute."""
    moment = end_time.astimezone(UTC) - scale_in_lead(hook_timeout_seconds)
    return moment.replace(second=0, microsecond=0)


#: The time zone of the scale-in's cron expression. EC2 Auto Scaling reads a recurrence in UTC unless the action
#: names an IANA zone; naming UTC keeps the expression and `scale_in_time` in the same clock [ASGSCHED].
SCHEDULE_TIME_ZONE = "Etc/UTC"


def yearly_recurrence(moment: datetime) -> str:
    """The scale-in as a recurring scheduled action: a five-field Unix cron expression (`minute hour day-of-month
    month day-of-week`) that fires at `moment`'s minute, hour, day and month, every year, in UTC [ASGSCHED].

    Recurring, not one-time, because EC2 Auto Scaling deletes a one-time action once it has run
    (DescribeScheduledActions lists only actions "that haven't run or that have not reached their end time"). A
    deleted action drifts from the stack's state: destroying it then fails with "Scheduled action name not found",
    and a refresh followed by `up` recreates it with its start time, now past, which AWS refuses ("Given start time
    is in the past") [ASGSCHED]. A recurring action without a start time stays in the account; AWS computes its next
    run from the expression, so the stack never sends a past one. It fires again a year later only on a stack left
    unchanged that long, whose block has long expired and can launch nothing. The day of the week is `*`: in cron a
    restricted day of the month and day of the week match either, not both."""
    utc = moment.astimezone(UTC)
    return f"{utc.minute} {utc.hour} {utc.day} {utc.month} *"


def schedule_name_suffix(moment: datetime) -> str:
    """The scale-in moment in the scheduled action's name (`20261215T1030Z`): a new block end names a new action, so
    the stack replaces the action instead of updating it, and an update never resends the old action's start time,
    which AWS computed and would now refuse as past [ASGSCHED]."""
    return moment.astimezone(UTC).strftime("%Y%m%dT%H%MZ")
