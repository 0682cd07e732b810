"""What a check reports: one `Result` per thing it looked at (a pool, a node, a claim)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Status = Literal["pass", "fail", "skip", "error"]

#: Every check, in the order the runner runs them: the cheap API reads first, then the test pods.
CHECKS: tuple[str, ...] = (
    "nodes",
    "allocatable",
    "daemons",
    "conditions",
    "drivers",
    "topology",
    "dcgm",
    "nccl",
    "storage",
)
#: Checks that start pods on GPU nodes (minutes, and they hold GPUs while they run): `--skip` these for a quick look.
HEAVY_CHECKS: tuple[str, ...] = ("topology", "dcgm", "nccl", "storage")


@dataclass(frozen=True)
class Result:
    """One verdict. `measured` and `expected` carry the figures compared (None when nothing was measured)."""

    check: str
    target: str
    status: Status
    detail: str
    measured: Any = None
    expected: Any = None
    #: Nodes this result blames (DCGM failures, nodes not Ready): what `--cordon-failed` cordons.
    nodes: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "target": self.target,
            "status": self.status,
            "detail": self.detail,
            "measured": self.measured,
            "expected": self.expected,
            "nodes": list(self.nodes),
        }


class PodsStopped(Exception):
    """Test pods did not get where a check needs them (timed out, never started, a worker ended): the check reports
    `error` for the pool or file system concerned, with this message, and keeps the results it already has."""


class CheckTimeout(PodsStopped):
    """Test pods ran out of their budget: too long to start (`--pull-timeout`) or to run (`--timeout`)."""


class PodNotRunning(PodsStopped):
    """A test pod that can never start (its image cannot be pulled, no node can take it) or a worker that ended while
    others needed it: the wait ends at once with the reason, not at the timeout."""
