"""The AWS provider's resource types as its pinned SDK defines them: each class's type token and whether it takes
`tags`, read once from the SDK into `policies/aws-resource-types.json` (`python -m blueprint.aws_resource_types
--write`), so that a rule (and a test) need not import the SDK's modules, a second or two each time.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

PATH = Path(__file__).with_name("aws-resource-types.json")


def key(module: str, name: str) -> str:
    """A type's key in the table: its SDK module (`index` for the top level) and class name."""
    return f"{module}:{name}"


def key_of(resource_type: str) -> str | None:
    """The key of a type token (`aws:ec2/subnet:Subnet` -> `ec2:Subnet`); None for a string that is not one."""
    try:
        _, module, name = resource_type.split(":")
    except ValueError:
        return None
    return key(module.split("/")[0], name)


@cache
def types() -> dict[str, dict[str, Any]]:
    """Per key: `token` (the class's type token) and `tags` (whether its constructor takes `tags`)."""
    table: dict[str, dict[str, Any]] = json.loads(PATH.read_text())["types"]
    return table
