"""Assemble the offline plan of a stack (docs/architecture.md#the-plan-json-contract)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi

from blueprint.plan.check import check, load_config
from blueprint.plan.runner import ProgramRun, StackFiles, load_stack, run_program
from blueprint.plan.summary import summarize
from components.gpu_cluster import GpuCluster
from components.program import main


@dataclass(frozen=True)
class PlannedStack:
    """One run of a stack's program under mocks and all that is read from it: `blueprint plan` prints `plan`; the
    tests also read the registrations and the stack outputs, and share one run for all three."""

    files: StackFiles
    run: ProgramRun
    #: The stack outputs (`GpuCluster.exports()`), resolved: what `pulumi up` would print as outputs.
    exports: dict[str, Any]
    plan: dict[str, Any]


def run_stack_under_mocks(
    stack: str | None = None, config_file: Path | None = None, policy_config: Path | None = None
) -> PlannedStack:
    """Run the stack's program under mocks once; keep its registrations and outputs beside the plan (`make_plan`).

    Raises ConfigError (before anything is registered) when the stack's config is invalid.
    """
    files = load_stack(stack, config_file)
    built: list[GpuCluster] = []
    exports: dict[str, Any] = {}

    def program() -> pulumi.Output[None]:
        cluster = main()
        built.append(cluster)
        return pulumi.Output.from_input(cluster.exports()).apply(exports.update)

    run = run_program(program, files)
    cluster = built[0]
    resources = [r.to_json() for r in run.registrations]
    plan = {
        "project": files.project,
        "stack": files.stack,
        "resources": resources,
        "summary": summarize(cluster.stack_plan),
        "violations": check(resources, load_config(policy_config)),
    }
    return PlannedStack(files=files, run=run, exports=exports, plan=plan)


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
    return run_stack_under_mocks(stack, config_file, policy_config).plan
