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


@cache
def types() -> dict[str, dict[str, Any]]:
    """Per key: `token` (the class's type token) and `tags` (whether its constructor takes `tags`)."""
    table: dict[str, dict[str, Any]] = json.loads(PATH.read_text())["types"]
    return table


@cache
def by_token() -> dict[str, dict[str, Any]]:
    """The same entries by type token, what a policy meets: a token's module is not always the SDK module holding
    its class (`aws:lambda/function:Function` is `pulumi_aws.lambda_.Function`)."""
    return {entry["token"]: entry for entry in types().values() if entry["token"]}
