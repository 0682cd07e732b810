"""`blueprint`: the offline companion of the Pulumi program.

Commands: `plan`, `check`, `catalog`, `schema`, `deployer-policy`, `verify`, `preflight`, `simulate`,
`training-job` (`blueprint
--help`, and README.md for each). Data goes to stdout, messages to stderr; the exit codes are in `blueprint.exit_codes`.
"""

from __future__ import annotations

import argparse
import atexit
import gc
import importlib.util
import itertools
import json
import os
import sys
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, BinaryIO, NoReturn

from blueprint import exit_codes, terminal
from blueprint.exit_codes import CONFIG, FAILED, IO, OK, USAGE
from components.errors import ConfigError

#: The distribution `pip install` knows this package by (pyproject.toml's `project.name`).
DISTRIBUTION = "gpu-clusters"

#: Per subcommand: its one-line help, example command lines (the top-level help shows the first of each) and the
#: exit codes it has beyond exit_codes.COMMON, with what they mean there ("" for the general meaning).
COMMANDS: dict[str, tuple[str, tuple[str, ...], dict[int, str]]] = {
    "plan": (
        "what a stack builds",
        ("blueprint plan --stack training", "blueprint plan --stack training --format json | jq .summary"),
        {CONFIG: ""},
    ),
    "check": (
        "the policy pack over a stack's plan",
        (
            "blueprint check --stack training",
            "blueprint check --stack training --policy-config my-policy.json",
            "blueprint check --plan training-plan.json",
        ),
        {FAILED: "a mandatory policy violation", CONFIG: ""},
    ),
    "catalog": ("the instance and GPU catalog", ("blueprint catalog", "blueprint catalog --format json"), {}),
    "schema": (
        "the stack config's JSON Schema and the generated docs tables",
        ("blueprint schema --check", "blueprint schema --write", "blueprint schema > stack-config.schema.json"),
        {FAILED: "--check: a generated file is out of date; run `blueprint schema --write`"},
    ),
    "deployer-policy": (
        "the least-privilege IAM policy of a stack's deployer",
        ("blueprint deployer-policy --stack training", "blueprint deployer-policy --config stacks/Pulumi.smoke.yaml"),
        {CONFIG: ""},
    ),
    "verify": (
        "check a deployed cluster against its stack's plan",
        ("blueprint verify --stack training", "blueprint verify --stack training --skip topology,dcgm,nccl,storage"),
        {
            FAILED: "a check failed or could not run (FAIL or ERROR; skips pass)",
            CONFIG: "an invalid stack config",
            IO: "the stack file or kubeconfig cannot be read, or the cluster cannot be reached",
            exit_codes.INTERRUPTED: "interrupted (Ctrl-C or SIGTERM); the test pods were deleted",
        },
    ),
    "preflight": (
        "read-only checks of the AWS account before the first `pulumi up`",
        ("blueprint preflight --stack training", "blueprint preflight --stack training --format json"),
        {
            FAILED: "a check failed (warnings pass)",
            CONFIG: "an invalid stack config",
            IO: "the stack file cannot be read, or AWS cannot be reached (no credentials, no network)",
        },
    ),
    "simulate": (
        "replay a GPU-utilization series through a serving autoscaler",
        ("blueprint simulate --stack inference", "blueprint simulate --stack inference --series u.csv --plot u.png"),
        {
            CONFIG: "an invalid stack config or series",
            USAGE: "a usage error (unknown option, no --stack/--config, a bad value) or --plot without matplotlib",
            IO: "the stack file or --series cannot be read, or --plot cannot be written",
        },
    ),
    "training-job": (
        "the stack's reference training job, a JobSet for you to submit",
        (
            "blueprint training-job --stack training",
            "blueprint training-job --stack training | kubectl apply -f -",
        ),
        {
            CONFIG: "an invalid stack config",
            USAGE: "a usage error, or a stack without `workloads.training`",
            IO: "the stack file cannot be read",
        },
    ),
    "conformance": (
        "the stack's Kubernetes AI Conformance self-assessment (PRODUCT.yaml)",
        (
            "blueprint conformance --stack inference",
            "blueprint conformance --stack inference --write PRODUCT.yaml",
            "blueprint conformance --stack inference --check --metadata vendorName=Example",
        ),
        {
            FAILED: "--check: a MUST is neither Implemented nor N/A",
            CONFIG: "an invalid stack config, or a Kubernetes version without a checklist",
            USAGE: "a usage error, or a --metadata field the checklist does not have",
            IO: "the stack file cannot be read, or --write cannot be written",
        },
    ),
    "conformance-run": (
        "run the upstream AI conformance tests against a stack's cluster",
        (
            "blueprint conformance-run --stack inference --kubeconfig ~/.kube/config",
            "blueprint conformance-run --stack inference --job | kubectl apply -f -",
            "blueprint conformance-run --stack inference --collect results.json",
        ),
        {
            FAILED: "a test failed or did not finish, or the suite did not build",
            CONFIG: "an invalid stack config, or no suite pinned for its Kubernetes version",
            IO: "the stack file cannot be read, git or go cannot be run, or the evidence cannot be written",
        },
    ),
}


