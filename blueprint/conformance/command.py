"""The `conformance` and `conformance-run` commands: read the stack, plan it, then write the self-assessment or run
the upstream suite (docs/conformance.md)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import yaml

from blueprint import terminal
from blueprint.conformance import product, results
from blueprint.conformance.suite import (
    ProcessRunner,
    checkout,
    go_test_command,
    job_manifests,
    skipped_autoscaling,
    stream_process,
)
from blueprint.exit_codes import CONFIG, FAILED, IO, OK, USAGE
from components.catalog.ai_conformance import checklist
from components.catalog.versions import ai_conformance_suite
from components.planning.conformance import assess, autoscaling_target, unmet_musts
from components.planning.stack_plan import StackPlan, plan_stack


def _planned(args: argparse.Namespace) -> tuple[tuple[str, StackPlan] | None, int]:
    from blueprint.plan.runner import load_stack
    from components.validation import validate_config

    def load() -> tuple[str, StackPlan]:
        files = load_stack(args.stack, args.config)
        return files.stack, plan_stack(validate_config(files.config, files.project))

    return terminal.reporting(load)


def _metadata_overrides(pairs: list[str]) -> dict[str, str] | None:
    given: dict[str, str] = {}
    bad = []
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or key not in product.METADATA_PLACEHOLDERS or key == "kubernetesVersion" or not value:
            bad.append(pair)
        else:
            given[key] = value
    if bad:
        fields = ", ".join(k for k in product.METADATA_PLACEHOLDERS if k != "kubernetesVersion")
        terminal.error(f"conformance: --metadata {', '.join(bad)}: give KEY=VALUE with KEY one of {fields}")
        return None
    return given


def conformance(args: argparse.Namespace) -> int:
    """Print or write the stack's PRODUCT.yaml; with --check, exit 1 when a MUST is neither Implemented nor N/A."""
    given = _metadata_overrides(args.metadata)
    if given is None:
        return USAGE
    planned, code = _planned(args)
    if planned is None:
        return code
    stack, plan = planned
    listed = checklist()
    version = f"v{plan.spec.cluster.kubernetes_version}"
    if version != listed.kubernetes_version:
        terminal.error(
            f"conformance: stack {stack} runs Kubernetes {version}; the catalog holds the checklist for "
            f"{listed.kubernetes_version} (components/catalog/ai_conformance.yaml)"
        )
        return CONFIG
    assessments = assess(plan, listed)
    project = product.read_project()
    repository = given.get("repoUrl") or project.repository
    meta = product.metadata(stack, version, project, given)
    text = product.render(product.product_document(listed, assessments, meta, repository), stack)
    if args.write is not None:
        try:
            args.write.parent.mkdir(parents=True, exist_ok=True)
            args.write.write_text(text, encoding="utf-8")
        except OSError as error:
            terminal.error(terminal.os_error(error))
            return IO
        terminal.error(f"conformance: wrote {args.write}")
    else:
        print(text, end="")
    unmet = unmet_musts(assessments)
    for a in unmet:
        wanted = f" (needs {', '.join(a.missing)})" if a.missing else ""
        terminal.error(f"conformance: MUST {a.requirement.id} is {a.status}{wanted}: {a.notes}")
    return FAILED if args.check and unmet else OK


def _write_evidence(folder: Path, lines: list[str], suite: str) -> int:
    """results.json, e2e.log and junit.xml in `folder`; OK when every test passed, FAILED otherwise."""
    parsed = results.parse_events(lines)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / results.RESULTS_JSON).write_text("".join(lines), encoding="utf-8")
    (folder / results.E2E_LOG).write_text(results.e2e_log(lines), encoding="utf-8")
    (folder / results.JUNIT_XML).write_text(results.junit_xml(parsed, suite), encoding="utf-8")
    for test in parsed.tests:
        print(f"{test.outcome.upper():<10} {test.name} ({test.seconds:.1f}s)")
    if not parsed.tests:
        terminal.error("conformance-run: the suite reported no test (see e2e.log)")
        return FAILED
    return FAILED if parsed.failed else OK


def conformance_run(args: argparse.Namespace, runner: ProcessRunner = stream_process) -> int:
    """Run the pinned suite with local Go (or print its Job with --job, or collect a Job's log with --collect) and
    leave results.json, e2e.log and junit.xml in the evidence folder."""
    planned, code = _planned(args)
    if planned is None:
        return code
    stack, plan = planned
    version = plan.spec.cluster.kubernetes_version
    pin = ai_conformance_suite(version)
    if pin is None:
        terminal.error(
            f"conformance-run: no ai-conformance suite is pinned for Kubernetes {version} "
            "(components/catalog/versions.yaml, ai_conformance_suite)"
        )
        return CONFIG
    target = autoscaling_target(plan)
    why = skipped_autoscaling(pin, target)
    if why is not None:
        terminal.error(f"conformance-run: the cluster autoscaling test will not run: {why}")
    if args.job:
        print(yaml.safe_dump_all(job_manifests(pin, target), sort_keys=False), end="")
        return OK
    evidence: Path = args.evidence or Path("conformance-evidence") / stack
    suite = f"ai-conformance@{pin.ref[:12]}"
    try:
        if args.collect is not None:
            saved = args.collect.read_text(encoding="utf-8").splitlines(keepends=True)
            return _write_evidence(evidence, saved, suite)
        source = checkout(pin, args.suite_dir or evidence / "suite")
        for command in source.commands:
            if runner(command, None, lambda line: print(line, end="", file=sys.stderr)) != 0:
                terminal.error(f"conformance-run: `{' '.join(command)}` failed")
                return IO
        kubeconfig = str(args.kubeconfig.resolve()) if args.kubeconfig is not None else None
        lines: list[str] = []
        code = runner(go_test_command(pin, target, kubeconfig), source.directory, _collecting(lines))
        outcome = _write_evidence(evidence, lines, suite)
    except OSError as error:
        terminal.error(f"conformance-run: {terminal.os_error(error)}")
        return IO
    terminal.error(f"conformance-run: evidence in {evidence}")
    return FAILED if code != 0 else outcome


def _collecting(lines: list[str]) -> Callable[[str], None]:
    """Keep each line of the run and show its test output on stderr as it comes (a run takes minutes to hours)."""

    def keep(line: str) -> None:
        lines.append(line)
        print(results.e2e_log([line]), end="", file=sys.stderr)

    return keep
