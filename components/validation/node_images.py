"""Rules on node images and their rollout: every pool boots a pinned release, and a refresh's bounds are ones AWS
accepts."""

from __future__ import annotations

from collections.abc import Iterator

from components.errors import Problem
from components.planning.pools import refresh_healthy_percentages
from components.validation.parse import Parsed

BOTTLEROCKET_RELEASE = "cluster.bottlerocketRelease"


def bottlerocket_pools_pin_a_release(p: Parsed) -> Iterator[Problem]:
    """A Bottlerocket pool boots the release `cluster.bottlerocketRelease` names (its SSM parameter,
    components.planning.nodeadm.ami_ssm_parameter); there is no default, and without such a pool nothing reads it."""
    if p.cluster is None:
        return
    bottlerocket = [path for path, pool, _ in p.aws_pools() if pool.ami_family == "bottlerocket"]
    if bottlerocket and p.cluster.bottlerocket_release is None and BOTTLEROCKET_RELEASE not in p.damaged:
        yield Problem(
            BOTTLEROCKET_RELEASE,
            f"{bottlerocket[0]} runs Bottlerocket: pin its release, e.g. 1.42.0 "
            "(https://github.com/bottlerocket-os/bottlerocket/releases)",
        )
    if not bottlerocket and p.cluster.bottlerocket_release is not None:
        yield Problem(BOTTLEROCKET_RELEASE, "no pool has amiFamily: bottlerocket; remove it")


def refresh_bounds_are_accepted(p: Parsed) -> Iterator[Problem]:
    """An instance refresh's maximum healthy percentage is at most 100 above its minimum (EC2 Auto Scaling
    RefreshPreferences `MaxHealthyPercentage`)."""
    for path, pool, _ in p.aws_pools():
        low, high = refresh_healthy_percentages(pool)
        if high - low > 100:
            yield Problem(
                f"{path}.instanceRefresh.maxHealthyPercentage",
                f"{high} is more than 100 above minHealthyPercentage {low}; AWS refuses the refresh",
            )


RULES = (bottlerocket_pools_pin_a_release, refresh_bounds_are_accepted)
