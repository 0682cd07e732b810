"""Which YAML parser reads the project's files: libyaml's C parser where PyYAML was built with it.

The catalog files run to thousands of lines; the pure-Python parser spent about a tenth of a second on each, and
every catalog loader test parses a broken copy of one. The C parser feeds the same safe constructors and resolvers,
so a file gives the same data either way; without libyaml the pure-Python `SafeLoader` reads it. The catalog files
hold no merge keys (tests/test_yaml_merge_keys.py), so PyYAML's merge handling, changed in 6.0.4, cannot change
them. The stack file reader (`blueprint.plan.yaml_v3`) takes only parser events from the same choice.
"""

from __future__ import annotations

from typing import Any

import yaml

#: libyaml's `CSafeLoader` where PyYAML has it, `SafeLoader` otherwise: chosen once, on import.
SAFE_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def parse_yaml(text: str) -> Any:
    """`yaml.safe_load(text)`, on the C parser where it is built. Raises `yaml.YAMLError` as `safe_load` does."""
    return yaml.load(text, Loader=SAFE_LOADER)
