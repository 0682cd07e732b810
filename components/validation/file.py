"""Rules on the stack file's config keys: every key must be one something reads.

Under `pulumi up` the program sees every config key of the stack (`pulumi.runtime.config`), so these rules run there
as well as in `blueprint plan`: a misspelt `gpu-clusters:nodepools` or `aws:regoin` is refused, never ignored.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache
from importlib.util import find_spec
from pathlib import Path

from components.config import SECTIONS
from components.errors import Problem
from components.validation.parse import Parsed, did_you_mean, shown_text

#: How the AWS provider's generated config module reads each of its keys (`__config__.get('region')`).
_PROVIDER_KEY = re.compile(r"__config__\.get\w*\('(\w+)'\)")


@cache
def aws_provider_keys() -> tuple[str, ...]:
    """Every `aws:` config key the installed AWS provider reads, from its generated `pulumi_aws/config/vars.py`."""
    spec = find_spec("pulumi_aws")
    if spec is None or spec.origin is None:
        return ("region",)
    text = (Path(spec.origin).parent / "config" / "vars.py").read_text()
    return tuple(sorted(set(_PROVIDER_KEY.findall(text))))


def project_keys_are_known(p: Parsed) -> Iterator[Problem]:
    """Every key in the project's namespace is one of the sections (`cluster`, `network`, `nodePools`, `storage`,
    `addons`); anything else, such as `gpu-clusters:nodepools`, is a typo the program would never read."""
    for key in p.unknown_keys():
        yield Problem(
            f"{p.project}:{shown_text(key)}",
            f"unknown config key{did_you_mean(key, SECTIONS)}; the project reads {', '.join(SECTIONS)}",
        )


def aws_keys_are_provider_keys(p: Parsed) -> Iterator[Problem]:
    """Every `aws:` key is one the AWS provider reads (its config reference: `region`, `profile`, `assumeRoles`,
    `defaultTags`, `skipCredentialsValidation`, ...), so `aws:regoin` is refused instead of deploying to the default
    region."""
    known = aws_provider_keys()
    for key in p.config_keys:
        namespace, _, name = key.partition(":")
        if namespace == "aws" and name not in known:
            yield Problem(
                shown_text(key),
                f"not a config key of the AWS provider{did_you_mean(name, known)} (pulumi-aws config reference)",
            )


def keys_have_a_namespace(p: Parsed) -> Iterator[Problem]:
    """A config key is `namespace:name` with one colon, as the Pulumi CLI requires (`pulumi config set`)."""
    for key in p.config_keys:
        if key.count(":") != 1 or not all(key.split(":")):
            yield Problem(shown_text(key), "a config key is `namespace:name`, e.g. gpu-clusters:cluster or aws:region")


RULES = (keys_have_a_namespace, project_keys_are_known, aws_keys_are_provider_keys)
