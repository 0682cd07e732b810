"""Every `blueprint` command line the README and docs show in a ```bash block runs as written against the shipped
stacks, with the exit code the docs give (docs/architecture.md, "Examples in the docs").

Each runs in process (`blueprint_cli`) from a scratch directory that holds the checkout's `stacks/` and `policies/`
and the files the docs name as the reader's own (`PLACEHOLDER_FILES`), so whatever a command writes lands there;
`schema --write` writes copies of the generated files. The exit is 0 unless `EXPECTED_EXIT` says otherwise and
why; a pipe is run as `PIPES` says.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from blueprint import reference, rules_reference, stack_figures
from blueprint.plan import runner
from blueprint.plan.runner import stack_file
from tests.builders import CliResult, shipped_plan
from tests.doc_blocks import BLOCKS, ROOT, is_blueprint
from tests.test_preflight import without_credentials
from tests.tiers import cli_tier

#: Files the docs name as the reader's own, made in the scratch directory from a shipped file.
PLACEHOLDER_FILES = {
    "stacks/Pulumi.mysmoke.yaml": ROOT / "stacks" / "Pulumi.smoke.yaml",  # the first deploy's copy (`cp stacks/...`)
    "path/to/Pulumi.other.yaml": ROOT / "stacks" / "Pulumi.training.yaml",  # "any stack file": one of the reader's
    "my-policy-config.json": ROOT / "policies" / "policy-config.json",  # the reader's policy config
    "plan.json": ROOT / "tests" / "data" / "plans" / "training.json",  # a saved `plan --format json` (check --plan)
}

#: Subcommands whose documented exit here is not 0, with why. `verify` needs a cluster: it runs as written with no
#: kubeconfig to be found (KUBECONFIG names a missing file, an empty home, no Pulumi CLI on PATH), so its argument
#: checks and the stack's expectations run, then it stops with the exit the README documents for no cluster.
#: `preflight` needs AWS credentials: it runs with none to be found (no variables, shared files or instance
#: metadata), so the stack is planned and its needs derived, then it stops with one line and the exit for no AWS.
EXPECTED_EXIT = {"verify": 74, "preflight": 74}


def _a40_server_commands(plan: dict[str, Any]) -> list[str]:
    return [c for p in plan["summary"]["nodePools"] if p["name"] == "a40" for c in p["gpuRuntime"]["serverCommands"]]


#: A pipe after a `blueprint` command, by its text: the same filter in Python (jq need not be installed; where it
#: is, the test runs jq too and compares).
PIPES: dict[str, Callable[[dict[str, Any]], list[str]]] = {
    """jq -r '.summary.nodePools[] | select(.name=="a40") | .gpuRuntime.serverCommands[]'""": _a40_server_commands,
}


def _generated_paths() -> dict[str, Path]:
    """Every file `blueprint schema --write` writes, by module and constant (`blueprint.reference.SCHEMA_PATH`)."""
    return {
        f"{module.__name__}.{attr}": value
        for module in (reference, rules_reference, stack_figures)
        for attr, value in vars(module).items()
        if attr.endswith("_PATH") and isinstance(value, Path)
    }


GENERATED_PATHS = _generated_paths()


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory like the checkout for the commands: `stacks/`, `policies/` and the reader's files. The
    files `schema --write` writes are copies in `tmp_path`, and it plans the shipped stacks as the session did."""
    work = tmp_path / "work"
    work.mkdir()
    for name in ("policies", "Pulumi.yaml"):
        (work / name).symlink_to(ROOT / name)
    (work / "stacks").mkdir()
    for shipped in (ROOT / "stacks").iterdir():
        (work / "stacks" / shipped.name).symlink_to(shipped)
    for name, source in PLACEHOLDER_FILES.items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, work / name)
    for key, original in GENERATED_PATHS.items():
        copy = tmp_path / f"{key}{original.suffix}"
        shutil.copyfile(original, copy)
        module, attr = key.rsplit(".", 1)
        monkeypatch.setattr(f"{module}.{attr}", copy)
    monkeypatch.setattr(reference, "_plan_shipped", shipped_plan)
    # `--stack NAME` reads stackConfigDir under the project (runner.stack_file): here, the scratch copy of stacks/.
    monkeypatch.setattr(runner, "stack_file", lambda stack, project_dir=work: stack_file(stack, work))
    monkeypatch.chdir(work)
    return work


