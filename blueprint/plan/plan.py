"""Assemble the offline plan of a stack (design.md, "The offline plan contract")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from blueprint.plan.check import check, load_config
from blueprint.plan.runner import load_stack, run_program
from blueprint.plan.summary import summarize
from components.gpu_cluster import GpuCluster
from components.program import main


def make_plan(
    stack: str | None = None, config_file: Path | None = None, policy_config: Path | None = None
) -> dict[str, Any]:
    """Run the stack's program under mocks and describe it: resources, summary, policy violations.

    The same config gives the same plan, byte for byte once dumped: resources come parents first, siblings by URN
    (`runner.in_plan_order`); each one's `dependsOn`, `ignoreChanges` and `propertyDependencies` are sorted (sets in
    the engine's model); lists whose order means something (inputs such as security group rules or container
    arguments, the violations, mandatory first) keep it. The clock reads `runner.PLAN_TIME`, and mock ids and ARNs
    are derived from each resource's type and name (`mocks.PlanMocks`).

    Raises ConfigError (before anything is registered) when the stack's config is invalid.
    """
    files = load_stack(stack, config_file)
    built: list[GpuCluster] = []
    run = run_program(lambda: built.append(main()), files)
    cluster = built[0]
    resources = [r.to_json() for r in run.registrations]
    return {
        "project": files.project,
        "stack": files.stack,
        "resources": resources,
        "summary": summarize(cluster.spec, cluster.pool_plans),
        "violations": check(resources, load_config(policy_config)),
    }