class _Parser(argparse.ArgumentParser):
    """argparse ends a usage error with exit 2, which here means an invalid config: this one uses EX_USAGE."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(USAGE, f"{self.prog}: error: {message}\n")


def _epilog(name: str) -> str:
    _, examples, codes = COMMANDS[name]
    return "examples:\n" + "\n".join(f"  {line}" for line in examples) + "\n\n" + exit_codes.describe(codes)


def version() -> str:
    """The installed distribution's version; in a source tree that was never installed, pyproject.toml's."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        import tomllib  # only a source tree that was never installed reads pyproject.toml

        try:
            pyproject = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
            return f"{pyproject['project']['version']} (source, not installed)"
        except (OSError, KeyError, tomllib.TOMLDecodeError):
            return "unknown (not installed)"


def _parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser; given the subcommand about to run, only that one gets its arguments and its help's
    epilog (the others keep their names and one-line help, and the top-level help is not what will print), so that
    `plan` does not import what `verify`'s options are built from, nor format every command's exit codes."""
    raw = argparse.RawDescriptionHelpFormatter
    examples = "\n".join(f"  {examples[0]}" for _, examples, _ in COMMANDS.values())
    parser = _Parser(
        prog="blueprint",
        description="Offline plans and checks of GPU cluster stacks. Data goes to stdout, messages to stderr.",
        epilog=None
        if command
        else f"examples (`blueprint COMMAND --help` for more):\n{examples}\n\n{exit_codes.describe()}",
        formatter_class=raw,
    )
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, add_arguments in _ARGUMENTS.items():
        text = COMMANDS[name][0]
        chosen = command is None or command == name
        epilog = _epilog(name) if chosen else None
        cmd = sub.add_parser(name, help=text, description=text, epilog=epilog, formatter_class=raw)
        if chosen:
            add_arguments(cmd)
    return parser


def _command_of(argv: Sequence[str] | None) -> str | None:
    """The subcommand a command line names first, when its first word is one (else None: the parser needs them all)."""
    words = sys.argv[1:] if argv is None else argv
    return words[0] if words and words[0] in COMMANDS else None


class _Version(argparse.Action):
    """`--version`: prints `blueprint <version>` and exits, reading the version only when asked."""

    def __init__(self, option_strings: Sequence[str], dest: str, **_: Any) -> None:
        super().__init__(option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, nargs=0)
        self.help = "show program's version number and exit"

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        print(f"{parser.prog} {version()}")
        parser.exit()


def _plan_arguments(cmd: argparse.ArgumentParser, saved_plan: bool = False) -> None:
    cmd.add_argument("--stack", help="stack name: stacks/Pulumi.<stack>.yaml")
    cmd.add_argument("--config", type=Path, help="plan this stack file instead of stacks/Pulumi.<stack>.yaml")
    cmd.add_argument("--policy-config", type=Path, help="policy config (default policies/policy-config.json)")
    cmd.add_argument("--format", choices=("table", "json", "markdown"), default="table")
    if saved_plan:
        cmd.add_argument(
            "--plan",
            type=Path,
            help="check this saved plan (`blueprint plan --format json` output) instead of planning the stack",
        )


def _catalog_arguments(catalog: argparse.ArgumentParser) -> None:
    catalog.add_argument("--format", choices=("table", "json"), default="table")


def _schema_arguments(schema: argparse.ArgumentParser) -> None:
    mode = schema.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="regenerate schema/ and the docs/ tables")
    mode.add_argument("--check", action="store_true", help="exit 1 when any of them is out of date")


def _deployer_policy_arguments(policy: argparse.ArgumentParser) -> None:
    policy.add_argument("--stack", help="stack name: stacks/Pulumi.<stack>.yaml")
    policy.add_argument("--config", type=Path, help="use this stack file instead of stacks/Pulumi.<stack>.yaml")


def _preflight_arguments(preflight: argparse.ArgumentParser) -> None:
    preflight.add_argument("--stack", help="stack name: stacks/Pulumi.<stack>.yaml")
    preflight.add_argument("--config", type=Path, help="the stack file, instead of stacks/Pulumi.<stack>.yaml")
    preflight.add_argument("--format", choices=("table", "json"), default="table")


def _training_job_arguments(training: argparse.ArgumentParser) -> None:
    training.add_argument("--stack", help="stack name: stacks/Pulumi.<stack>.yaml")
    training.add_argument("--config", type=Path, help="use this stack file instead of stacks/Pulumi.<stack>.yaml")
    training.add_argument("--format", choices=("yaml", "json"), default="yaml")


def _conformance_arguments(conformance: argparse.ArgumentParser) -> None:
    conformance.add_argument("--stack", help="stack name: stacks/Pulumi.<stack>.yaml")
    conformance.add_argument("--config", type=Path, help="use this stack file instead of stacks/Pulumi.<stack>.yaml")
    conformance.add_argument("--write", type=Path, help="write PRODUCT.yaml here instead of printing it")
    conformance.add_argument(
        "--metadata", action="append", default=[], help="a metadata field, KEY=VALUE (vendorName=..., repoUrl=...)"
    )
    conformance.add_argument("--check", action="store_true", help="exit 1 when a MUST is not met")


def _conformance_run_arguments(run: argparse.ArgumentParser) -> None:
    run.add_argument("--stack", help="stack name: stacks/Pulumi.<stack>.yaml")
    run.add_argument("--config", type=Path, help="use this stack file instead of stacks/Pulumi.<stack>.yaml")
    run.add_argument("--kubeconfig", type=Path, help="kubeconfig with cluster-admin (default: the suite's, KUBECONFIG)")
    run.add_argument("--evidence", type=Path, help="evidence folder (default conformance-evidence/<stack>)")
    run.add_argument("--suite-dir", type=Path, help="a clone of the suite to use (default <evidence>/suite)")
    mode = run.add_mutually_exclusive_group()
    mode.add_argument("--job", action="store_true", help="print the run as a Kubernetes Job instead of running it")
    mode.add_argument("--collect", type=Path, help="turn a saved `go test -json` log (the Job's) into the evidence")


def _simulate_arguments(simulate: argparse.ArgumentParser) -> None:
    simulate.add_argument("--stack", help="stack name: stacks/Pulumi.<stack>.yaml")
    simulate.add_argument("--config", type=Path, help="use this stack file instead of stacks/Pulumi.<stack>.yaml")
    simulate.add_argument("--workload", help="serving workload name (default: the first)")
    simulate.add_argument(
        "--demand",
        default="diurnal",
        help="demand trace: diurnal, spike, ramp, or a CSV with a requests_per_second or gpu_seconds column, one row "
        "a minute (default: diurnal); every rule is compared on it",
    )
    simulate.add_argument("--rule", choices=("all", "seed", "hpa-utilization", "queue"), default="all")
    simulate.add_argument("--replica-rps", type=float, help="requests/s one replica serves (default: the catalog's)")
    simulate.add_argument("--node-start-minutes", type=int, help="minutes until a new node is Ready")
    simulate.add_argument("--model-load-minutes", type=int, help="minutes until a scheduled replica serves")
    simulate.add_argument("--seed", type=int, default=7, help="seed of the built-in traces' noise (default 7)")
    simulate.add_argument(
        "--series", type=Path, help="instead: replay a CSV of one utilization %% per minute through the seed rule"
    )
    simulate.add_argument("--start-replicas", type=int, help="replicas at minute 0 (default: replicas.min)")
    simulate.add_argument("--all", action="store_true", help="print every minute, not only the changes")
    simulate.add_argument("--plot", type=Path, help="also write the timeline as an image (needs matplotlib)")


def _verify_parser(verify: argparse.ArgumentParser) -> None:
    from blueprint.verify.context import Options
    from blueprint.verify.model import CHECKS

    defaults = Options()
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
    verify.add_argument(
        "--timeout",
        type=float,
        help="seconds each pool's test pods may run once started (default 900; dcgm by level: 900, 900, 3600, 10800)",
    )
    verify.add_argument(
        "--pull-timeout",
        type=float,
        default=defaults.pull_timeout_seconds,
        help="seconds a test pod may take to be scheduled and pull its image, apart from --timeout",
    )
    verify.add_argument(
        "--dcgm-level",
        type=int,
        choices=(1, 2, 3, 4),
        default=defaults.dcgm_level,
        help="dcgmi diag level: 1 quick (default, seconds), 2 about 2 min, 3 about 15 min, 4 longer (hours)",
    )
    verify.add_argument("--cordon-failed", action="store_true", help="cordon nodes that fail the DCGM diagnostic")
    verify.add_argument(
        "--min-busbw-fraction",
        type=float,
        default=defaults.min_busbw_fraction,
        help="two-node all-reduce bus bandwidth as a fraction of AWS's published figure (none published: not judged)",
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


#: Each subcommand's arguments, in the order `--help` lists the subcommands.
_ARGUMENTS: dict[str, Callable[[argparse.ArgumentParser], None]] = {
    "plan": _plan_arguments,
    "check": lambda cmd: _plan_arguments(cmd, saved_plan=True),
    "catalog": _catalog_arguments,
    "schema": _schema_arguments,
    "deployer-policy": _deployer_policy_arguments,
    "verify": _verify_parser,
    "preflight": _preflight_arguments,
    "training-job": _training_job_arguments,
    "conformance": _conformance_arguments,
    "conformance-run": _conformance_run_arguments,
    "simulate": _simulate_arguments,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run one subcommand; its exit code (exit_codes). The console script passes no argv."""
    try:
        code = _run(argv)
        sys.stdout.flush()  # a reader that closed stdout early shows here, still inside the try
    except BrokenPipeError:
        terminal.quiet_stdout()
        return exit_codes.BROKEN_PIPE
    except OSError as error:  # stdout itself cannot be written (`> /dev/full`, a full disk); files are handled inside
        terminal.quiet_stdout()
        terminal.error(f"cannot write the output: {error.strerror or error}")
        return IO
    except KeyboardInterrupt:
        return exit_codes.INTERRUPTED
    return code


