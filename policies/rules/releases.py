"""Helm releases as the policies see them: a release's chart name, the releases of one chart in a stack (and the
violation when pools need one and it is missing), and the pool taints a release's tolerations leave out.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping

from components.planning.tolerations import tolerates
from policies.resources import (
    HELM_TYPES,
    Resource,
    Stack,
    get,
    items,
)
from policies.rules.deployed_pools import Pool
from policies.rules.signatures import StackViolations


def chart_name(release: Resource) -> str:
    """A release's chart name without repository or OCI path (`oci://.../aws-node-termination-handler`)."""
    return str(release.get("chart", default="")).rstrip("/").rsplit("/", 1)[-1]


def helm_releases(stack: Stack, chart: str) -> list[Resource]:
    return [r for r in stack.of_type(HELM_TYPES) if chart_name(r) == chart]


def required_releases(
    stack: Stack, chart: str, pools: list[Pool], kind: str
) -> Generator[tuple[str, str | None], None, list[Resource]]:
    """The stack's releases of `chart` (`releases = yield from ...`); none while `pools` need it is one violation, on
    the first pool's Auto Scaling group."""
    releases = helm_releases(stack, chart)
    if pools and not releases:
        yield (f"{kind} pools {[p.name for p in pools]} but no {chart} Helm release", pools[0].asg.urn)
    return releases


def untolerated(
    pools: list[Pool], releases: list[Resource], defaults: tuple[Mapping[str, str], ...]
) -> StackViolations:
    """Each NoSchedule/NoExecute taint of `pools` that a release does not tolerate, with the chart's `defaults`
    standing in for a release that sets no `tolerations` (Helm replaces lists, it does not merge them)."""
    for release in releases:
        values = release.get("values", default={})
        tolerations = items(get(values, "tolerations")) if get(values, "tolerations") is not None else list(defaults)
        for pool in pools:
            for taint in pool.taints:
                if taint.effect in ("NoSchedule", "NoExecute") and not tolerates(tolerations, taint):
                    yield (
                        f"Helm release '{release.name}' ({chart_name(release)}) does not tolerate taint {taint} "
                        f"of pool '{pool.name}', so it never runs there",
                        release.urn,
                    )
