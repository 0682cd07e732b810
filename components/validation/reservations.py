"""Rules on reserved capacity: a reservation's pool launches in its one AZ, and a Capacity Block's nodes drain before
the block ends (components.planning.reservations)."""

from __future__ import annotations

from collections.abc import Iterator

from components.clock import utc_now
from components.errors import Problem
from components.planning.drain import hook_timeout_seconds
from components.planning.reservations import pinned_to_one_zone, reservation_zone, scale_in_time
from components.validation.network import outside_the_network
from components.validation.parse import Parsed, shown


def reservations_launch_in_their_zone(p: Parsed) -> Iterator[Problem]:
    """A Capacity Block or a reservation targeted by id reserves capacity in one AZ (EC2 DescribeCapacityReservations
    `AvailabilityZone`): the pool names it (`capacity.availabilityZone`, or one `placement.availabilityZones`
    entry), the two agree, and it is one of the network's AZs."""
    for path, pool, _ in p.aws_pools():
        capacity, cpath = pool.capacity, f"{path}.capacity"
        if not pinned_to_one_zone(pool):
            if capacity.availability_zone is not None:
                yield Problem(
                    f"{cpath}.availabilityZone",
                    f"only capacity-block pools and reservation pools with reservationId read it, not {capacity.type}",
                )
            continue
        placed = pool.placement.availability_zones or []
        zone = reservation_zone(pool)
        if zone is None:
            if f"{cpath}.availabilityZone" not in p.damaged:
                yield Problem(
                    f"{cpath}.availabilityZone",
                    f"give the AZ of reservation {capacity.reservation_id} (one reservation lives in one AZ; `aws ec2 "
                    "describe-capacity-reservations --capacity-reservation-ids <id>` shows it): the pool launches "
                    "only there",
                )
            continue
        if placed and placed != [zone]:
            yield Problem(
                f"{path}.placement.availabilityZones",
                f"the reservation is in {shown(zone)}, so the pool launches only there; set [{zone}] or leave it out",
            )
        network_damaged = p.damaged_at("network.availabilityZones", "network.existingVpc")
        if p.network is not None and zone not in p.zones and not placed and not network_damaged:
            yield Problem(f"{cpath}.availabilityZone", outside_the_network(p, zone))


def capacity_blocks_drain_before_they_end(p: Parsed) -> Iterator[Problem]:
    """A Capacity Block pool gives the block's `endTime`, which must still be ahead of the moment its group goes to
    zero (EC2 terminates a block's instances from 30 minutes before its end; the EKS user guide says scale to zero
    "more than 30 minutes before", https://docs.aws.amazon.com/eks/latest/userguide/capacity-blocks.html); only the
    node termination handler drains the nodes then, so it is not `off`. Other pools have no end time."""
    nth = p.addons.node_termination_handler if p.addons is not None else None
    for path, pool, _ in p.aws_pools():
        capacity, where = pool.capacity, f"{path}.capacity.endTime"
        if capacity.type != "capacity-block":
            if capacity.end_time is not None:
                yield Problem(where, f"only capacity-block pools end; a {capacity.type} pool has no end time")
            continue
        if capacity.end_time is None:
            if where not in p.damaged:
                yield Problem(
                    where,
                    f"give the end of Capacity Block {capacity.reservation_id or '(reservationId)'} as RFC 3339 "
                    "text, e.g. 2026-12-01T11:30:00Z (`EndDate` in `aws ec2 describe-capacity-reservations`): "
                    "the pool drains to zero before it",
                )
        elif nth is not None:
            moment = scale_in_time(capacity.end_time, hook_timeout_seconds(nth.drain_timeout_seconds))
            if moment <= utc_now():
                yield Problem(
                    where,
                    f"the block's nodes had to drain from {moment:%Y-%m-%dT%H:%MZ} on and the block ends "
                    f"{capacity.end_time:%Y-%m-%dT%H:%M%z}; remove the pool, or give the new end of an extended block",
                )
        if nth is not None and nth.enabled == "off":
            yield Problem(
                f"{path}.capacity.type",
                "a Capacity Block's nodes are drained before it ends by the node termination handler; set "
                "addons.nodeTerminationHandler.enabled to auto or on",
            )


RULES = (reservations_launch_in_their_zone, capacity_blocks_drain_before_they_end)