def _run(argv: Sequence[str] | None) -> int:
    try:
        args = _parser(_command_of(argv)).parse_args(argv)
    except SystemExit as stop:  # --help and --version (0), a usage error (USAGE): returned like any other code
        return stop.code if isinstance(stop.code, int) else USAGE
    if args.command == "catalog":
        return _catalog(args.format)
    if args.command == "schema":
        return _schema(write=args.write, check=args.check)
    if getattr(args, "plan", None) is not None:
        if args.stack or args.config:
            terminal.error("check: give --plan FILE, or --stack NAME / --config FILE, not both")
            return USAGE
        return _check_saved_plan(args.plan, args.policy_config, args.format)
    if not args.stack and not args.config:
        terminal.error(f"{args.command}: give --stack NAME or --config FILE")
        return USAGE
    if args.command == "verify":
        from blueprint.verify.command import verify

        return verify(args)
    if args.command == "preflight":
        from blueprint.preflight.command import preflight

        return preflight(args)
    if args.command == "simulate":
        return _simulate(args)
    if args.command == "deployer-policy":
        return _deployer_policy(args)
    if args.command == "training-job":
        return _training_job(args)
    if args.command == "conformance":
        from blueprint.conformance.command import conformance

        return conformance(args)
    if args.command == "conformance-run":
        from blueprint.conformance.command import conformance_run

        return conformance_run(args)
    if args.policy_config is not None:
        code = _check_policy_config(args.policy_config)
        if code != OK:
            return code
    # Importing the SDKs and planning allocate millions of objects and free almost none until the end: the cyclic
    # collector's passes over them were a quarter of the run. The console script collects nothing; a caller that
    # passes argv (a test) gets its collector back.
    collecting = gc.isenabled()
    gc.disable()
    try:
        from blueprint.plan.plan import make_plan  # imports pulumi and the providers: only when planning

        plan, code = terminal.reporting(lambda: make_plan(args.stack, args.config, args.policy_config))
    finally:
        if collecting and argv is not None:
            gc.enable()
    if plan is None:
        return code
    from blueprint.plan.check import has_mandatory

    code = OK if args.command == "plan" else FAILED if has_mandatory(plan["violations"]) else OK
    if args.command == "plan":
        _print_plan(plan, args.format)
    else:
        _print_check(plan, args.format)
    if argv is None:  # the console script: the process ends here (callers passing argv keep their interpreter)
        atexit.register(_skip_teardown, code)
    return code


