"""Which YAML parser reads the project's files: libyaml's C parser where PyYAML was built with it.

The catalog files run to thousands of lines; the pure-Python parser spent about a tenth of a second on each, and
every catalog loader test parses a broken copy of one. The C parser feeds the same safe constructors and resolvers,
so a file gives the same data either way; without libyaml the pure-Python `SafeLoader` reads it. The catalog files
hold no merge keys (tests/test_yaml_merge_keys.py), so PyYAML's merge handling, changed in 6.0.4, cannot change
them. The stack file reader (`blueprint.plan.yaml_v3`) takes only parser events from the same choice.

The conformance self-assessment, the largest document the CLI prints, is written by libyaml's emitter the same way
(`dump_yaml`), about twenty times faster than PyYAML's pure-Python emitter, which writes it byte for byte alike
except where libyaml writes a double-quoted scalar, which the self-assessment has only from text given to it; such a
document is written again by PyYAML (tests/test_conformance.py holds the file to PyYAML's bytes).
"""

from __future__ import annotations

from typing import Any

import yaml

#: libyaml's `CSafeLoader` where PyYAML has it, `SafeLoader` otherwise: chosen once, on import.
SAFE_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
#: libyaml's `CSafeDumper` where PyYAML has it, `SafeDumper` otherwise.
SAFE_DUMPER: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def parse_yaml(text: str) -> Any:
    """`yaml.safe_load(text)`, on the C parser where it is built. Raises `yaml.YAMLError` as `safe_load` does."""
    return yaml.load(text, Loader=SAFE_LOADER)


def dump_yaml(data: Any, **options: Any) -> str:
    """`yaml.safe_dump(data, **options)`, byte for byte, on the C emitter where it is built. Where the two emitters
    differ, libyaml wrote a double-quoted scalar (it escapes the next-line character and those outside the Basic
    Multilingual Plane, folds a long double-quoted line at another place, and writes a key holding a carriage
    return as a complex key), so a text with a `"` in it is written again by PyYAML's emitter."""
    text: str = yaml.dump(data, Dumper=SAFE_DUMPER, **options)
    if SAFE_DUMPER is not yaml.SafeDumper and '"' in text:
        text = yaml.dump(data, Dumper=yaml.SafeDumper, **options)
    return text
