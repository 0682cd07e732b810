"""`blueprint conformance-run`: the upstream ai-conformance suite's command from the plan, its Job, and the evidence
collected from a run (the processes stubbed at the boundary: no Go, git or cluster here)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
import yaml

from blueprint.conformance import results
from blueprint.conformance.command import conformance_run
from blueprint.conformance.suite import (
    GO_TEST_TIMEOUT,
    go_test_command,
    job_manifests,
    skipped_autoscaling,
    stream_process,
)
from blueprint.exit_codes import FAILED, IO, OK
from components.catalog.versions import ConformanceSuitePin, ai_conformance_suite
from components.planning.conformance import AutoscalingTarget
from components.yaml_loader import SAFE_LOADER
from tests.builders import cli_parser


def _pinned() -> ConformanceSuitePin:
    pin = ai_conformance_suite("1.35")
    assert pin is not None
    return pin


PIN = _pinned()
#: A later suite whose binary defines the autoscaling test's flags (the pin lists them once it moves there).
LATER = PIN.model_copy(
    update={"flags": frozenset({*PIN.flags, "autoscaler-node-pool-label", "autoscaler-allocation-mode"})}
)
L40S = AutoscalingTarget("l40s", "gpu-clusters/pool=l40s", "device-plugin", 1, 8)


def event(action: str, test: str | None = None, output: str | None = None, elapsed: float | None = None) -> str:
    fields: dict[str, Any] = {"Action": action, "Package": "github.com/kubernetes-sigs/ai-conformance/test"}
    if test is not None:
        fields["Test"] = test
    if output is not None:
        fields["Output"] = output
    if elapsed is not None:
        fields["Elapsed"] = elapsed
    return json.dumps(fields) + "\n"


PASSING = [
    event("start"),
    event("run", "TestSecureAcceleratorAccess"),
    event("output", "TestSecureAcceleratorAccess", "=== RUN   TestSecureAcceleratorAccess\n"),
    event("run", "TestSecureAcceleratorAccess/PositiveAccessTest"),
    event("output", "TestSecureAcceleratorAccess/PositiveAccessTest", "    PASS: access verified.\n"),
    event("pass", "TestSecureAcceleratorAccess/PositiveAccessTest", elapsed=12.5),
    event("pass", "TestSecureAcceleratorAccess", elapsed=40.0),
    event("output", output="PASS\n"),
    event("pass", elapsed=41.0),
]
FAILING = [
    event("run", "TestSecureAcceleratorAccess"),
    event("run", "TestSecureAcceleratorAccess/NegativeIsolationTest"),
    event("output", "TestSecureAcceleratorAccess/NegativeIsolationTest", "    VIOLATION: saw the accelerator\n"),
    event("fail", "TestSecureAcceleratorAccess/NegativeIsolationTest", elapsed=3.0),
    event("fail", "TestSecureAcceleratorAccess", elapsed=30.0),
]


# ----------------------------------------------------------------------------------------------- the command
def test_the_pinned_suite_runs_without_the_autoscaling_flags_it_does_not_define() -> None:
    assert go_test_command(PIN, L40S, "/home/me/.kube/config") == [
        "go",
        "test",
        "-v",
        "-json",
        "-count=1",
        f"-timeout={GO_TEST_TIMEOUT}",
        "./test",
        "-args",
        "-kubeconfig=/home/me/.kube/config",
        "-accelerator-type=nvidia",
    ]
    assert "no cluster autoscaling test" in str(skipped_autoscaling(PIN, L40S))


def test_a_suite_with_the_autoscaling_test_gets_the_plans_pool_label_and_allocation_mode() -> None:
    args = go_test_command(LATER, L40S, None)
    assert args[-3:] == [
        "-accelerator-type=nvidia",
        "-autoscaler-node-pool-label=gpu-clusters/pool=l40s",
        "-autoscaler-allocation-mode=device-plugin",
    ]
    assert not any(a.startswith("-kubeconfig") for a in args)
    assert skipped_autoscaling(LATER, L40S) is None


def test_the_autoscaling_test_is_reported_skipped_without_a_pool_or_with_a_pool_at_zero() -> None:
    assert "no GPU pool" in str(skipped_autoscaling(LATER, None))
    at_zero = AutoscalingTarget("h100", "gpu-clusters/pool=h100", "device-plugin", 0, 4)
    assert "scaling.min 0" in str(skipped_autoscaling(LATER, at_zero))
    assert go_test_command(LATER, None, None)[-1] == "-accelerator-type=nvidia"


def test_a_pin_needs_a_commit_or_a_release_tag_and_an_exact_go_image() -> None:
    with pytest.raises(ValueError):
        ConformanceSuitePin.model_validate({**PIN.model_dump(), "ref": "main"})
    with pytest.raises(ValueError):
        ConformanceSuitePin.model_validate({**PIN.model_dump(), "go_image": "golang:latest"})


# ------------------------------------------------------------------------------------------------------ the Job
def test_the_job_checks_the_pin_out_and_runs_the_same_command_in_cluster() -> None:
    namespace, account, binding, job = job_manifests(LATER, L40S)
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert binding["roleRef"]["name"] == "cluster-admin"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "ai-conformance", "namespace": "ai-conformance"}]
    spec = job["spec"]["template"]["spec"]
    assert spec["serviceAccountName"] == account["metadata"]["name"]
    assert job["spec"]["backoffLimit"] == 0 and spec["restartPolicy"] == "Never"
    (container,) = spec["containers"]
    assert container["image"] == PIN.go_image
    script = container["command"][-1]
    assert f"git clone --quiet {PIN.repository} " in script
    assert f"git checkout --quiet {PIN.ref}" in script
    assert script.endswith("exec " + " ".join(go_test_command(LATER, L40S, None)))
    assert "-kubeconfig" not in script  # in-cluster credentials
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def test_job_prints_the_manifests_for_the_stack(blueprint_cli: Any) -> None:
    result = blueprint_cli("conformance-run", "--stack", "inference", "--job")
    assert result.returncode == OK
    kinds = [d["kind"] for d in yaml.load_all(result.stdout, Loader=SAFE_LOADER)]
    assert kinds == ["Namespace", "ServiceAccount", "ClusterRoleBinding", "Job"]
    assert "cluster autoscaling test will not run" in result.stderr


# -------------------------------------------------------------------------------------------- a run, stubbed
class FakeProcesses:
    """Stands in for git and go: records each command and plays `lines` with `code` for `go test`."""

    def __init__(self, lines: Sequence[str], code: int, git_code: int = 0, missing: str | None = None) -> None:
        self.lines, self.code, self.git_code, self.missing = lines, code, git_code, missing
        self.calls: list[tuple[list[str], Path | None]] = []

    def __call__(self, argv: Sequence[str], cwd: Path | None, on_line: Callable[[str], None]) -> int:
        self.calls.append((list(argv), cwd))
        if argv[0] == self.missing:
            raise FileNotFoundError(2, "No such file or directory", argv[0])
        if argv[0] == "git":
            return self.git_code
        for line in self.lines:
            on_line(line)
        return self.code


def run(tmp_path: Path, fake: FakeProcesses, *extra: str) -> int:
    args = cli_parser().parse_args(
        ["conformance-run", "--stack", "inference", "--evidence", str(tmp_path / "evidence"), *extra]
    )
    return conformance_run(args, runner=fake)


def test_a_passing_run_clones_the_pin_runs_go_and_leaves_the_evidence(tmp_path: Path, capsys: Any) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    fake = FakeProcesses(PASSING, 0)
    assert run(tmp_path, fake, "--kubeconfig", str(kubeconfig)) == OK
    suite = tmp_path / "evidence" / "suite"
    assert [c for c, _ in fake.calls[:2]] == [
        ["git", "clone", "--quiet", PIN.repository, str(suite)],
        ["git", "-C", str(suite), "checkout", "--quiet", PIN.ref],
    ]
    command, cwd = fake.calls[2]
    assert cwd == suite and command == go_test_command(PIN, L40S, str(kubeconfig.resolve()))
    evidence = tmp_path / "evidence"
    assert (evidence / results.RESULTS_JSON).read_text() == "".join(PASSING)
    assert (evidence / results.E2E_LOG).read_text() == (
        "=== RUN   TestSecureAcceleratorAccess\n    PASS: access verified.\nPASS\n"
    )
    junit = ElementTree.parse(evidence / results.JUNIT_XML).getroot()
    assert (junit.get("tests"), junit.get("failures")) == ("2", "0")
    assert [c.get("name") for c in junit] == [
        "TestSecureAcceleratorAccess",
        "TestSecureAcceleratorAccess/PositiveAccessTest",
    ]
    assert "PASS       TestSecureAcceleratorAccess (40.0s)" in capsys.readouterr().out


def test_an_existing_checkout_is_not_cloned_again(tmp_path: Path) -> None:
    suite = tmp_path / "mine"
    (suite / ".git").mkdir(parents=True)
    fake = FakeProcesses(PASSING, 0)
    assert run(tmp_path, fake, "--suite-dir", str(suite)) == OK
    assert fake.calls[0][0] == ["git", "-C", str(suite), "checkout", "--quiet", PIN.ref]


def test_a_failing_test_exits_1_with_the_failure_in_junit(tmp_path: Path) -> None:
    assert run(tmp_path, FakeProcesses(FAILING, 1)) == FAILED
    junit = ElementTree.parse(tmp_path / "evidence" / results.JUNIT_XML).getroot()
    assert junit.get("failures") == "2"
    failed = junit.find("testcase[@name='TestSecureAcceleratorAccess/NegativeIsolationTest']/failure")
    assert failed is not None and "VIOLATION" in str(failed.text)


def test_a_suite_that_does_not_build_exits_1_with_its_output_kept(tmp_path: Path) -> None:
    lines = ["# github.com/kubernetes-sigs/ai-conformance/test\n", "flag provided but not defined: -x\n"]
    assert run(tmp_path, FakeProcesses(lines, 1)) == FAILED
    evidence = tmp_path / "evidence"
    assert "flag provided but not defined" in (evidence / results.E2E_LOG).read_text()
    junit = ElementTree.parse(evidence / results.JUNIT_XML).getroot()
    assert junit.get("failures") == "1" and "not defined" in str(junit.findtext("system-out"))


def test_a_test_cut_off_by_the_timeout_counts_as_failed(tmp_path: Path) -> None:
    unfinished = [event("run", "TestSecureAcceleratorAccess"), event("output", "TestSecureAcceleratorAccess", "x\n")]
    assert run(tmp_path, FakeProcesses(unfinished, 1)) == FAILED
    junit = ElementTree.parse(tmp_path / "evidence" / results.JUNIT_XML).getroot()
    assert junit.find("testcase/failure").get("message") == "did not finish"  # type: ignore[union-attr]


@pytest.mark.parametrize("missing", ["git", "go"])
def test_git_or_go_missing_is_an_io_error(tmp_path: Path, missing: str, capsys: Any) -> None:
    assert run(tmp_path, FakeProcesses(PASSING, 0, missing=missing)) == IO
    assert missing in capsys.readouterr().err


def test_a_clone_that_fails_is_an_io_error_and_go_never_runs(tmp_path: Path) -> None:
    fake = FakeProcesses(PASSING, 0, git_code=128)
    assert run(tmp_path, fake) == IO
    assert all(c[0] == "git" for c, _ in fake.calls)


def test_collect_turns_a_jobs_log_into_the_evidence_without_running_anything(tmp_path: Path) -> None:
    log = tmp_path / "results.json"
    log.write_text("".join(FAILING))
    fake = FakeProcesses([], 0)
    assert run(tmp_path, fake, "--collect", str(log)) == FAILED
    assert fake.calls == []
    assert (tmp_path / "evidence" / results.RESULTS_JSON).read_text() == "".join(FAILING)


def test_stream_process_hands_over_each_line_and_the_exit_code() -> None:
    seen: list[str] = []
    code = stream_process([sys.executable, "-c", "print('a'); print('b'); raise SystemExit(3)"], None, seen.append)
    assert (code, seen) == (3, ["a\n", "b\n"])
