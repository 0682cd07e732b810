"""Check `allocatable`: each node advertises the GPU resources and EFA devices the catalog and the pool plan promise,
and each node of a MIG pool has had its partitions applied.

Expected figures are `components.planning.mig.advertised_resources` (what cluster-autoscaler is promised too) and
`PoolPlan.efa_devices`; a MIG node's `nvidia.com/mig.config.state` must read `success` ([MIGPARTED]).
See docs/operations.md#verifying-a-deploy.
"""

from __future__ import annotations

from typing import Any

from blueprint.verify.context import Context, allocatable, instance_type, labels, node_name
from blueprint.verify.expectations import PoolExpectation
from blueprint.verify.model import Result, Status
from components.planning.addons.mig_manager import NAMESPACE as MIG_MANAGER_NAMESPACE
from components.planning.autoscaler_tags import EFA_RESOURCE
from components.planning.mig import MIG_CONFIG_STATE_LABEL, MIG_RESOURCE_PREFIX, MIG_STATE_SUCCESS
from components.planning.pools import GPU_RESOURCE

CHECK = "allocatable"


def _describe(have: dict[str, int]) -> str:
    """`8 GPUs, 32 EFA devices`, then each MIG resource: `0 GPUs, 0 EFA devices, 8 nvidia.com/mig-3g.40gb`."""
    mig = [f"{n} {r}" for r, n in have.items() if r.startswith(MIG_RESOURCE_PREFIX)]
    return ", ".join([f"{have.get(GPU_RESOURCE, 0)} GPUs", f"{have.get(EFA_RESOURCE, 0)} EFA devices", *mig])


def _resources(pool: PoolExpectation, node: dict[str, Any]) -> Result:
    name = node_name(node)
    want = pool.advertised_resources(instance_type(node)) | {EFA_RESOURCE: pool.efa_devices}
    have = {resource: allocatable(node, resource) for resource in want}
    wrong = [f"{r} {have[r]} (expected {want[r]})" for r in want if have[r] != want[r]]
    detail = "; ".join(wrong) or _describe(have)
    status: Status = "fail" if wrong else "pass"
    return Result(CHECK, f"{pool.name}/{name}", status, detail, have, want, (name,) if wrong else ())


def mig_state(pool: PoolExpectation, node: dict[str, Any]) -> Result:
    """The node's `nvidia.com/mig.config.state`, which must be `success`, with what to do otherwise."""
    name = node_name(node)
    state = labels(node).get(MIG_CONFIG_STATE_LABEL)
    logs = f"see its logs (kubectl -n {MIG_MANAGER_NAMESPACE} logs on the node's mig-manager pod)"
    if state == MIG_STATE_SUCCESS:
        return Result(CHECK, f"{pool.name}/{name}", "pass", f"mig.config.state=success ({pool.mig_layout})", state)
    if state == "failed":
        detail = f"mig.config.state=failed: the mig-manager could not apply {pool.mig_layout}; {logs}"
    elif state == "pending":
        detail = f"mig.config.state=pending: the mig-manager is still applying {pool.mig_layout}; rerun later; {logs}"
    elif state is None:
        detail = f"mig.config.state not set: the mig-manager has not run on this node; {logs}"
    else:
        detail = f"mig.config.state={state}: expected success ({pool.mig_layout}); {logs}"
    return Result(CHECK, f"{pool.name}/{name}", "fail", detail, state, MIG_STATE_SUCCESS, (name,))


def check(ctx: Context) -> list[Result]:
    results: list[Result] = []
    for pool in ctx.expect.pools:
        if not pool.is_gpu and not pool.efa_devices:
            continue
        nodes = ctx.pool_nodes(pool)
        if not nodes:
            results.append(Result(CHECK, pool.name, "skip", "no nodes (the pool is at zero)"))
        for node in nodes:
            if pool.mig_layout:
                results.append(mig_state(pool, node))
            results.append(_resources(pool, node))
    return results