def _check_policy_config(path: Path) -> int:
    """Read --policy-config before planning, so a missing or invalid one is refused in a second."""
    from blueprint.plan.check import load_config

    try:
        load_config(path)
    except OSError as error:
        terminal.error(f"--policy-config {terminal.os_error(error)}")
        return IO
    except ValueError as error:
        terminal.error(str(error))
        return CONFIG
    return OK


def _check_saved_plan(path: Path, policy_config: Path | None, fmt: str) -> int:
    """The pack over a saved plan, so a pipeline checks the very artifact it deploys: exit 1 on a mandatory
    violation, 2 when the file is not a plan, 74 when it cannot be read."""
    from blueprint.plan.check import check, has_mandatory, load_config, load_plan

    try:
        config = load_config(policy_config)
        plan = load_plan(path)
    except OSError as error:
        terminal.error(terminal.os_error(error))
        return IO
    except ValueError as error:
        terminal.error(str(error))
        return CONFIG
    plan["violations"] = check(plan["resources"], config)
    _print_check(plan, fmt)
    return FAILED if has_mandatory(plan["violations"]) else OK


def _print_plan(plan: dict[str, Any], fmt: str) -> None:
    if fmt == "json":
        # The same bytes as `print(json.dumps(...))`, written a few thousand pieces at a time: the whole text and the
        # millions of pieces it is joined from are never in memory at once (writing each piece alone is slower).
        chunks = json.JSONEncoder(indent=2, default=str, allow_nan=False).iterencode(plan)
        while batch := list(itertools.islice(chunks, 16384)):
            sys.stdout.write("".join(batch))
        sys.stdout.write("\n")
    else:
        from blueprint.plan import render  # rich, for people: not for JSON

        if fmt == "markdown":
            print(render.markdown(plan))
        else:
            render.table(plan, terminal.console())


