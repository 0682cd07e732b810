"""How add-on documents (IAM policies, EventBridge patterns, add-on configuration) become strings (pure)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def as_json(document: Mapping[str, Any]) -> str:
    """Stable JSON for IAM and add-on documents (sorted keys: no spurious diffs between runs)."""
    return json.dumps(document, sort_keys=True)
