"""Check `allocatable`: each node advertises the GPUs and EFA devices the catalog and the pool plan promise.

`nvidia.com/gpu` is the instance type's GPU count (catalog) times the pool's time-slicing replicas (the figure
cluster-autoscaler is promised too, `components.planning.autoscaler_tags.advertised_resources`); `vpc.amazonaws.com/efa`
is the pool's wired EFA devices (`PoolPlan.efa_devices`, 32 on a p5.48xlarge), 0 where none are wired.
"""

from __future__ import annotations

from blueprint.verify.context import Context, allocatable, instance_type, node_name
from blueprint.verify.model import Result
from components.planning.autoscaler_tags import EFA_RESOURCE
from components.planning.pools import GPU_RESOURCE

CHECK = "allocatable"


def check(ctx: Context) -> list[Result]:
    results: list[Result] = []
    for pool in ctx.expect.pools:
        if not pool.is_gpu and not pool.efa_devices:
            continue
        nodes = ctx.pool_nodes(pool)
        if not nodes:
            results.append(Result(CHECK, pool.name, "skip", "no nodes (the pool is at zero)"))
        for node in nodes:
            want = {GPU_RESOURCE: pool.advertised_gpus(instance_type(node)), EFA_RESOURCE: pool.efa_devices}
            have = {resource: allocatable(node, resource) for resource in want}
            wrong = [f"{r} {have[r]} (expected {want[r]})" for r in want if have[r] != want[r]]
            detail = "; ".join(wrong) or f"{have[GPU_RESOURCE]} GPUs, {have[EFA_RESOURCE]} EFA devices"
            results.append(
                Result(
                    CHECK,
                    f"{pool.name}/{node_name(node)}",
                    "fail" if wrong else "pass",
                    detail,
                    have,
                    want,
                    (node_name(node),) if wrong else (),
                )
            )
    return results
