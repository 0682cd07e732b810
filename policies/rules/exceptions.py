"""Exceptions: how an organisation waives one policy for one resource, with a reason everybody can read.

A resource is excepted from policy `P` when it carries the tag `gpu-clusters/exception:P` with a non-empty value; the
value is the reason. Tags are the one place that travels with the resource into both `pulumi preview
--policy-pack policies` and `blueprint check` (the policy SDK hands a policy only its own config, so a list of
exceptions in another policy's config could not be read), and AWS keeps them on the resource for later audits. The
provider's `defaultTags` count too, so the stack file's cluster-wide `tags` can except every resource of a stack.

The wrappers in `policies.pack` drop a policy's violations on an excepted resource; `policy_exceptions_recorded`
reports every exception and its reason (advisory), so no waiver is silent. A tag with an empty value, or naming a
policy that does not exist, excepts nothing and is reported.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection, Mapping

from policies.resources import Resource, Stack
from policies.rules.signatures import Config, StackViolations

#: The tag key prefix; the policy name follows it. AWS tag keys allow `:` and `/` (and up to 128 characters).
EXCEPTION_TAG_PREFIX = "gpu-clusters/exception:"

#: At most this many resource names are spelled out when one exception covers many resources.
_NAMES_SHOWN = 5


def exception_tag(policy: str) -> str:
    """The tag key that excepts a resource from `policy`."""
    return EXCEPTION_TAG_PREFIX + policy


def all_tags(r: Resource) -> dict[str, str]:
    """The resource's tags with the provider's `defaultTags` under them (the resource's own win, as in AWS)."""
    return {**dict(r.default_tags), **r.tags()}


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
        `gpu-clusters/exception:<policy>` with the reason as its value (docs/security.md, "Raising an exception").
        """
        granted: dict[tuple[str, str], list[str]] = defaultdict(list)
        for r in stack:
            for policy, reason in exceptions_of(r).items():
                tag = exception_tag(policy)
                if policy not in policies:
                    yield f"'{r.name}' has tag '{tag}', but no policy is named '{policy}': nothing is excepted", r.urn
                elif not reason:
                    yield (
                        f"'{r.name}' has tag '{tag}' with no reason, so it excepts nothing: give the reason as the "
                        "tag's value",
                        r.urn,
                    )
                else:
                    granted[(policy, reason)].append(r.name)
        for (policy, reason), names in sorted(granted.items()):
            shown = ", ".join(f"'{n}'" for n in names[:_NAMES_SHOWN])
            more = f" and {len(names) - _NAMES_SHOWN} more" if len(names) > _NAMES_SHOWN else ""
            yield f"policy '{policy}' is waived for {shown}{more}: {reason}", None

    return rule


def reason_for(tags: Mapping[str, str], key: str) -> str:
    """The stripped value of tag `key`, '' when absent."""
    return str(tags.get(key, "")).strip()
