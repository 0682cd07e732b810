"""Rules on the stack file's config keys: every key must be one something reads.

Under `pulumi up` the program sees every config key of the stack (`pulumi.runtime.config`), so these rules run there
as well as in `blueprint plan`: a misspelt `gpu-clusters:nodepools`, `aws:regoin` or `gpuclusters:storage` is refused,
never ignored. Who reads which namespace: docs/configuration.md, "Config namespaces".
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from functools import cache
from importlib.util import find_spec
from pathlib import Path

from components.config import SECTIONS
from components.errors import Problem
from components.validation.parse import READ_NAMESPACES, Parsed, closest, did_you_mean, shown_text

#: The `pulumi:` keys the Pulumi engine and CLI read (pulumi/pulumi: pkg/resource/deploy/default_providers.go
#: `disable-default-providers`, pkg/cmd/pulumi/autonaming/config.go `autonaming`, pkg/backend/stack.go `tags`,
#: pkg/cmd/pulumi/project/newcmd/config.go `template`, written by `pulumi new`).
PULUMI_KEYS = ("autonaming", "disable-default-providers", "tags", "template")
#: Why `kubernetes:` keys are refused: they configure the default Kubernetes provider, which the engine creates only
#: for a resource registered without a provider (pulumi/pulumi pkg/resource/deploy/default_providers.go), and every
#: Kubernetes resource here names the provider built from the cluster's kubeconfig (components/kubernetes_access.py).
KUBERNETES_UNREAD = (
    "`kubernetes:` keys configure only the default Kubernetes provider, and no resource here uses it: every "
    "Kubernetes resource goes through the provider the program builds from the new cluster's kubeconfig"
)
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


def namespaces_are_read(p: Parsed) -> Iterator[Problem]:
    """Every key's namespace is one something reads: the project's, `aws` (the AWS provider) or `pulumi` (the
    engine). The CLI hands the program the keys of every namespace and nothing else reads the others (Pulumi docs,
    Configuration: a namespace is the project's or a package's), so `gpuclusters:storage` would silently plan
    without Lustre."""
    valid = f"this stack reads {p.project}: ({', '.join(SECTIONS)}), aws: (the AWS provider) and pulumi: (the engine)"
    for namespace, name in p.stray_keys():
        key = shown_text(f"{namespace}:{name}")
        if namespace == "kubernetes":
            yield Problem(key, f"{KUBERNETES_UNREAD}; {valid}")
            continue
        meant = closest(namespace, (p.project, *READ_NAMESPACES))
        if meant == p.project:
            guess = f" (did you mean {p.project}:{closest(name, SECTIONS) or name}?)"
        else:
            guess = f" (did you mean {meant}:{name}?)" if meant else ""
        yield Problem(key, f"nothing reads the `{shown_text(namespace)}:` namespace{guess}; {valid}")


def pulumi_keys_are_engine_keys(p: Parsed) -> Iterator[Problem]:
    """Every `pulumi:` key is one the engine reads (`PULUMI_KEYS`), and `pulumi:disable-default-providers` leaves
    the AWS provider on: the program registers every AWS resource with the default provider."""
    for key in p.config_keys:
        namespace, _, name = key.partition(":")
        if namespace == "pulumi" and name not in PULUMI_KEYS:
            yield Problem(
                shown_text(key),
                f"not a config key of the Pulumi engine{did_you_mean(name, PULUMI_KEYS)}; it reads "
                + ", ".join(f"pulumi:{k}" for k in PULUMI_KEYS),
            )
    disabled = _json(p.config_keys.get("pulumi:disable-default-providers"))
    if isinstance(disabled, list) and {"aws", "*"} & {str(item).strip() for item in disabled}:
        yield Problem(
            "pulumi:disable-default-providers",
            "the program creates every AWS resource with the default AWS provider (set up from the aws: keys), so "
            "disabling it fails them all at `pulumi up`; leave aws and * out (kubernetes may stay: it is unused)",
        )


def _json(value: object) -> object:
    """A config value as the CLI hands it (lists as JSON text), decoded where it is JSON."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


RULES = (
    keys_have_a_namespace,
    namespaces_are_read,
    project_keys_are_known,
    aws_keys_are_provider_keys,
    pulumi_keys_are_engine_keys,
)
