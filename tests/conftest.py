"""Shared test helpers. Every test that registers resources runs them through `run_mocked`, which sets fresh mocks
per call (a module-level `set_mocks` leaks across files, pulumi-testing-notes §1.5)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
