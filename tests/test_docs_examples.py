"""The README and docs work as written: every stack example they show plans, and every `blueprint` command line
they show runs against the shipped stacks with the exit code the docs give (docs/architecture.md, "Examples in the
docs", states the conventions).

- A ```yaml block that starts with `config:` is a whole stack file: `blueprint plan --config FILE` plans it with no
  mandatory policy violation. A file shown as refused has `<!-- stack-example: refused -->` on the line above it,
  and the next block shows `$ blueprint plan --config FILE` with what it prints: the exit is 2 and stderr is that.
  One the text calls a shipped stack has `<!-- stack-example: same plan as stacks/Pulumi.NAME.yaml -->`: its plan
  (every resource, the summary) is that stack's.
- A ```yaml block of `gpu-clusters:SECTION` keys is a fragment of a stack file. The line above names the shipped
  stack it fits, `<!-- stack-example: fragment of stacks/Pulumi.training.yaml -->`; each of its sections takes the
  place of that section in the stack, as pasting it there would, except that its node pools take the place of the
  stack's pools of the same name and the others stay (a fragment shows the pools it is about). The result plans.
- Any other ```yaml block is listed in `NOT_STACK_FILES` with what it is.
- Every `blueprint` line of a ```bash block runs in process (`blueprint_cli`) from a scratch directory that holds
  the checkout's `stacks/` and `policies/` and the files the docs name as the reader's own (`PLACEHOLDER_FILES`),
  so whatever a command writes lands there; `schema --write` writes copies of the generated files. The exit is 0
  unless `EXPECTED_EXIT` says otherwise and why; a pipe is run as `PIPES` says.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from blueprint import reference, rules_reference, stack_figures
from blueprint.plan.check import has_mandatory
from blueprint.plan.stack_yaml import read_yaml
from tests.builders import CliResult, shipped_plan

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
MARKER = re.compile(
    r"<!-- stack-example: (?:(?P<refused>refused)|fragment of (?P<fragment_of>\S+)|same plan as (?P<same_as>\S+)) -->"
)
PROJECT = "gpu-clusters"

#: ```yaml blocks that are not stack files, by document and first line: what each is.
NOT_STACK_FILES = {
    ("node-pools.md", "capacity: {type: on-demand}                      # default"): (
        "a pool's `capacity` key, four alternatives side by side (not one mapping)"
    ),
    (
        "node-pools.md",
        "instanceRefresh: {enabled: true, minHealthyPercentage: 50, instanceWarmupSeconds: 900, skipMatching: true}",
    ): ("a pool's `instanceRefresh` key"),
    ("operations.md", "apiVersion: apps/v1"): "a Kubernetes Deployment the reader applies with kubectl",
    ("storage.md", "volumes:"): "the volumes of a pod spec that mounts the Lustre claim",
}

#: Files the docs name as the reader's own, made in the scratch directory from a shipped file.
PLACEHOLDER_FILES = {
    "path/to/Pulumi.other.yaml": ROOT / "stacks" / "Pulumi.training.yaml",  # "any stack file": one of the reader's
    "my-policy-config.json": ROOT / "policies" / "policy-config.json",  # the reader's policy config
}

#: Subcommands whose documented exit here is not 0, with why. `verify` needs a cluster: it runs as written with no
#: kubeconfig to be found (KUBECONFIG names a missing file, an empty home, no Pulumi CLI on PATH), so its argument
#: checks and the stack's expectations run, then it stops with the exit the README documents for bad input.
EXPECTED_EXIT = {"verify": 2}


def _a40_server_commands(plan: dict[str, Any]) -> list[str]:
    return [c for p in plan["summary"]["nodePools"] if p["name"] == "a40" for c in p["gpuRuntime"]["serverCommands"]]


#: A pipe after a `blueprint` command, by its text: the same filter in Python (jq need not be installed; where it
#: is, the test runs jq too and compares).
PIPES: dict[str, Callable[[dict[str, Any]], list[str]]] = {
    """jq -r '.summary.nodePools[] | select(.name=="a40") | .gpuRuntime.serverCommands[]'""": _a40_server_commands,
}


@dataclass(frozen=True)
class Block:
    doc: Path
    line: int
    lang: str
    body: str
    above: str  # the last non-blank line before the fence

    @property
    def where(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"


def _blocks() -> list[Block]:
    out = []
    for doc in DOCS:
        text = doc.read_text()
        for match in FENCE.finditer(text):
            before = [line for line in text[: match.start()].splitlines() if line.strip()]
            line = text.count("\n", 0, match.start()) + 1
            out.append(Block(doc, line, match.group(1), match.group(2), before[-1] if before else ""))
    return out


BLOCKS = _blocks()


def _top_keys(block: Block) -> list[str]:
    loaded = yaml.safe_load(textwrap.dedent(block.body))
    return list(loaded) if isinstance(loaded, dict) else []


def _stack_examples() -> list[Block]:
    return [b for b in BLOCKS if b.lang == "yaml" and not _not_a_stack_file(b)]


def _not_a_stack_file(block: Block) -> bool:
    return (block.doc.name, block.body.splitlines()[0]) in NOT_STACK_FILES


def test_every_yaml_block_is_a_stack_file_a_marked_fragment_or_listed() -> None:
    unclassified = []
    for block in _stack_examples():
        keys = _top_keys(block)
        whole = keys == ["config"]
        fragment = bool(keys) and all(k.startswith(f"{PROJECT}:") for k in keys)
        marked = MARKER.search(block.above)
        if not (whole or (fragment and marked and marked["fragment_of"])):
            unclassified.append(f"{block.where} (top-level keys {keys})")
    assert not unclassified, (
        "yaml blocks that are neither a stack file (`config:`), a fragment marked "
        "`<!-- stack-example: fragment of stacks/Pulumi.NAME.yaml -->` nor listed in NOT_STACK_FILES: "
        f"{unclassified}"
    )


# ----------------------------------------------------------------------------------------------- running the CLI
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
    for name in ("stacks", "policies"):
        (work / name).symlink_to(ROOT / name)
    for name, source in PLACEHOLDER_FILES.items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, work / name)
    for key, original in GENERATED_PATHS.items():
        copy = tmp_path / f"{key}{original.suffix}"
        shutil.copyfile(original, copy)
        module, attr = key.rsplit(".", 1)
        monkeypatch.setattr(f"{module}.{attr}", copy)
    monkeypatch.setattr(reference, "_plan_shipped", shipped_plan)
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
    """One `blueprint` command line a document shows: its arguments and what it is piped into."""

    where: str
    argv: tuple[str, ...]
    pipe: str | None

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


def _is_blueprint(token: str) -> bool:
    return Path(token).name == "blueprint"


def _commands() -> list[DocCommand]:
    out = []
    for block in BLOCKS:
        if block.lang != "bash":
            continue
        for offset, line in _logical_lines(block.body):
            command, _, pipe = line.partition(" | ") if " | " in line.split("#")[0] else (line, "", "")
            tokens = shlex.split(command, comments=True)
            if not tokens or not any(_is_blueprint(t) for t in tokens):
                continue
            where = f"{block.doc.relative_to(ROOT)}:{block.line + 1 + offset}"
            if not _is_blueprint(tokens[0]):
                raise AssertionError(f"{where}: `blueprint` is not the command of this line, so it cannot be run")
            out.append(DocCommand(where, tuple(tokens[1:]), " ".join(pipe.split("#")[0].split()) or None))
    return out


COMMANDS = _commands()


def test_the_docs_show_commands_of_every_subcommand() -> None:
    """The extraction finds what the docs show (a regex that found nothing would pass every test below)."""
    shown = {c.argv[0] for c in COMMANDS}
    assert {"plan", "check", "catalog", "schema", "simulate", "verify"} <= shown


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


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.id)
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
    result = blueprint_cli(*command.argv)
    expected = EXPECTED_EXIT.get(subcommand, 0)
    assert result.returncode == expected, (
        f"{command.id}: exit {result.returncode}, the docs say {expected}\n{result.stderr}"
    )
    assert "Traceback" not in result.stderr
    if subcommand == "verify":
        assert "no kubeconfig" in result.stderr  # got past its arguments and the stack's expectations
    if "--plot" in command.argv:
        assert (scratch / command.argv[command.argv.index("--plot") + 1]).stat().st_size > 0
    if "json" in command.argv and result.returncode == 0:
        json.loads(result.stdout)
    if command.pipe:
        assert _run_pipe(command.pipe, result.stdout), f"`{command.pipe}` printed nothing"
    assert _changed_generated_files(tmp_path) == [], "the generated docs were stale: run `blueprint schema --write`"


# ----------------------------------------------------------------------------------------------- stack examples
def _whole_files() -> list[Block]:
    return [b for b in _stack_examples() if _top_keys(b) == ["config"]]


def _fragments() -> list[Block]:
    return [b for b in _stack_examples() if _top_keys(b) != ["config"]]


def _merged(stack: dict[str, Any], fragment: dict[str, Any]) -> dict[str, Any]:
    """`stack` (a stack file) with the fragment's sections in place of its own; node pools by name."""
    config = dict(stack["config"])
    for key, value in fragment.items():
        if key == f"{PROJECT}:nodePools":
            pools = {p["name"]: p for p in config.get(key, [])}
            pools.update({p["name"]: p for p in value})
            value = list(pools.values())
        config[key] = value
    return {**stack, "config": config}


