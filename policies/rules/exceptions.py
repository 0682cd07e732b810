"""Exceptions: how an organisation waives one policy for one resource, with a reason everybody can read.

A resource is excepted from policy `P` when it carries the tag `policy-exception/P` with a non-empty value; the
value is the reason. Tags are the one place that travels with the resource into both `pulumi preview
--policy-pack policies` and `blueprint check` (the policy SDK hands a policy only its own config, so a list of
exceptions in another policy's config could not be read), and AWS keeps them on the resource for later audits. The
provider's `defaultTags` count too, so the stack file's cluster-wide `tags` can except every resource of a stack.

The wrappers in `policies.pack` drop a policy's violations on an excepted resource; `policy_exceptions_recorded`
reports every exception and its reason (advisory), so no waiver is silent. A tag with an empty value, or naming a
policy that does not exist, excepts nothing and is reported.
"""

from __future__ import annotations

import difflib
from collections import defaultdict
from collections.abc import Callable, Collection

from pulumi_policy.proxy import UnknownValueError

from policies.resources import Resource, Stack
from policies.rules.signatures import Config, StackViolations

#: The tag key prefix; the policy name follows it. Outside the stack's own `gpu-clusters/` prefix, which stack files
#: may not set (components.validation.cluster), so the stack file's `tags` can carry an exception.
EXCEPTION_TAG_PREFIX = "policy-exception/"

#: At most this many resource names are spelled out when one exception covers many resources.
_NAMES_SHOWN = 5


def exception_tag(policy: str) -> str:
    """The tag key that excepts a resource from `policy`."""
    return EXCEPTION_TAG_PREFIX + policy


def all_tags(r: Resource) -> dict[str, str]:
    """The resource's tags with the provider's `defaultTags` under them (the resource's own win, as in AWS). Tags not
    known yet (a preview) count as none: the resource is then judged, not excepted."""
    try:
        own = r.tags()
    except UnknownValueError:
        own = {}
    return {**dict(r.default_tags), **own}


def exceptions_of(r: Resource) -> dict[str, str]:
    """`{policy: reason}` for every exception tag on `r`, reasons stripped (an empty one excepts nothing)."""
    return {
        key[len(EXCEPTION_TAG_PREFIX) :]: value.strip()
        for key, value in all_tags(r).items()
        if key.startswith(EXCEPTION_TAG_PREFIX)
    }


def excepted(r: Resource | None, policy: str) -> bool:
    """Whether `r` carries an exception from `policy` with a reason."""
    return r is not None and bool(exceptions_of(r).get(policy))


def policy_exceptions(policies: Collection[str]) -> Callable[[Stack, Config], StackViolations]:
    """The advisory stack rule over exception tags, knowing the names of the pack's policies."""

    def rule(stack: Stack, config: Config) -> StackViolations:
        """Every exception tag is reported with its reason; one with no reason or no such policy excepts nothing.

        An exception is a decision somebody must be able to find again: the advisory report puts each one, with the
        resources it covers and the reason given, in every `pulumi preview` and `blueprint check`. Add the tag
        `policy-exception/<policy>` with the reason as its value (docs/security.md, "Raising an exception").
        """
        granted: dict[tuple[str, str], list[Resource]] = defaultdict(list)
        refused: dict[str, list[Resource]] = defaultdict(list)
        for r in stack:
            for policy, reason in exceptions_of(r).items():
                tag = exception_tag(policy)
                if policy not in policies:
                    close = difflib.get_close_matches(policy, sorted(policies), n=1)
                    hint = f" (did you mean '{close[0]}'?)" if close else ""
                    refused[f"tag '{tag}' names no policy{hint}: nothing is excepted"].append(r)
                elif not reason:
                    refused[f"tag '{tag}' gives no reason, so it excepts nothing: give it as the value"].append(r)
                else:
                    granted[(policy, reason)].append(r)
        for problem, where in sorted(refused.items()):
            yield f"{_names(where)}: {problem}", _urn(where)
        for (policy, reason), where in sorted(granted.items()):
            yield f"policy '{policy}' is waived for {_names(where)}: {reason}", _urn(where)

    return rule


def _names(resources: list[Resource]) -> str:
    """'a', 'b' and 3 more."""
    shown = ", ".join(f"'{r.name}'" for r in resources[:_NAMES_SHOWN])
    more = f" and {len(resources) - _NAMES_SHOWN} more" if len(resources) > _NAMES_SHOWN else ""
    return shown + more


def _urn(resources: list[Resource]) -> str | None:
    """Report against the one resource, or against the stack when a tag covers several."""
    return resources[0].urn if len(resources) == 1 else None
