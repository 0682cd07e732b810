"""`.github/CODEOWNERS` gives the files that decide what the policy pack enforces (its config, the approved
exceptions, the rules, the pull-request workflow and itself) to owners, so a pull request cannot waive a security
rule without their review. Patterns are read as GitHub reads them: gitignore-style, the last match wins."""

from __future__ import annotations

import fnmatch
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CODEOWNERS = ROOT / ".github" / "CODEOWNERS"


def rules() -> list[tuple[str, list[str]]]:
    """(pattern, owners) per line, in file order."""
    found = []
    for line in CODEOWNERS.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            pattern, *owners = line.split()
            found.append((pattern, owners))
    return found


def matches(pattern: str, path: str) -> bool:
    """gitignore-style matching of a repository path: a leading `/` anchors at the root, a trailing `/` takes a
    directory and everything under it, `*` stays within one path segment."""
    anchored = pattern.startswith("/")
    pattern = pattern.lstrip("/")
    if pattern.endswith("/"):
        return path.startswith(pattern) if anchored else f"/{pattern}" in f"/{path}"
    candidates = [path] if anchored else [path, *("/".join(path.split("/")[i:]) for i in range(1, path.count("/") + 1))]
    return any(fnmatch.fnmatchcase(c, pattern) and c.count("/") == pattern.count("/") for c in candidates)


def owners_of(path: str) -> list[str]:
    owners: list[str] = []
    for pattern, line_owners in rules():
        if matches(pattern, path):
            owners = line_owners
    return owners


GUARDED = [
    "policies/exceptions.json",
    "policies/policy-config.json",
    *(str(p.relative_to(ROOT)) for p in sorted((ROOT / "policies").glob("policy-config.*.json"))),
    "policies/policy-config.prod.json",  # a stack's config added later is covered too
    "policies/pack.py",
    "policies/rules/exceptions.py",
    "policies/rules/kubernetes.py",
    ".github/CODEOWNERS",
    ".github/workflows/pull-request.yml",
]


@pytest.mark.parametrize("path", GUARDED)
def test_the_files_that_decide_what_is_enforced_have_owners(path: str) -> None:
    assert owners_of(path), f"{path} has no code owner in .github/CODEOWNERS"
    assert all(o.startswith("@") or "@" in o for o in owners_of(path))


def test_the_files_a_stack_change_touches_are_not_guarded() -> None:
    """A stack file carries tags, never approvals: its pull request is reviewed as usual."""
    assert owners_of("stacks/Pulumi.training.yaml") == []
    assert owners_of("components/cluster.py") == []


def test_the_matcher_reads_patterns_as_github_does() -> None:
    assert matches("/policies/policy-config*.json", "policies/policy-config.hybrid.json")
    assert not matches("/policies/policy-config*.json", "sub/policies/policy-config.json")
    assert matches("/policies/rules/", "policies/rules/iam.py")
    assert not matches("/policies/rules/", "policies/rules.py")
    assert matches("*.json", "a/b/c.json")
