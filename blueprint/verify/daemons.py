"""Check `daemons`: the NVIDIA device plugin, the EFA device plugin and the GPU metrics exporter each have a Ready
pod on every node that needs one (`expectations.PoolExpectation.daemons`).

Pods are matched to their DaemonSet by owner reference (kind DaemonSet, the name the stack's release gives it) in
the namespace the stack deploys it to, not by chart labels, which differ from chart to chart.
"""

from __future__ import annotations

from typing import Any

from blueprint.verify.context import Context, node_name
from blueprint.verify.model import Result

CHECK = "daemons"


def daemonset_owner(pod: dict[str, Any]) -> str | None:
    for ref in pod.get("metadata", {}).get("ownerReferences") or []:
        if ref.get("kind") == "DaemonSet":
            return str(ref.get("name"))
    return None


def _ready(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    containers = status.get("containerStatuses") or []
    return status.get("phase") == "Running" and bool(containers) and all(c.get("ready") for c in containers)


def check(ctx: Context) -> list[Result]:
    pods_by_namespace: dict[str, list[dict[str, Any]]] = {}
    results: list[Result] = []
    for pool in ctx.expect.pools:
        if not pool.daemons:
            continue
        for namespace in {d.namespace for d in pool.daemons} - set(pods_by_namespace):
            pods_by_namespace[namespace] = ctx.api.list_pods(namespace)
        for node in ctx.pool_nodes(pool):
            name = node_name(node)
            missing = []
            for daemon in pool.daemons:
                running = [
                    p
                    for p in pods_by_namespace[daemon.namespace]
                    if daemonset_owner(p) in daemon.names and p.get("spec", {}).get("nodeName") == name and _ready(p)
                ]
                if not running:
                    missing.append(f"{daemon.what} ({daemon.namespace}/{' or '.join(daemon.names)})")
            detail = (
                "no Ready pod of " + ", ".join(missing)
                if missing
                else ", ".join(d.what for d in pool.daemons) + " running"
            )
            results.append(
                Result(
                    CHECK,
                    f"{pool.name}/{name}",
                    "fail" if missing else "pass",
                    detail,
                    nodes=(name,) if missing else (),
                )
            )
    return results
