"""Check `dcgm`: NVIDIA DCGM's diagnostic (`dcgmi diag -r LEVEL -j`) on every Ready GPU node, a pool's nodes at once.

Each pod takes every `nvidia.com/gpu` slot of its node; failing nodes are listed (and cordoned with
`--cordon-failed`); MIG pools are skipped ([MIGLIMITS]). A test fails on a GPU's result or on the test's own
`test_summary` (failures DCGM attributes to no single GPU). Each pod runs for the level's budget (`LEVEL_RUN_SECONDS`)
after its image is pulled. Levels and why: docs/design-notes.md#verify-dcgm; the user view:
docs/operations.md#verifying-a-deploy.
"""

from __future__ import annotations

from typing import Any

from blueprint.verify.context import Context, node_name, whole_gpu_pools
from blueprint.verify.expectations import PoolExpectation
from blueprint.verify.exporter_pause import exporters_paused
from blueprint.verify.model import PodsStopped, Result
from blueprint.verify.parsers import DcgmTest, ParseError, dcgm_failures, parse_dcgm
from blueprint.verify.pods import NODE_NAME_LABEL, Budget
from components.planning.check_pods import DCGM_CAPABILITIES, dcgm_diag, gpu_resources, pod_spec

CHECK = "dcgm"

#: Seconds a diagnostic may run, by level: about four times NVIDIA's duration where it gives one (level 1 "seconds",
#: level 2 "approximately two minutes", level 3 "approximately 15 minutes", [DCGMDIAG]); level 4 is "extended,
#: longer-running" with no figure, so it gets three hours. `--timeout` overrides.
LEVEL_RUN_SECONDS = {1: 900.0, 2: 900.0, 3: 3600.0, 4: 10800.0}
#: The level whose run pauses the node's DCGM exporter (`exporter_pause`): the extended diagnostic must have the
#: GPUs to itself ([DCGMDIAG]).
PAUSED_LEVEL = 4


def _describe(failures: list[DcgmTest]) -> str:
    shown = []
    for t in failures[:4]:
        where = "all GPUs (test summary)" if t.gpus == "summary" else f"{t.entity} {t.gpus}"
        why = f": {t.warnings[0]}" if t.warnings else ""
        shown.append(f"{t.category} {t.name} ({where}) {t.status}{why}")
    return "; ".join(shown)


def _run_pool(
    ctx: Context,
    pool: PoolExpectation,
    ready: list[dict[str, Any]],
    budget: Budget,
    results: list[Result],
    failed_nodes: list[str],
) -> None:
    """One pool's diagnostics, all nodes at once, each judged on its own."""
    level = ctx.options.dcgm_level
    started: list[tuple[str, str]] = []  # (node, pod)
    try:
        for node in ready:
            name = node_name(node)
            body = pod_spec(
                ctx.session.name(CHECK, name.split(".")[0]),
                ctx.session.labels(CHECK),
                ctx.options.dcgm_image,
                ["sh", "-c", dcgm_diag(level)],
                {NODE_NAME_LABEL: name},
                pool.tolerations,
                gpu_resources(pool.gpus_per_node),
                capabilities=DCGM_CAPABILITIES,
                run_as=None,
                runtime_class=pool.runtime_class,
            )
            started.append((name, ctx.session.create_pod(body)))
        # all at once, each judged on its own: one that never starts or overruns leaves the others' results standing
        ended = ctx.session.wait_each([pod for _, pod in started], budget)
        for node_id, pod in started:
            target = f"{pool.name}/{node_id}"
            stopped = ended[pod]
            if isinstance(stopped, PodsStopped):
                results.append(Result(CHECK, target, "error", str(stopped), nodes=(node_id,)))
                continue
            try:
                tests = parse_dcgm(ctx.api.pod_log(ctx.session.namespace, pod))
            except ParseError as error:
                results.append(Result(CHECK, target, "error", str(error)))
                continue
            failures = dcgm_failures(tests)
            if failures:
                failed_nodes.append(node_id)
                results.append(Result(CHECK, target, "fail", _describe(failures), len(failures), 0, (node_id,)))
            else:
                results.append(Result(CHECK, target, "pass", f"level {level}: {len(tests)} results, none failed"))
    finally:
        ctx.session.cleanup()  # free the pool's GPUs before the next pool (and before its exporters return)


def check(ctx: Context) -> list[Result]:
    level = ctx.options.dcgm_level
    budget = ctx.budget(LEVEL_RUN_SECONDS[level])
    results: list[Result] = []
    failed_nodes: list[str] = []
    for pool, ready in whole_gpu_pools(ctx, CHECK, "DCGM diagnostics need whole GPUs (MIG disabled)", results):
        if level == PAUSED_LEVEL:
            with exporters_paused(ctx, pool, ready) as stuck:
                for name, why in stuck.items():
                    results.append(Result(CHECK, f"{pool.name}/{name}", "error", why, nodes=(name,)))
                _run_pool(ctx, pool, [n for n in ready if node_name(n) not in stuck], budget, results, failed_nodes)
        else:
            _run_pool(ctx, pool, ready, budget, results, failed_nodes)
    if ctx.options.cordon_failed:
        for failed in failed_nodes:
            ctx.api.cordon(failed)
        if failed_nodes:
            results.append(
                Result(CHECK, "cordon", "pass", f"cordoned {', '.join(failed_nodes)}", nodes=tuple(failed_nodes))
            )
    return results
