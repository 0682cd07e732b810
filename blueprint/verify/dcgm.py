"""Check `dcgm`: NVIDIA DCGM's diagnostic (`dcgmi diag -r LEVEL -j`) on every Ready GPU node, all nodes at once.

Each pod takes every `nvidia.com/gpu` slot of its node; failing nodes are listed (and cordoned with
`--cordon-failed`); MIG pools are skipped ([MIGLIMITS]). Levels and why: docs/design-notes.md#verify-dcgm; the user
view: docs/operations.md#verifying-a-deploy.
"""

from __future__ import annotations

from blueprint.verify.context import Context, node_name, whole_gpu_pools
from blueprint.verify.model import Result
from blueprint.verify.parsers import ParseError, dcgm_failures, parse_dcgm
from blueprint.verify.pods import NODE_NAME_LABEL, gpu_resources, pod_spec

CHECK = "dcgm"


def check(ctx: Context) -> list[Result]:
    image = ctx.options.dcgm_image
    level = ctx.options.dcgm_level
    started: list[tuple[str, str, str]] = []  # (pool, node, pod)
    results: list[Result] = []
    for pool, ready in whole_gpu_pools(ctx, CHECK, "DCGM diagnostics need whole GPUs (MIG disabled)", results):
        for node in ready:
            name = node_name(node)
            body = pod_spec(
                ctx.session.name(CHECK, name.split(".")[0]),
                ctx.session.labels(CHECK),
                image,
                ["sh", "-c", f"nv-hostengine >/dev/null 2>&1; sleep 2; dcgmi diag -r {level} -j"],
                {NODE_NAME_LABEL: name},
                pool.tolerations,
                gpu_resources(pool.gpus_per_node),
                capabilities=("SYS_ADMIN",),
                run_as=None,
                runtime_class=pool.runtime_class,
            )
            started.append((pool.name, name, ctx.session.create_pod(body)))
    if started:
        ctx.session.wait([pod for _, _, pod in started], ctx.deadline)
    failed_nodes: list[str] = []
    for pool_name, node_id, pod in started:
        log = ctx.api.pod_log(ctx.session.namespace, pod)
        try:
            tests = parse_dcgm(log)
        except ParseError as error:
            results.append(Result(CHECK, f"{pool_name}/{node_id}", "error", str(error)))
            continue
        failures = dcgm_failures(tests)
        if failures:
            failed_nodes.append(node_id)
            detail = "; ".join(f"{t.category} {t.name} (GPU {t.gpus}): {t.status}" for t in failures[:4])
            results.append(Result(CHECK, f"{pool_name}/{node_id}", "fail", detail, len(failures), 0, (node_id,)))
        else:
            results.append(
                Result(CHECK, f"{pool_name}/{node_id}", "pass", f"level {level}: {len(tests)} results, none failed")
            )
    if ctx.options.cordon_failed:
        for failed in failed_nodes:
            ctx.api.cordon(failed)
        if failed_nodes:
            results.append(
                Result(CHECK, "cordon", "pass", f"cordoned {', '.join(failed_nodes)}", nodes=tuple(failed_nodes))
            )
    return results
