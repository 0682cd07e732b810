"""The suite's two tiers and the guard that keeps each test in its tier (README "Set-up and tests").

The everyday run (`pytest -q`) leaves out the tests marked `program`: those that run the Pulumi program under mocks
(`blueprint.plan.runner.run_offline`, directly, through `run_mocked`, the builders or a fixture) or start the
`blueprint` CLI, the policy pack or promtool in a process of their own. CI runs them in its `program` step
(`pytest -m program`). While a test of the everyday tier (marked neither `program` nor slow, charts or training)
sets up and runs, the guard listens for the audit events of a mocked run (`blueprint.run_mocked`) and of a new process
(`subprocess.Popen`, `os.system`, `os.posix_spawn`, `os.spawn`, `os.exec`; a shell's `-c` script and Python's `-c`
code are read too), and fails the test with the marker to add. While a module is collected it fails the same way:
collection precedes `-m`, so a run at import or in `pytest_generate_tests` costs every run, marked or not.
"""

from __future__ import annotations

import itertools
import os
import re
import shlex
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

MARKER = "program"
#: The markers of the tests the everyday run leaves out (pyproject's `addopts`): the guard watches every other test.
LEFT_OUT = (MARKER, "slow", "charts", "training")

#: The conftest fixtures that run the program under mocks: the conftest marks every test that uses one `program`.
PROGRAM_FIXTURES = frozenset({"training_stack", "inference_stack", "hybrid_stack", "each_shipped_plan"})

#: What `subprocess.Popen` is given to run: one command line, or the program and its arguments.
Command = str | bytes | os.PathLike[str] | Sequence[str | bytes | os.PathLike[str]]

#: The policy pack's directory: a process handed it runs the pack.
PACK_DIR = Path(__file__).resolve().parents[1] / "policies"


def spawned_program(args: Command) -> str | None:
    """What a new process with these arguments runs, when it is program-level: the `blueprint` CLI (its console
    script or `python -m blueprint.cli`), the policy pack, or promtool; None for anything else (a shell script
    under test, git, jq)."""
    argv = _argv(args)
    if not argv:
        return None
    command = Path(argv[0]).name
    if command == "blueprint" or any(a in ("blueprint", "blueprint.cli") for a in _module_args(argv)):
        return "the `blueprint` CLI in a process of its own"
    if command == "promtool":
        return "promtool, an external engine"
    if any(str(PACK_DIR) in a for a in argv):
        return "the policy pack in a process of its own"
    inline = _inline_code(argv)
    if inline is not None and command in SHELLS:
        return next(filter(None, (spawned_program(c) for c in _shell_commands(inline))), None)
    if inline is not None and CLI_IMPORT.search(inline):
        return "the `blueprint` CLI in a process of its own"
    return None


#: The shells whose `-c` script the guard reads for the commands it runs.
SHELLS = frozenset({"sh", "bash", "dash", "zsh"})
#: Python code that starts the CLI (`from blueprint.cli import main; main()`).
CLI_IMPORT = re.compile(r"\bblueprint\.cli\b|\bfrom\s+blueprint\s+import\s+cli\b")
#: What separates a shell script's commands.
SHELL_SEPARATORS = frozenset({";", "&&", "||", "|", "&", "(", ")", "\n"})


def _inline_code(argv: list[str]) -> str | None:
    """The script or code given to `-c` (a shell's, Python's), if any."""
    return next((value for flag, value in itertools.pairwise(argv) if flag == "-c"), None)


