"""`blueprint`: the offline companion of the Pulumi program.

    blueprint plan --stack training [--config FILE] [--format table|json|markdown]
    blueprint check --stack training [--config FILE] [--policy-config FILE] [--format table|json|markdown]
    blueprint catalog [--format table|json]
    blueprint schema [--write | --check]
    blueprint deployer-policy --stack training [--config FILE]
    blueprint verify --stack training [--kubeconfig FILE] [--only/--skip CHECKS] [--format table|json]
    blueprint simulate --stack inference [--workload NAME] [--series FILE.csv] [--all] [--plot out.png]

Exit codes: 0 fine, 1 a mandatory policy violation (`check`) or a failed check (`verify`), 2 an invalid stack
config or input (every problem printed on stderr as `path.to.key: what is wrong`, no traceback) or, for `verify`,
no usable kubeconfig.
"""

from __future__ import annotations

import argparse
import atexit
import gc
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from components.errors import ConfigError

EXIT_OK, EXIT_VIOLATIONS, EXIT_CONFIG = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="blueprint", description="Offline plans and checks of GPU cluster stacks.")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, text in (("plan", "what a stack builds"), ("check", "the policy pack over a stack's plan")):
        cmd = sub.add_parser(name, help=text)
        cmd.add_argument("--stack", help="stack name: stacks/Pulumi.<stack>.yaml")
        cmd.add_argument("--config", type=Path, help="plan this stack file instead of stacks/Pulumi.<stack>.yaml")
        cmd.add_argument("--policy-config", type=Path, help="policy config (default policies/policy-config.json)")
        cmd.add_argument("--format", choices=("table", "json", "markdown"), default="table")
    catalog = sub.add_parser("catalog", help="the instance and GPU catalog")
    catalog.add_argument("--format", choices=("table", "json"), default="table")
    schema = sub.add_parser("schema", help="the stack config's JSON Schema and the generated docs tables")
    mode = schema.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="regenerate schema/ and the docs/ tables")
    mode.add_argument("--check", action="store_true", help="exit 1 when any of them is out of date")
    policy = sub.add_parser("deployer-policy", help="the least-privilege IAM policy of a stack's deployer")
    policy.add_argument("--stack", help="stack name: stacks/Pulumi.<stack>.yaml")
    policy.add_argument("--config", type=Path, help="use this stack file instead of stacks/Pulumi.<stack>.yaml")
    _verify_parser(sub)
    simulate = sub.add_parser("simulate", help="replay a GPU-utilization series through a serving autoscaler")
    simulate.add_argument("--stack", help="stack name: stacks/Pulumi.<stack>.yaml")
    simulate.add_argument("--config", type=Path, help="use this stack file instead of stacks/Pulumi.<stack>.yaml")
    simulate.add_argument("--workload", help="serving workload name (default: the first)")
    simulate.add_argument("--series", type=Path, help="CSV, one utilization %% per minute (default: a demo day)")
    simulate.add_argument("--start-replicas", type=int, help="replicas at minute 0 (default: replicas.min)")
    simulate.add_argument("--all", action="store_true", help="print every minute, not only the changes")
    simulate.add_argument("--plot", type=Path, help="also write the timeline as an image (needs matplotlib)")
    return parser


def _verify_parser(sub: Any) -> None:
    from blueprint.verify.context import Options
    from blueprint.verify.model import CHECKS

    defaults = Options()
    verify = sub.add_parser("verify", help="check a deployed cluster against its stack's plan")
    verify.add_argument("--stack", help="stack name: stacks/Pulumi.<stack>.yaml, and its `kubeconfig` output")
    verify.add_argument("--config", type=Path, help="the stack file, instead of stacks/Pulumi.<stack>.yaml")
    verify.add_argument(
        "--kubeconfig",
        type=Path,
        help="kubeconfig file (default: KUBECONFIG, ~/.kube/config, then `pulumi stack output kubeconfig`)",
    )
    verify.add_argument("--format", choices=("table", "json"), default="table")
    verify.add_argument(
        "--only", action="append", default=[], help=f"comma-separated checks to run: {','.join(CHECKS)}"
    )
    verify.add_argument("--skip", action="append", default=[], help="comma-separated checks to leave out")
    verify.add_argument("--timeout", type=float, default=defaults.timeout_seconds, help="seconds per check")
    verify.add_argument(
        "--dcgm-level",
        type=int,
        choices=(1, 2, 3, 4),
        default=defaults.dcgm_level,
        help="dcgmi diag level: 1 quick (default), 2 short hardware tests, 3-4 long stress tests",
    )
    verify.add_argument("--cordon-failed", action="store_true", help="cordon nodes that fail the DCGM diagnostic")
    verify.add_argument(
        "--min-busbw-fraction",
        type=float,
        default=defaults.min_busbw_fraction,
        help="two-node all-reduce bus bandwidth as a fraction of AWS's published figure, else of the fabric's GB/s",
    )
    verify.add_argument(
        "--min-storage-fraction",
        type=float,
        default=defaults.min_storage_fraction,
        help="storage probe MB/s as a fraction of what one client can reach",
    )
    verify.add_argument("--namespace", default="default", help="namespace of the test pods (storage: the claim's)")
    verify.add_argument("--nccl-image", default=defaults.nccl_image)
    verify.add_argument("--dcgm-image", default=defaults.dcgm_image)
    verify.add_argument("--cuda-image", default=defaults.cuda_image)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "catalog":
        return _catalog(args.format)
    if args.command == "schema":
        return _schema(write=args.write, check=args.check)
    if args.command == "verify":
        from blueprint.verify.command import verify

        return verify(args)
    if not args.stack and not args.config:
        print("blueprint: give --stack NAME or --config FILE", file=sys.stderr)
        return EXIT_CONFIG
    if args.command == "simulate":
        return _simulate(args)
    if args.command == "deployer-policy":
        return _deployer_policy(args)
    # Importing the SDKs and planning allocate millions of objects and free almost none until the end: the cyclic
    # collector's passes over them were a quarter of the run. The console script collects nothing; a caller that
    # passes argv (a test) gets its collector back.
    collecting = gc.isenabled()
    gc.disable()
    try:
        from blueprint.plan.plan import make_plan  # imports pulumi and the providers: only when planning

        plan = make_plan(args.stack, args.config, args.policy_config)
    except (ConfigError, FileNotFoundError) as error:
        print(f"blueprint: {error}", file=sys.stderr)
        return EXIT_CONFIG
    finally:
        if collecting and argv is not None:
            gc.enable()
    from blueprint.plan.check import has_mandatory

    code = EXIT_OK if args.command == "plan" else EXIT_VIOLATIONS if has_mandatory(plan["violations"]) else EXIT_OK
    if args.command == "plan":
        _print_plan(plan, args.format)
    else:
        _print_check(plan, args.format)
    if argv is None:  # the console script: the process ends here (callers passing argv keep their interpreter)
        atexit.register(_skip_teardown, code)
    return code


