"""DCGM's level-4 diagnostic runs with the node's DCGM exporter paused.

The exporter embeds a DCGM host engine that keeps watching the GPUs, and NVIDIA's extended diagnostics must not run
beside other GPU clients ([DCGMDIAG]). The stack's exporter DaemonSets stay off a node whose
`nvidia.com/gpu.deploy.dcgm-exporter` label reads a pause value (`components.planning.addons.monitoring.NOT_PAUSED`),
so the check sets the label to `paused-for-diagnostic`, waits for the exporter pod to leave, and restores the label's
previous value (or removes it) afterwards, also when the run fails or times out. The Container Insights exporter's
placement is the add-on's own and cannot be paused this way. Why: docs/design-notes.md#verify-dcgm.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from blueprint.verify.context import Context, node_name
from blueprint.verify.daemons import daemonset_owner
from blueprint.verify.expectations import PROMETHEUS_EXPORTER_DAEMONSETS, Daemon, PoolExpectation
from blueprint.verify.pods import POLL_SECONDS
from components.planning.mig import DCGM_EXPORTER_DEPLOY_LABEL, DEPLOY_PAUSED_FOR_DIAGNOSTIC

#: Seconds the exporter pods get to leave once their nodes are labelled: the DaemonSet controller deletes a pod
#: whose node stops matching at once, and the pod's own grace period is the chart's default of 30 s.
LEAVE_SECONDS = 300.0


def prometheus_exporter(pool: PoolExpectation) -> Daemon | None:
    """The stack's own exporter DaemonSet on the pool, if any (the one the deploy label pauses)."""
    return next((d for d in pool.daemons if d.names == PROMETHEUS_EXPORTER_DAEMONSETS), None)


def _still_on(ctx: Context, exporter: Daemon, nodes: set[str]) -> set[str]:
    pods = ctx.api.list_pods(exporter.namespace)
    return {
        str(p.get("spec", {}).get("nodeName"))
        for p in pods
        if daemonset_owner(p) in exporter.names and p.get("spec", {}).get("nodeName") in nodes
    }


def _wait_gone(ctx: Context, exporter: Daemon, nodes: set[str]) -> set[str]:
    """The nodes whose exporter pod is still there after `LEAVE_SECONDS`."""
    start = ctx.session.clock()
    while True:
        left = _still_on(ctx, exporter, nodes)
        if not left or ctx.session.clock() - start >= LEAVE_SECONDS:
            return left
        ctx.session.sleep(POLL_SECONDS)


@contextmanager
def exporters_paused(ctx: Context, pool: PoolExpectation, nodes: list[dict[str, Any]]) -> Iterator[dict[str, str]]:
    """Pause the pool's exporter on `nodes` for the block; yields, per node whose exporter did not leave, why (the
    diagnostic is not run there). Every label set is restored on the way out."""
    exporter = prometheus_exporter(pool)
    if exporter is None or not nodes:
        yield {}
        return
    previous = {node_name(n): (n["metadata"].get("labels") or {}).get(DCGM_EXPORTER_DEPLOY_LABEL) for n in nodes}
    paused: list[str] = []
    try:
        for name in previous:
            ctx.api.label_node(name, DCGM_EXPORTER_DEPLOY_LABEL, DEPLOY_PAUSED_FOR_DIAGNOSTIC)
            paused.append(name)
        stuck = _wait_gone(ctx, exporter, set(previous))
        yield {
            name: f"the DCGM exporter ({exporter.namespace}) did not leave the node within {LEAVE_SECONDS:g}s of "
            f"{DCGM_EXPORTER_DEPLOY_LABEL}={DEPLOY_PAUSED_FOR_DIAGNOSTIC}: level 4 not run beside it"
            for name in sorted(stuck)
        }
    finally:
        for name in paused:
            ctx.api.label_node(name, DCGM_EXPORTER_DEPLOY_LABEL, previous[name])
