"""Running Prometheus's own `promtool` (Debian package `prometheus`) from the tests: `check rules` and `test rules`.

Without promtool the tests that need it skip with the reason, unless BLUEPRINT_REQUIRE_PROMTOOL=1 (CI's `promql`
step sets it), where a missing promtool fails them. The modules that use it are named `test_*_promtool.py`, which is
what the `promql` step runs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

PROMTOOL = shutil.which("promtool")
REQUIRED = os.environ.get("BLUEPRINT_REQUIRE_PROMTOOL") == "1"

#: Mark a test module with this: it skips without promtool (outside CI's `promql` step).
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None and not REQUIRED,
    reason="promtool is not installed (Debian package `prometheus`); `.ci/run promql` installs it and runs these tests",
)


def promtool(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None, "BLUEPRINT_REQUIRE_PROMTOOL is set but promtool is not installed"
    return subprocess.run([PROMTOOL, *args], cwd=tmp_path, capture_output=True, text=True, check=False)


def check_rules(tmp_path: Path, files: dict[str, list[dict[str, Any]]]) -> None:
    """`promtool check rules` on rule files (name -> groups), all at once; fails with promtool's own report."""
    for name, groups in files.items():
        (tmp_path / name).write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    result = promtool(tmp_path, "check", "rules", *files)
    assert result.returncode == 0, result.stdout + result.stderr


def run_rule_tests(tmp_path: Path, groups: list[dict[str, Any]], tests: list[dict[str, Any]]) -> None:
    """`promtool test rules` of unit tests (`tests`) against rule groups (`groups`, may be empty)."""
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    document = {"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": tests}
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
    result = promtool(tmp_path, "test", "rules", "tests.yaml")
    assert result.returncode == 0, result.stdout + result.stderr
