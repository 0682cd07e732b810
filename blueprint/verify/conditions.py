"""Check `conditions`: the EKS node monitoring agent's node conditions on every GPU node it watches, each True.

The agent sets one condition per category of issue (`components.planning.addons.node_monitoring.AGENT_CONDITIONS`,
[NMACHART]); a False one carries the issue as its reason (`NvidiaXID79Error`, `DCGMHealthCode...`, `NvidiaNVLinkError`)
and message. A condition that is missing means the agent has not reported on the node (not running there, or still
starting), so the node is not watched: that fails too. On-prem servers are skipped: the agent does not run on hybrid
nodes (docs/operations.md, "Detecting failed GPU nodes").
"""

from __future__ import annotations

from typing import Any

from blueprint.verify.context import Context, node_name
from blueprint.verify.model import Result

CHECK = "conditions"


def _conditions(node: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {str(c.get("type")): c for c in node.get("status", {}).get("conditions") or []}


def _problem(kind: str, condition: dict[str, Any] | None) -> str | None:
    if condition is None:
        return f"{kind} not reported"
    if condition.get("status") == "True":
        return None
    reason = condition.get("reason") or "no reason"
    message = f": {condition['message']}" if condition.get("message") else ""
    return f"{kind} {condition.get('status')} ({reason}{message})"


def check(ctx: Context) -> list[Result]:
    results: list[Result] = []
    for pool in ctx.expect.pools:
        if not pool.is_gpu:
            continue
        if not pool.health_conditions:
            why = "on-prem servers: the node monitoring agent does not run on hybrid nodes"
            results.append(Result(CHECK, pool.name, "skip", why))
            continue
        for node in ctx.pool_nodes(pool):
            name = node_name(node)
            found = _conditions(node)
            measured = {kind: found[kind].get("status") for kind in pool.health_conditions if kind in found}
            problems = [p for kind in pool.health_conditions if (p := _problem(kind, found.get(kind)))]
            detail = "; ".join(problems) or f"{len(pool.health_conditions)} conditions True"
            results.append(
                Result(
                    CHECK,
                    f"{pool.name}/{name}",
                    "fail" if problems else "pass",
                    detail,
                    measured,
                    dict.fromkeys(pool.health_conditions, "True"),
                    (name,) if problems else (),
                )
            )
    return results
