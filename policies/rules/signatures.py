"""What a rule takes and yields: the policy's config, and for stack rules `(message, urn)` pairs."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

Config = Mapping[str, Any]


#: Stack rules yield (message, urn of the offending resource, or None for the stack as a whole).
StackViolations = Iterator[tuple[str, str | None]]