def _print_plan(plan: dict[str, Any], fmt: str) -> None:
    from blueprint.plan import render

    if fmt == "json":
        print(json.dumps(plan, indent=2, sort_keys=False, default=str, allow_nan=False))
    elif fmt == "markdown":
        print(render.markdown(plan))
    else:
        render.table(plan, Console(width=160))


def _print_check(plan: dict[str, Any], fmt: str) -> None:
    from blueprint.plan.check import format_violations

    print(format_violations(plan["violations"], fmt))  # type: ignore[arg-type]  # argparse choices guard fmt


def _catalog(fmt: str) -> int:
    from blueprint.catalog_table import catalog_rows, catalog_table

    if fmt == "json":
        print(json.dumps(catalog_rows(), indent=2))
    else:
        Console(width=200).print(catalog_table())
    return EXIT_OK


def _deployer_policy(args: argparse.Namespace) -> int:
    """Print the stack's deployer policy (managed policies by name); exit 2 on a bad stack."""
    from blueprint.deployer_policy import stack_policy_text

    try:
        print(stack_policy_text(args.stack, args.config), end="")
    except (ConfigError, FileNotFoundError) as error:
        print(f"blueprint: {error}", file=sys.stderr)
        return EXIT_CONFIG
    return EXIT_OK


def _schema(write: bool, check: bool) -> int:
    from blueprint import deployer_policy, reference, rules_reference

    if write:
        reference.write()
        rules_reference.write()
        deployer_policy.write()
        return EXIT_OK
    if check:
        stale = reference.stale() + rules_reference.stale() + deployer_policy.stale()
        for path in stale:
            print(f"blueprint: {path} is out of date; run `blueprint schema --write`", file=sys.stderr)
        return EXIT_VIOLATIONS if stale else EXIT_OK
    print(reference.schema_text(), end="")
    return EXIT_OK


def _simulate(args: argparse.Namespace) -> int:
    """Print the timeline of replicas and nodes for a utilization series; exit 2 on a bad stack or series."""
    from rich.table import Table

    from blueprint import simulate as sim
    from blueprint.plan.runner import load_stack
    from components.validation import validate_config

    try:
        files = load_stack(args.stack, args.config)
        spec = validate_config(files.config, files.project)
        name, rule = sim.stack_rule(spec, args.workload)
        series = sim.read_series(args.series) if args.series else sim.demo_series()
    except (ConfigError, FileNotFoundError) as error:
        print(f"blueprint: {error}", file=sys.stderr)
        return EXIT_CONFIG
    unneeded = sim.minutes(spec.addons.cluster_autoscaler.scale_down_unneeded_time)
    steps = sim.simulate(rule, series, args.start_replicas, unneeded)
    console = Console(width=160)
    console.print(
        f"{files.stack}/{name}: +{rule.scale_out_replicas} replicas after {rule.scale_out_after_minutes} min above "
        f"{rule.scale_out_above_percent:g}%, -{rule.scale_in_replicas} after {rule.scale_in_after_minutes} min below "
        f"{rule.scale_in_below_percent:g}%, cooldown {rule.cooldown_seconds} s, replicas {rule.min_replicas}-"
        f"{rule.max_replicas} ({rule.replicas_per_node} per node), nodes {rule.min_nodes}-{rule.max_nodes}"
    )
    table = Table()
    for column in ("minute", "GPU util %", "action", "replicas", "nodes"):
        table.add_column(column, justify="right")
    for row in sim.timeline_rows(steps, args.all):
        table.add_row(*row)
    console.print(table)
    if args.plot:
        try:
            sim.plot(steps, rule, f"{files.stack}/{name}", args.plot)
        except ImportError:
            print("blueprint: --plot needs matplotlib (pip install -e '.[dev]')", file=sys.stderr)
            return EXIT_CONFIG
        print(f"wrote {args.plot}")
    return EXIT_OK


def _skip_teardown(code: int) -> None:
    """At exit, leave without tearing the interpreter down: after a plan the process holds the whole SDK and every
    registered resource, and freeing them one by one took a fifth of the run. Output is flushed first; nothing
    else is pending."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