def _print_check(plan: dict[str, Any], fmt: str) -> None:
    from blueprint.plan.check import format_violations

    # argparse's choices guard fmt
    print(format_violations(plan["violations"], fmt, width=terminal.width()))  # type: ignore[arg-type]


def _catalog(fmt: str) -> int:
    from blueprint.catalog_table import catalog_rows, catalog_table

    if fmt == "json":
        print(json.dumps(catalog_rows(), indent=2))
    else:
        terminal.console().print(catalog_table())
    return OK


def _deployer_policy(args: argparse.Namespace) -> int:
    """Print the stack's deployer policy (managed policies by name)."""
    from blueprint.deployer_policy import stack_policy_text

    text, code = terminal.reporting(lambda: stack_policy_text(args.stack, args.config))
    if text is not None:
        print(text, end="")
    return code


def _training_job(args: argparse.Namespace) -> int:
    """Print the reference training job's JobSet (docs/training.md#submitting-a-job); the stack never submits it."""
    import yaml

    from blueprint.plan.runner import load_stack
    from components.planning.stack_plan import plan_stack
    from components.planning.training_job import jobset_manifest
    from components.validation import validate_config

    def planned() -> tuple[str, Any]:
        files = load_stack(args.stack, args.config)
        return files.stack, plan_stack(validate_config(files.config, files.project)).training

    result, code = terminal.reporting(planned)
    if result is None:
        return code
    stack, job = result
    if job is None:
        terminal.error(f"training-job: stack {stack} has no workloads.training; add one (docs/training.md)")
        return USAGE
    manifest = jobset_manifest(job)
    if args.format == "json":
        print(json.dumps(manifest, indent=2))
    else:
        print(yaml.safe_dump(manifest, sort_keys=False), end="")
    return OK