def _plans(result: CliResult, where: str) -> None:
    assert result.returncode == 0, f"{where} does not plan:\n{result.stderr}"
    violations = json.loads(result.stdout)["violations"]
    assert not has_mandatory(violations), f"{where}: mandatory violations {violations}"


def _refused(block: Block) -> bool:
    marker = MARKER.search(block.above)
    return bool(marker and marker["refused"])


@pytest.mark.parametrize("block", [b for b in _whole_files() if not _refused(b)], ids=lambda b: b.where)
def test_every_stack_file_the_docs_show_plans(
    block: Block, scratch: Path, blueprint_cli: Callable[..., CliResult]
) -> None:
    marker = MARKER.search(block.above)
    same_as = marker["same_as"] if marker else None
    path = scratch / (Path(same_as).name if same_as else "Pulumi.example.yaml")  # the file name names the stack
    path.write_text(block.body)
    result = blueprint_cli("plan", "--config", str(path), "--format", "json")
    _plans(result, block.where)
    if same_as:
        shipped = shipped_plan(path.name.removeprefix("Pulumi.").removesuffix(".yaml"))
        plan = json.loads(result.stdout)
        assert plan["summary"] == shipped["summary"], f"{block.where} plans another summary than {same_as}"
        assert plan["resources"] == shipped["resources"], f"{block.where} plans other resources than the stack"


