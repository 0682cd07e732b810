"""Property: whatever a stack file says, `blueprint plan` answers with an exit code, never a traceback.

Hypothesis mutates the shipped stacks (values of the wrong type, NaN, huge or empty text, deleted and misspelt keys,
truncated files, stray bytes) and runs each through the CLI in-process. Every run must exit 0, 1 or 2 without an
exception, and whenever a plan is printed it must be valid JSON (no NaN or Infinity). Marked `slow`: CI runs it in
its own step (`pytest -m slow`); BAD_INPUT_EXAMPLES sets the number of examples (default 2000), split evenly over
SHARDS parametrized copies so that pytest-xdist runs them on every core (each copy draws its own examples).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from blueprint.cli import main
from blueprint.plan.runner import stack_file
from blueprint.plan.stack_yaml import read_yaml

EXAMPLES = int(os.environ.get("BAD_INPUT_EXAMPLES", "2000"))
SHARDS = 2
SHIPPED = {name: read_yaml(stack_file(name)) for name in ("training", "inference", "hybrid")}
#: Words and values that have tripped YAML readers and validators before.
TRICKY = st.sampled_from(
    ["off", "on", "yes", "no", "1.35", "10.0.0.0/8", "0.0.0.0/0", "p5.48xlarge", "A40", "", " ", "x" * 5000, "-1",
     "aws:x", "gpu-clusters/pool", "nvidia.com/gpu", "cr-0123456789abcdef0", "us-east-1z", "1e309", "\u00e9\u4e2d"]
)  # fmt: skip
TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=30)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**6), max_value=10**13),
    st.floats(allow_nan=True, allow_infinity=True),
    TEXT,
    TRICKY,
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(TEXT, inner, max_size=3)),
    max_leaves=6,
)


def _containers(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths of every mapping and list in the document."""
    found = [path] if isinstance(node, dict | list) else []
    children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, child in children:
        found.extend(_containers(child, (*path, key)))
    return found


def _at(doc: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        doc = doc[part]
    return doc


@st.composite
def mutated_stack(draw: st.DrawFn) -> bytes:
    """A shipped stack file with one to three mutations, as bytes."""
    doc = json.loads(json.dumps(SHIPPED[draw(st.sampled_from(sorted(SHIPPED)))]))
    for _ in range(draw(st.integers(1, 3))):
        container = _at(doc, draw(st.sampled_from(_containers(doc))))
        keys = list(container) if isinstance(container, dict) else list(range(len(container)))
        action = draw(st.sampled_from(["replace", "replace", "delete", "add", "rename"] if keys else ["add"]))
        key = draw(st.sampled_from(keys)) if keys else None
        if action == "replace":
            container[key] = draw(VALUES)
        elif action == "delete":
            del container[key]
        elif action == "add" and isinstance(container, dict):
            container[draw(st.one_of(TEXT, TRICKY))] = draw(VALUES)
        elif action == "add":
            container.append(draw(VALUES))
        elif isinstance(container, dict) and isinstance(key, str):
            container[key[:-1] + key[-1:].swapcase() + draw(st.sampled_from(["", "s", "x"]))] = container.pop(key)
    data = yaml.safe_dump(doc, allow_unicode=True, sort_keys=False).encode("utf-8")
    damage = draw(st.sampled_from(["none", "none", "none", "truncate", "byte"]))
    if damage == "truncate":
        data = data[: draw(st.integers(0, len(data)))]
    elif damage == "byte":
        at = draw(st.integers(0, len(data)))
        data = data[:at] + bytes([draw(st.integers(0, 255))]) + data[at:]
    return data


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"the plan's JSON holds {name}")


@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("shard", range(SHARDS))
@settings(
    max_examples=-(-EXAMPLES // SHARDS),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=mutated_stack())
def test_mutated_stacks_never_crash(shard: int, data: bytes, tmp_path_factory: pytest.TempPathFactory) -> None:
    path = tmp_path_factory.mktemp("stack") / "Pulumi.mutated.yaml"
    path.write_bytes(data)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["plan", "--config", str(path), "--format", "json"])
    event(f"exit {code}")
    assert code in (0, 1, 2), err.getvalue()
    assert "Traceback" not in err.getvalue()
    if code == 0:
        plan = json.loads(out.getvalue(), parse_constant=_refuse_constant)
        assert plan["resources"]
    else:
        assert out.getvalue() == ""
        assert err.getvalue().startswith("blueprint: "), err.getvalue()[:500]


def test_the_shipped_stacks_are_the_seeds() -> None:
    """The property starts from the stacks users copy; each must load as a mapping with `config`."""
    assert all(isinstance(doc, dict) and "config" in doc for doc in SHIPPED.values())
    assert Path(stack_file("training")).exists()