def _schema(write: bool, check: bool) -> int:
    from blueprint import deployer_policy, reference, rules_reference

    if write:
        try:
            reference.write()
            rules_reference.write()
            deployer_policy.write()
        except OSError as error:
            terminal.error(f"schema --write: {terminal.os_error(error)}")
            return IO
        return OK
    if check:
        stale = reference.stale() + rules_reference.stale() + deployer_policy.stale()
        for path in stale:
            terminal.error(f"{path} is out of date; run `blueprint schema --write`")
        return FAILED if stale else OK
    print(reference.schema_text(), end="")
    return OK


def _simulate(args: argparse.Namespace) -> int:
    """Print the timeline of replicas and nodes for a utilization series (and write its plot)."""
    from rich.table import Table

    from blueprint import simulate as sim
    from blueprint.plan.runner import load_stack
    from components.validation import validate_config

    if args.plot and importlib.util.find_spec("matplotlib") is None:
        terminal.error("--plot needs matplotlib, which the dev lock installs (README, 'Set-up and tests')")
        return USAGE
    if args.plot and args.plot.suffix.lower().lstrip(".") not in sim.PLOT_FORMATS:
        terminal.error(f"--plot {args.plot}: name an image file ending in one of .{', .'.join(sim.PLOT_FORMATS)}")
        return USAGE
    if args.start_replicas is not None and args.start_replicas < 0:
        terminal.error(f"--start-replicas {args.start_replicas}: give a count of replicas, 0 or more")
        return USAGE
    replay_only = [
        flag for flag, on in (("--start-replicas", args.start_replicas is not None), ("--all", args.all)) if on
    ]
    if args.series is None and replay_only:
        terminal.error(
            f"{' and '.join(replay_only)}: only with --series (a utilization replay); the demand comparison starts "
            "every rule at replicas.min and prints its table"
        )
        return USAGE
    for flag, value in (
        ("--replica-rps", args.replica_rps),
        ("--node-start-minutes", args.node_start_minutes),
        ("--model-load-minutes", args.model_load_minutes),
    ):
        if value is not None and (value < 0 or (flag == "--replica-rps" and not value > 0)):
            terminal.error(
                f"{flag} {value}: give a number above 0"
                if flag == "--replica-rps"
                else f"{flag} {value}: give 0 or more"
            )
            return USAGE
    if args.series is None:
        return _simulate_demand(args)
    try:
        files = load_stack(args.stack, args.config)
        spec = validate_config(files.config, files.project)
        name, rule = sim.stack_rule(spec, args.workload)
        series = sim.read_series(args.series) if args.series else sim.demo_series()
    except ConfigError as error:
        terminal.error(str(error))
        return CONFIG
    except OSError as error:
        terminal.error(terminal.os_error(error))
        return IO
    try:  # before simulating: a path that cannot be written fails at once, not after the simulation and rendering
        image = args.plot.open("wb") if args.plot else None
    except OSError as error:
        return _plot_error(error)
    unneeded = sim.minutes(spec.addons.cluster_autoscaler.scale_down_unneeded_time)
    steps = sim.simulate(rule, series, args.start_replicas, unneeded)
    console = terminal.console()
    console.print(
        f"{files.stack}/{name}: +{rule.scale_out_replicas} replicas after {rule.scale_out_after_minutes} min above "
        f"{rule.scale_out_above_percent:g}%, -{rule.scale_in_replicas} after {rule.scale_in_after_minutes} min below "
        f"{rule.scale_in_below_percent:g}%, cooldown {rule.cooldown_seconds} s, replicas {rule.min_replicas}-"
        f"{rule.max_replicas} ({rule.replicas_per_node} per node), nodes {rule.min_nodes}-{rule.max_nodes}"
    )
    table = Table()
    for column in ("minute", "GPU util %", "action", "replicas", "nodes"):
        table.add_column(column, justify="right", overflow="fold")
    for row in sim.timeline_rows(steps, args.all):
        table.add_row(*row)
    console.print(table)
    return _write_plot(image, args.plot, lambda out, fmt: sim.plot(steps, rule, f"{files.stack}/{name}", out, fmt))


