"""The AWS calls of the repair path, as a protocol and its boto3 implementation: mark an instance unhealthy so its
Auto Scaling group replaces it, and read a Capacity Block's state before taking one of its nodes.

The implementation takes ready clients, so tests hand it botocore clients wrapped in botocore's Stubber and the
cluster hands it boto3's (`from_environment`, credentials from EKS Pod Identity). docs/operations.md, "Repair",
says why each call is made; docs/security.md the role that allows exactly these.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol


@dataclass(frozen=True)
class CapacityBlock:
    """What DescribeCapacityReservations says about a block: its state (`active`, `expired`, ...), how many of its
    instances are free to launch, how many it holds, and when it ends."""

    reservation_id: str
    state: str
    available: int
    total: int
    end: datetime | None


class AwsCalls(Protocol):
    """The calls the repair path makes; nothing else."""

    def mark_unhealthy(self, instance_id: str) -> None: ...
    def capacity_block(self, reservation_id: str) -> CapacityBlock | None: ...


#: Every AWS client of the loop answers or fails within seconds: the loop is one thread, so a call that hangs on an
#: unreachable endpoint (a link outage) would hold up the pass, the gate and every other repair. botocore's defaults
#: are a 60 s connect and a 60 s read timeout, tried up to 5 times in its legacy retry mode ([BOTOCFG]); here 2
#: attempts of at most 3 s to connect and 10 s to read, and what failed is tried again on the next pass.
CLIENT_TIMEOUTS: dict[str, Any] = {
    "connect_timeout": 3,
    "read_timeout": 10,
    "retries": {"mode": "standard", "total_max_attempts": 2},
}


def client(service: str, region: str | None) -> Any:
    """A boto3 client for `service` with `CLIENT_TIMEOUTS` (credentials from the pod's Pod Identity)."""
    import boto3
    from botocore.config import Config

    return boto3.client(service, region_name=region, config=Config(**CLIENT_TIMEOUTS))


class AwsError(Exception):
    """An AWS call failed; the repair is retried on the next pass."""


class Boto3Calls:
    """`AwsCalls` over an Auto Scaling and an EC2 client."""

    def __init__(self, autoscaling: Any, ec2: Any) -> None:
        self.autoscaling = autoscaling
        self.ec2 = ec2

    @classmethod
    def from_environment(cls, region: str | None = None) -> Boto3Calls:
        """Clients from the pod's environment: Pod Identity's credentials (EKS sets only
        `AWS_CONTAINER_CREDENTIALS_FULL_URI` and `AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE`), and the region from
        `region` or the `AWS_REGION` the Deployment sets; each call bounded by `CLIENT_TIMEOUTS`."""
        return cls(client("autoscaling", region), client("ec2", region))

    def mark_unhealthy(self, instance_id: str) -> None:
        """SetInstanceHealth Unhealthy: the group terminates the instance (its terminate lifecycle hook, the node
        termination handler's, still runs) and launches a replacement. The grace period is not respected: a gate
        fails within the group's health check grace period of a new instance, which would otherwise ignore it."""
        try:
            self.autoscaling.set_instance_health(
                InstanceId=instance_id, HealthStatus="Unhealthy", ShouldRespectGracePeriod=False
            )
        except Exception as error:  # botocore's ClientError and connection errors alike
            raise AwsError(f"SetInstanceHealth {instance_id}: {error}") from error

    def capacity_block(self, reservation_id: str) -> CapacityBlock | None:
        """The block's state, free and total instance counts and end, or None when EC2 does not know it."""
        try:
            answer = self.ec2.describe_capacity_reservations(CapacityReservationIds=[reservation_id])
        except Exception as error:
            raise AwsError(f"DescribeCapacityReservations {reservation_id}: {error}") from error
        for reservation in answer.get("CapacityReservations", []):
            if reservation.get("CapacityReservationId") == reservation_id:
                return CapacityBlock(
                    reservation_id=reservation_id,
                    state=str(reservation.get("State", "")),
                    available=int(reservation.get("AvailableInstanceCount", 0)),
                    total=int(reservation.get("TotalInstanceCount", 0)),
                    end=reservation.get("EndDate"),
                )
        return None
