"""Exceptions: how an organisation waives one policy for one resource, with a reason everybody can read, and who
approves the waivers of security rules.

A resource is excepted from policy `P` when it carries the tag `policy-exception/P` with a non-empty value; the
value is the reason. Tags are the one place that travels with the resource into both `pulumi preview
--policy-pack policies` and `blueprint check` (the policy SDK hands a policy only its own config, so a list of
exceptions in another policy's config could not be read), and AWS keeps them on the resource for later audits. The
provider's `defaultTags` count too, so the stack file's cluster-wide `tags` can except every resource of a stack.

The wrappers in `policies.pack` drop a policy's violations on an excepted resource; `policy_exceptions_recorded`
reports every exception and its reason (advisory), so no waiver is silent. A tag with an empty value, or naming a
policy that does not exist, excepts nothing and is reported.

A tag is written in the stack's own files, so the pull request that needs an exception could grant it too. The
security rules (`policies.pack.APPROVAL_REQUIRED`) therefore ignore tags: their exceptions are approvals listed in
`policies/exceptions.json`, a file `.github/CODEOWNERS` gives to the security owners, so a change to it needs their
review (docs/security.md, "Raising an exception").
"""

from __future__ import annotations

import difflib
import fnmatch
import json
from collections import defaultdict
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


#: The approved exceptions to security rules; `.github/CODEOWNERS` names who must review a change to it.
APPROVALS_FILE = Path(__file__).parents[1] / "exceptions.json"


@dataclass(frozen=True)
class Approval:
    """One approved exception: `policy` waived for the resources whose Pulumi name matches `resource` (a name, or a
    glob such as `*-ns-monitoring` for that namespace in every stack) of stack `stack` (None: every stack), for
    `reason`."""

    policy: str
    resource: str
    reason: str
    stack: str | None = None

    def covers(self, r: Resource) -> bool:
        return fnmatch.fnmatchcase(r.name, self.resource) and self.stack in (None, stack_of(r.urn))


def stack_of(urn: str) -> str:
    """The stack of a URN, `urn:pulumi:<stack>::<project>::<type>::<name>`."""
    return urn.split("::", 1)[0].removeprefix("urn:pulumi:")


def parse_approvals(document: Any, source: str = str(APPROVALS_FILE)) -> list[Approval]:
    """The approvals of an exceptions file (`{"exceptions": [{"policy", "resource", "reason", "stack"?}]}`); every
    problem at once in one ValueError."""
    entries = document.get("exceptions") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise ValueError(f'{source}: expected {{"exceptions": [{{"policy", "resource", "reason", "stack"?}}, ...]}}')
    problems: list[str] = []
    approvals: list[Approval] = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            problems.append(f"exceptions[{i}]: expected an object")
            continue
        missing = [k for k in ("policy", "resource", "reason") if not str(entry.get(k) or "").strip()]
        unknown = sorted(set(entry) - {"policy", "resource", "reason", "stack"})
        if missing:
            problems.append(f"exceptions[{i}]: {', '.join(missing)} missing or empty")
        if unknown:
            problems.append(f"exceptions[{i}]: unknown keys {', '.join(unknown)}")
        if not missing and not unknown:
            stack = entry.get("stack")
            approvals.append(
                Approval(str(entry["policy"]), str(entry["resource"]), str(entry["reason"]).strip(), stack)
            )
    if problems:
        raise ValueError(f"{source}: " + "; ".join(problems))
    return approvals


def load_approvals(path: Path = APPROVALS_FILE) -> list[Approval]:
    """The approvals in `path`; none when the file does not exist."""
    if not path.exists():
        return []
    return parse_approvals(json.loads(path.read_text()), str(path))


def approval_for(r: Resource, policy: str, approvals: Sequence[Approval]) -> Approval | None:
    return next((a for a in approvals if a.policy == policy and a.covers(r)), None)


def excepted(r: Resource | None, policy: str, approvals: Sequence[Approval] | None = None) -> bool:
    """Whether `r` is excepted from `policy`: by an approval when `approvals` is given (a security rule, whose
    tags count for nothing), else by an exception tag with a reason."""
    if r is None:
        return False
    if approvals is not None:
        return approval_for(r, policy, approvals) is not None
    return bool(exceptions_of(r).get(policy))


def policy_exceptions(
    policies: Collection[str], approval_required: Collection[str], approvals: Callable[[], Sequence[Approval]]
) -> Callable[[Stack, Config], StackViolations]:
    """The advisory stack rule over exception tags and approvals, knowing the names of the pack's policies, which of
    them take approvals only, and where to read the approvals."""

    def rule(stack: Stack, config: Config) -> StackViolations:
        """Every exception tag is reported with its reason; one with no reason or no such policy excepts nothing.

        An exception is a decision somebody must be able to find again: the advisory report puts each one, with the
        resources it covers and the reason given, in every `pulumi preview` and `blueprint check`. Add the tag
        `policy-exception/<policy>` with the reason as its value (docs/security.md, "Raising an exception").
        """
        granted: dict[tuple[str, str], list[Resource]] = defaultdict(list)
        refused: dict[str, list[Resource]] = defaultdict(list)
        approved = approvals()
        for approval in approved:
            if approval.policy not in policies:
                yield f"{APPROVALS_FILE.name}: approval for '{approval.policy}' names no policy", None
        for r in stack:
            for approval in approved:
                if approval.policy in policies and approval.covers(r):
                    granted[(approval.policy, f"{approval.reason} (approved in {APPROVALS_FILE.name})")].append(r)
            for policy, reason in exceptions_of(r).items():
                tag = exception_tag(policy)
                if policy in approval_required:
                    if approval_for(r, policy, approved) is None:
                        refused[
                            f"tag '{tag}' excepts nothing: '{policy}' is a security rule, whose exceptions are "
                            f"approved in policies/{APPROVALS_FILE.name} (reviewed by its CODEOWNERS)"
                        ].append(r)
                elif policy not in policies:
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
