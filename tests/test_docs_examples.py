"""Every stack example the README and docs show plans (docs/architecture.md, "Examples in the docs").

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
"""

from __future__ import annotations

import json
import re
import shlex
import textwrap
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from blueprint.plan.check import has_mandatory
from blueprint.plan.stack_yaml import read_yaml
from components.yaml_loader import parse_yaml
from tests.builders import CliResult, shipped_plan
from tests.doc_blocks import BLOCKS, ROOT, Block, is_blueprint

MARKER = re.compile(
    r"<!-- stack-example: (?:(?P<refused>refused)|fragment of (?P<fragment_of>\S+)|same plan as (?P<same_as>\S+)) -->"
)
PROJECT = "gpu-clusters"

#: ```yaml blocks that are not stack files, by document and first key: what each is.
NOT_STACK_FILES = {
    ("storage.md", "spec"): "a pod spec that writes in its namespace's directory on Lustre (runAsUser, subPath)",
    ("node-pools.md", "capacity"): "a pool's `capacity` key, four alternatives side by side (not one mapping)",
    ("node-pools.md", "instanceRefresh"): "a pool's `instanceRefresh` key",
    ("operations.md", "apiVersion"): "Kubernetes objects the reader applies with kubectl (a Deployment, a PodMonitor)",
    ("storage.md", "volumes"): "the volumes of a pod spec that mounts the Lustre claim",
}


@cache
def _top_keys(block: Block) -> list[str]:
    """Read once per block: the collection and the classification test both ask (the libyaml loader, as the
    catalog's)."""
    loaded = parse_yaml(textwrap.dedent(block.body))
    return list(loaded) if isinstance(loaded, dict) else []


def _stack_examples() -> list[Block]:
    return [b for b in BLOCKS if b.lang == "yaml" and not _not_a_stack_file(b)]


def _not_a_stack_file(block: Block) -> bool:
    return (block.doc.name, block.body.split(":", 1)[0].strip()) in NOT_STACK_FILES


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


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The working directory the examples are written to and planned from."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


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


@pytest.mark.program
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


@pytest.mark.program
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


def test_every_command_shown_with_its_output_is_a_refused_example() -> None:
    """`$ blueprint ...` outside a ```bash block shows a run and its output: only the refused examples do, and
    their output is checked below."""
    checked = {shown.where for _, shown in _refused_examples()}
    shown = [
        block.where
        for block in BLOCKS
        if block.lang not in ("bash", "yaml")
        and any(line.startswith("$ ") and is_blueprint(line.split()[1]) for line in block.body.splitlines())
    ]
    assert shown and set(shown) <= checked, f"runs shown with their output but not checked: {set(shown) - checked}"


@pytest.mark.program
@pytest.mark.parametrize("pair", _refused_examples(), ids=lambda p: p[0].where)
def test_a_refused_stack_file_prints_what_the_docs_show(
    pair: tuple[Block, Block], scratch: Path, blueprint_cli: Callable[..., CliResult]
) -> None:
    block, shown = pair
    prompt, *printed = shown.body.splitlines()
    argv = shlex.split(prompt.removeprefix("$ "))
    assert is_blueprint(argv[0]) and "--config" in argv, f"{shown.where}: shows `$ blueprint ... --config FILE`"
    (scratch / argv[argv.index("--config") + 1]).write_text(block.body)
    result = blueprint_cli(*argv[1:])
    assert result.returncode == 2
    assert result.stderr.splitlines() == printed, f"{shown.where} shows other lines than blueprint prints now"