def _shell_commands(script: str) -> Iterator[list[str]]:
    """The commands of a shell script, each its words; a script shlex cannot read is one command."""
    lexer = shlex.shlex(script.replace("\n", " ; "), posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        words = list(lexer)
    except ValueError:
        yield script.split()
        return
    command: list[str] = []
    for word in words:
        if word in SHELL_SEPARATORS:
            yield command
            command = []
        elif command or not ASSIGNMENT.match(word):  # `VAR=value blueprint ...`: the command is after them
            command.append(word)
    yield command


#: A shell variable assignment before a command.
ASSIGNMENT = re.compile(r"[A-Za-z_]\w*=")


def _argv(args: Command) -> list[str]:
    if isinstance(args, str | bytes | os.PathLike):
        return os.fsdecode(args).split()  # one shell command line
    return [os.fsdecode(a) for a in args]


def _module_args(argv: list[str]) -> Iterator[str]:
    """The module names given to `-m` in `argv`."""
    for flag, value in itertools.pairwise(argv):
        if flag == "-m":
            yield value


class TierGuard:
    """Fails a test that is not marked `program` when it runs a program; fed by `sys.addaudithook(guard.audit)`."""

    def __init__(self) -> None:
        self.watched: str | None = None
        self.violations: list[str] = []
        self.collecting = False

    @contextmanager
    def watching(self, nodeid: str | None, collecting: bool = False) -> Iterator[None]:
        """Watch the test `nodeid` (None: a `program` test, not watched) while it sets up or runs; or, `collecting`,
        the collector `nodeid` while it collects."""
        self.watched, self.violations, self.collecting = nodeid, [], collecting
        try:
            yield
        finally:
            self.watched, self.collecting = None, False

    def audit(self, event: str, args: tuple[Any, ...]) -> None:
        if self.watched is None or event not in WATCHED_EVENTS:  # every import and open is an event: leave at once
            return
        if event == "blueprint.run_mocked":
            what = "the Pulumi program under mocks (blueprint.plan.runner.run_offline)"
        elif (command := _spawned_command(event, args)) is not None and (spawned := spawned_program(command)):
            what = spawned
        else:
            return
        if self.collecting:
            message = (
                f"{self.watched} runs {what} while it is collected: collection comes before `-m` selects, so every "
                f"run pays for it, `{MARKER}` or not; run it in a fixture or in the test, and mark those `{MARKER}`"
            )
        else:
            message = (
                f"{self.watched} runs {what} but is not marked `{MARKER}`: mark it `@pytest.mark.{MARKER}` (or its "
                f"module's `pytestmark`); the everyday run leaves program-level tests to `pytest -m {MARKER}`"
            )
        self.violations.append(message)
        pytest.fail(message, pytrace=False)


#: The audit events the guard reads: a mocked run, and each way of starting a process (`_spawned_command`).
WATCHED_EVENTS = frozenset(
    {"blueprint.run_mocked", "subprocess.Popen", "os.system", "os.posix_spawn", "os.exec", "os.spawn"}
)


def _spawned_command(event: str, args: tuple[Any, ...]) -> Command | None:
    """What a new process of this audit event runs (its arguments, or a shell's command line), if the event starts
    one: `subprocess.Popen` (executable, args, cwd, env), `os.system` (command), `os.posix_spawn` and `os.exec`
    (path, argv, env), `os.spawn` (mode, path, args, env)."""
    if event == "subprocess.Popen":
        return args[1]
    if event == "os.system":
        return ["sh", "-c", os.fsdecode(args[0])]
    if event in ("os.posix_spawn", "os.exec"):
        return args[1]
    if event == "os.spawn":
        return args[2]
    return None


def watched_id(item: pytest.Item) -> str | None:
    """The test's id when it is in the everyday tier (none of the `LEFT_OUT` markers), else None: not watched."""
    return None if any(item.get_closest_marker(name) for name in LEFT_OUT) else item.nodeid


def install() -> TierGuard:
    """The session's guard, listening to this process's audit events from now on (audit hooks stay for the life of
    the process; the guard only acts while it watches a test)."""
    guard = TierGuard()
    sys.addaudithook(guard.audit)
    return guard


#: The `blueprint` subcommands that plan the stack they are given (`--stack`/`--config`): they run its program.
PLANNING_SUBCOMMANDS = frozenset({"plan", "check", "deployer-policy", "preflight"})


def cli_tier(argv: Sequence[str]) -> list[pytest.MarkDecorator]:
    """The marks of a test parametrized with `blueprint ARGV`: `program` when the command runs the program (it plans
    a stack, not a saved plan; or `schema --write`, which plans the shipped stacks for the generated docs)."""
    plans_a_stack = argv[0] in PLANNING_SUBCOMMANDS and "--plan" not in argv
    writes_the_docs = argv[0] == "schema" and "--write" in argv
    return [getattr(pytest.mark, MARKER)] if plans_a_stack or writes_the_docs else []


#: The chart tier's directory: every test module there is marked `charts` (tests/test_tiers.py checks it).
CHARTS_DIR = Path(__file__).resolve().parent / "charts"


def leaves_out(expression: str, marker: str) -> bool:
    """Whether the `-m` expression leaves out every test marked `marker`, whatever other markers it has: false both
    with `marker` alone and with every marker set. Then the run need not even import that tier's modules."""
    if not expression:
        return False
    from _pytest.mark.expression import Expression  # the parser `-m` itself uses; not in pytest's public API

    def only(name: str, /, **_: str | int | bool | None) -> bool:
        return name == marker

    def every(name: str, /, **_: str | int | bool | None) -> bool:
        return True

    compiled = Expression.compile(expression)
    return not compiled.evaluate(only) and not compiled.evaluate(every)
