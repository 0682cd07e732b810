"""`promtool check metrics` on what the reference training script serves at `/metrics` (programs/train_reference.py,
`Metrics.exposition`): Prometheus's own linter of the text format (names, HELP and TYPE lines, counters' `_total`).

It imports the script, so it needs torch as well as promtool: CI's `promql` step has both (`.ci/run install` puts
torch's CPU build in the same virtualenv); without torch it skips, saying why.
"""

from __future__ import annotations

import importlib.util
import subprocess

import pytest

from tests.promtool import PROMTOOL, needs_promtool

pytestmark = [
    pytest.mark.program,
    needs_promtool,
    pytest.mark.skipif(
        importlib.util.find_spec("torch") is None, reason="the script imports torch (requirements-train.lock)"
    ),
]


def test_promtool_accepts_the_exposition() -> None:
    from programs.train_reference import Metrics

    metrics = Metrics()
    metrics.set(step=12, loss=0.125)
    metrics.add(samples_total=1024, steps_total=12, step_seconds_total=3.5)
    assert PROMTOOL is not None
    result = subprocess.run(
        [PROMTOOL, "check", "metrics"], input=metrics.exposition(), capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