@pytest.mark.parametrize("block", _fragments(), ids=lambda b: b.where)
def test_every_stack_fragment_the_docs_show_plans_in_its_stack(
    block: Block, scratch: Path, blueprint_cli: Callable[..., CliResult]
) -> None:
    marker = MARKER.search(block.above)
    assert marker and marker["fragment_of"], f"{block.where}: mark it with the stack it belongs to"
    target = ROOT / marker["fragment_of"]
    fragment_file = scratch / "fragment.yaml"
    fragment_file.write_text(textwrap.dedent(block.body))
    merged = _merged(read_yaml(target), read_yaml(fragment_file))
    path = scratch / target.name
    path.write_text(yaml.safe_dump(merged, sort_keys=False))
    _plans(blueprint_cli("plan", "--config", str(path), "--format", "json"), block.where)


def _refused_examples() -> list[tuple[Block, Block]]:
    """(stack file, the block after it that shows the command and its output) for each refused example."""
    pairs = []
    for block in _whole_files():
        if _refused(block):
            after = [b for b in BLOCKS if b.doc == block.doc and b.line > block.line]
            assert after, f"{block.where}: a refused example is followed by the command and what it prints"
            pairs.append((block, after[0]))
    return pairs


def test_the_docs_show_a_refused_example() -> None:
    assert _refused_examples(), "docs/configuration.md shows how a refused stack file is reported"


@pytest.mark.parametrize("pair", _refused_examples(), ids=lambda p: p[0].where)
def test_a_refused_stack_file_prints_what_the_docs_show(
    pair: tuple[Block, Block], scratch: Path, blueprint_cli: Callable[..., CliResult]
) -> None:
    block, shown = pair
    prompt, *printed = shown.body.splitlines()
    argv = shlex.split(prompt.removeprefix("$ "))
    assert _is_blueprint(argv[0]) and "--config" in argv, f"{shown.where}: shows `$ blueprint ... --config FILE`"
    (scratch / argv[argv.index("--config") + 1]).write_text(block.body)
    result = blueprint_cli(*argv[1:])
    assert result.returncode == 2
    assert result.stderr.splitlines() == printed, f"{shown.where} shows other lines than blueprint prints now"
