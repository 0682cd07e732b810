"""Check `nodes`: every pool's nodes are Ready, their count is within the plan's min..max, hybrid servers joined.

Nodes are matched to pools by the `gpu-clusters/pool` label kubelet registers them with (`PoolPlan.labels`);
hybrid nodes also carry `eks.amazonaws.com/compute-type: hybrid`, which EKS sets ([EKSHYB],
components/planning/compute_types.py).
"""

from __future__ import annotations

from blueprint.verify.context import Context, compute_type, is_ready, node_name, pool_of
from blueprint.verify.model import Result
from components.planning.compute_types import HYBRID

CHECK = "nodes"


def check(ctx: Context) -> list[Result]:
    results: list[Result] = []
    for pool in ctx.expect.pools:
        nodes = ctx.pool_nodes(pool)
        not_ready = tuple(node_name(n) for n in nodes if not is_ready(n))
        bounds = f"{pool.min_nodes}..{pool.max_nodes}"
        problems = []
        if not pool.min_nodes <= len(nodes) <= pool.max_nodes:
            problems.append(f"{len(nodes)} nodes, the plan says {bounds}")
        if not_ready:
            problems.append(f"not Ready: {', '.join(not_ready)}")
        if pool.kind == "hybrid":
            strays = [node_name(n) for n in nodes if compute_type(n) != HYBRID]
            if strays:
                problems.append(f"not joined as hybrid nodes (no compute-type={HYBRID} label): {', '.join(strays)}")
        detail = "; ".join(problems) or (
            f"{len(nodes)} Ready ({bounds})" + (" - scales from zero" if not nodes else "")
        )
        results.append(Result(CHECK, pool.name, "fail" if problems else "pass", detail, len(nodes), bounds, not_ready))
    known = {p.name for p in ctx.expect.pools}
    for node in ctx.nodes():
        label = pool_of(node)
        if label is not None and label not in known:
            results.append(
                Result(CHECK, node_name(node), "fail", f"labelled pool {label!r}, which the plan does not have")
            )
    return results