def _changed_generated_files(tmp_path: Path) -> list[str]:
    return [
        key
        for key, original in GENERATED_PATHS.items()
        if (tmp_path / f"{key}{original.suffix}").read_bytes() != original.read_bytes()
    ]


@dataclass(frozen=True)
class DocCommand:
    """One `blueprint` command line a document shows: its arguments, what it is piped into and the file its stdout
    is redirected to (`> FILE`)."""

    where: str
    argv: tuple[str, ...]
    pipe: str | None
    redirect: str | None = None

    @property
    def id(self) -> str:
        return f"{self.where} {' '.join(self.argv)}"


def _logical_lines(body: str) -> Iterator[tuple[int, str]]:
    """(offset, line) with backslash continuations joined."""
    pending, start = "", 0
    for offset, line in enumerate(body.splitlines()):
        if not pending:
            start = offset
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        yield start, pending + line
        pending = ""


def _commands() -> list[DocCommand]:
    out = []
    for block in BLOCKS:
        if block.lang != "bash":
            continue
        for offset, line in _logical_lines(block.body):
            command, _, pipe = line.partition(" | ") if " | " in line.split("#")[0] else (line, "", "")
            tokens = shlex.split(command, comments=True)
            if not tokens or not any(is_blueprint(t) for t in tokens):
                continue
            where = f"{block.doc.relative_to(ROOT)}:{block.line + 1 + offset}"
            if not is_blueprint(tokens[0]):
                raise AssertionError(f"{where}: `blueprint` is not the command of this line, so it cannot be run")
            argv, redirect = tokens[1:], None
            if ">" in argv:
                argv, redirect = argv[: argv.index(">")], argv[argv.index(">") + 1]
            out.append(DocCommand(where, tuple(argv), " ".join(pipe.split("#")[0].split()) or None, redirect))
    return out


COMMANDS = _commands()


def test_the_docs_show_commands_of_every_subcommand() -> None:
    """The extraction finds what the docs show (a regex that found nothing would pass every test below)."""
    shown = {c.argv[0] for c in COMMANDS}
    assert {"plan", "check", "catalog", "schema", "simulate", "verify", "preflight"} <= shown


def _without_a_kubeconfig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    empty = tmp_path / "empty-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))  # no Pulumi CLI to read the stack's kubeconfig output from


def _run_pipe(pipe: str, stdout: str) -> list[str]:
    if pipe not in PIPES:
        raise AssertionError(f"no way to run the pipe `{pipe}`: add it to PIPES")
    expected = PIPES[pipe](json.loads(stdout))
    jq = shutil.which("jq")
    if jq and pipe.startswith("jq "):
        done = subprocess.run([jq, *shlex.split(pipe)[1:]], input=stdout, capture_output=True, text=True, check=True)
        assert done.stdout.splitlines() == expected, "the Python stand-in in PIPES disagrees with jq"
    return expected


@pytest.mark.parametrize("command", [pytest.param(c, id=c.id, marks=cli_tier(c.argv)) for c in COMMANDS])
def test_every_command_the_docs_show_runs(
    command: DocCommand,
    scratch: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    blueprint_cli: Callable[..., CliResult],
) -> None:
    subcommand = command.argv[0]
    if subcommand == "verify":
        _without_a_kubeconfig(tmp_path, monkeypatch)
    if subcommand == "preflight":
        without_credentials(monkeypatch, tmp_path)
    result = blueprint_cli(*command.argv)
    expected = EXPECTED_EXIT.get(subcommand, 0)
    assert result.returncode == expected, (
        f"{command.id}: exit {result.returncode}, the docs say {expected}\n{result.stderr}"
    )
    assert "Traceback" not in result.stderr
    if subcommand == "verify":
        assert "no kubeconfig" in result.stderr  # got past its arguments and the stack's expectations
    if subcommand == "preflight":  # got past planning the stack: the credentials are what is missing
        assert result.stderr.splitlines() == ["blueprint: preflight: cannot ask AWS: Unable to locate credentials"]
    if "--plot" in command.argv:
        assert (scratch / command.argv[command.argv.index("--plot") + 1]).stat().st_size > 0
    if "json" in command.argv and result.returncode == 0:
        json.loads(result.stdout)
    if command.pipe:
        assert _run_pipe(command.pipe, result.stdout), f"`{command.pipe}` printed nothing"
    if command.redirect and command.redirect.endswith(".json"):
        json.loads(result.stdout)  # what the next lines of the doc read with jq
    assert _changed_generated_files(tmp_path) == [], "the generated docs were stale: run `blueprint schema --write`"
