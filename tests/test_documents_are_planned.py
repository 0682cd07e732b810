"""Components only wire resources: no IAM, KMS or resource policy document is written inside a component.

Documents are built by pure functions in `components/planning/` and tested there without Pulumi mocks; a component
applies them to deploy-time values. This test reads the components' source for policy-document literals.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

COMPONENTS = Path(__file__).resolve().parent.parent / "components"
#: The keys only a policy document has (IAM policy grammar: `Version`, `Statement`, and a statement's `Effect`).
POLICY_KEYS = {"Statement", "Effect"}


def component_modules() -> list[Path]:
    planned = {"planning", "validation", "catalog"}
    return sorted(p for p in COMPONENTS.rglob("*.py") if not planned & set(p.relative_to(COMPONENTS).parts))


def policy_literals(source: str) -> list[int]:
    """Line numbers of dict literals keyed like a policy document or statement."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Dict)
        and POLICY_KEYS & {k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
    ]


def test_the_scan_sees_the_components_and_finds_a_policy_literal() -> None:
    names = {p.relative_to(COMPONENTS).as_posix() for p in component_modules()}
    assert {"cluster.py", "identity.py", "flow_logs.py", "managed_addons.py", "storage/lustre.py"} <= names
    assert not any(name.startswith("planning/") for name in names)
    assert policy_literals('doc = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow"}]}') == [1, 1]


@pytest.mark.parametrize("module", component_modules(), ids=lambda p: p.relative_to(COMPONENTS).as_posix())
def test_no_component_writes_a_policy_document(module: Path) -> None:
    assert policy_literals(module.read_text()) == [], f"{module}: build the document in components/planning/"