def _simulate_demand(args: argparse.Namespace) -> int:
    """Compare the serving rules under a demand trace (closed loop): SLO-violation minutes, GPU-hours, cost."""
    from rich.table import Table

    from blueprint import closed_loop as cl
    from blueprint.plan.runner import load_stack
    from components.validation import validate_config

    try:
        files = load_stack(args.stack, args.config)
        spec = validate_config(files.config, files.project)
        model = cl.stack_model(spec, args.workload, args.replica_rps, args.node_start_minutes, args.model_load_minutes)
        demand = cl.demand_trace(model, args.demand, args.seed)
    except ConfigError as error:
        terminal.error(str(error))
        return CONFIG
    except OSError as error:
        terminal.error(terminal.os_error(error))
        return IO
    try:  # before simulating: a path that cannot be written fails at once, not after the simulation and rendering
        image = args.plot.open("wb") if args.plot else None
    except OSError as error:
        return _plot_error(error)
    rules = cl.RULES if args.rule == "all" else (args.rule,)
    outcomes = cl.compare(model.rule, model.pool, model.capacity, demand, rules)
    console = terminal.console()
    console.print(
        f"{files.stack}/{model.workload}: {len(demand)} min of {args.demand} demand; capacity {model.basis}; new node "
        f"{model.capacity.node_start_minutes} min, model load {model.capacity.model_load_minutes} min"
    )
    table = Table()
    for column in cl.TABLE_HEADER[1:]:
        table.add_column(column, justify="right", overflow="fold")
    for row in cl.table_rows({args.demand: outcomes}):
        table.add_row(*row[1:])
    console.print(table)
    title = f"{files.stack}/{model.workload}"
    return _write_plot(image, args.plot, lambda out, fmt: cl.plot({args.demand: outcomes}, model, title, out, fmt))


def _plot_error(error: OSError) -> int:
    terminal.error(f"--plot: cannot write {terminal.os_error(error)}")
    return IO


def _write_plot(image: BinaryIO | None, path: Path | None, draw: Callable[[BinaryIO, str], None]) -> int:
    """Draw the plot into the `--plot` file opened before the simulation, in the format its name ends with."""
    if image is None or path is None:
        return OK
    with image:
        try:
            draw(image, path.suffix.lower().lstrip("."))
        except OSError as error:
            return _plot_error(error)
    print(f"wrote {path}", file=sys.stderr)
    return OK


def _skip_teardown(code: int) -> None:
    """At exit, leave without tearing the interpreter down: after a plan the process holds the whole SDK and every
    registered resource, and freeing them one by one took a fifth of the run. Output is flushed first; nothing
    else is pending."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
