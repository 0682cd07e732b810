"""IAM rules: no unscoped create/delete permissions, and trust policies that say whose requests they accept.

Policy documents arrive as JSON strings (pulumi-aws types `policy` and `assumeRolePolicy` as strings; the offline
plan holds them resolved), occasionally as objects; `statements` reads both. AWS-managed policies attached by ARN are
not in the plan, so they are not judged here (AWS maintains them; the ones the stacks attach are listed in
docs/security.md).
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Callable, Iterator, Mapping
from functools import partial
from typing import Any

from pulumi_policy.proxy import UnknownValueError

from policies.resources import KMS_KEY, Resource, Stack, get, items, peek, strings
from policies.rules.signatures import Config, StackViolations

ROLE = "aws:iam/role:Role"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
MANAGED_POLICY = "aws:iam/policy:Policy"
USER_POLICY = "aws:iam/userPolicy:UserPolicy"
GROUP_POLICY = "aws:iam/groupPolicy:GroupPolicy"
ROLE_POLICY_ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"

#: AWS-managed policies that grant create/delete on every resource of one service or all of them. Their documents are
#: not in the plan, so they are recognised by name: `AdministratorAccess`, `PowerUserAccess` and every `*FullAccess`
#: (https://docs.aws.amazon.com/aws-managed-policy/latest/reference/policy-list.html).
BROAD_MANAGED_POLICY = re.compile(
    r"^arn:aws[\w-]*:iam::aws:policy/(?:.*/)?(AdministratorAccess|PowerUserAccess|\w*FullAccess\w*)$"
)

#: Action verbs that make or destroy resources ("wildcard create/delete"): Run launches instances, Terminate ends them.
CREATE_DELETE_VERBS = ("create", "delete", "terminate", "run")

#: Condition keys that tie a statement on "*" to particular resources. Tag keys of any service (`aws:ResourceTag/`,
#: `aws:RequestTag/`, `ec2:ResourceTag/`, `ssm:resourceTag/`, `aws:TagKeys`), and service keys AWS documents for this
#: purpose: `ec2:CreateAction` (CreateTags only inside the named create call), `kms:GrantIsForAWSResource` (grants
#: only for AWS services acting on the caller's behalf), `iam:PassedToService` (PassRole only to that service).
#: Compared in lower case: IAM condition keys are case-insensitive.
SCOPING_KEYS = frozenset({"aws:tagkeys", "ec2:createaction", "kms:grantisforawsresource", "iam:passedtoservice"})

#: Keys that name the account, organisation or resource a service acts for ("cross-service confused deputy"
#: prevention, IAM User Guide https://docs.aws.amazon.com/IAM/latest/UserGuide/confused-deputy.html).
SOURCE_KEYS = frozenset({"aws:sourceaccount", "aws:sourcearn", "aws:sourceorgid", "aws:sourceorgpaths"})

#: Service-specific keys that name the source instead: EKS Pod Identity tags its AssumeRole request with the cluster
#: (`eks-cluster-name`, `eks-cluster-arn`), namespace and service account
#: (https://docs.aws.amazon.com/eks/latest/userguide/pod-id-role.html, "Setting Conditions").
SERVICE_SOURCE_KEYS: Mapping[str, frozenset[str]] = {
    "pods.eks.amazonaws.com": frozenset({"aws:requesttag/eks-cluster-name", "aws:requesttag/eks-cluster-arn"}),
}

#: Services that get a role only when a principal of this account passes it (iam:PassRole: an instance profile at
#: launch, the cluster role at CreateCluster), whose AWS-documented trust policies carry no source condition: the
#: EKS cluster role page (https://docs.aws.amazon.com/eks/latest/userguide/cluster-iam-role.html) and the node role
#: page (https://docs.aws.amazon.com/eks/latest/userguide/create-node-role.html). EC2 does not put aws:SourceArn or
#: aws:SourceAccount on the instance's AssumeRole call, so such a condition would only lock the nodes out
#: (prowler-cloud/prowler#2810 gathers the reports).
PASSED_ROLE_SERVICES: Mapping[str, str] = {
    "ec2.amazonaws.com": "instance profiles are passed at launch by this account",
    "eks.amazonaws.com": "the cluster role is passed at CreateCluster by this account",
}

#: What narrows a trust to the whole world ("Principal": "*" or {"AWS": "*"}) to known callers.
PRINCIPAL_SCOPE_KEYS = frozenset(
    {"aws:principalorgid", "aws:principalorgpaths", "aws:principalaccount", "aws:principalarn", "aws:sourceaccount"}
)


def statements(document: Any) -> list[Mapping[str, Any]]:
    """The statements of an IAM policy document given as a JSON string or an object ([] when it has none)."""
    if isinstance(document, str):
        try:
            document = json.loads(document)
        except ValueError:
            return []
    found = get(document, "Statement")
    if isinstance(found, Mapping):
        return [found]
    return [s for s in items(found) if isinstance(s, Mapping)]


def condition_keys(statement: Mapping[str, Any]) -> set[str]:
    """Every condition key of a statement, in lower case (`{"StringEquals": {"aws:SourceAccount": ...}}`)."""
    keys: set[str] = set()
    conditions = get(statement, "Condition")
    if isinstance(conditions, Mapping):
        for block in conditions.values():
            if isinstance(block, Mapping):
                keys.update(str(k).lower() for k in block)
    return keys


def is_scoped(keys: set[str]) -> bool:
    """Whether any condition key ties the statement to particular resources (see SCOPING_KEYS)."""
    return any("resourcetag/" in k or "requesttag/" in k or k in SCOPING_KEYS for k in keys)


def creates_or_deletes(action: str) -> bool:
    """Whether an action pattern can match a create/delete action: `*`, `ec2:*`, `ec2:Create*`, `ec2:RunInstances`,
    `ec2:*Instances`. A pattern's literal part before its first wildcard decides (IAM matches action names
    case-insensitively)."""
    if action.strip() == "*":
        return True
    name = action.partition(":")[2].lower()
    literal = re.split(r"[*?]", name, maxsplit=1)[0]
    if literal == name:
        return name.startswith(CREATE_DELETE_VERBS)
    return any(verb.startswith(literal) or literal.startswith(verb) for verb in CREATE_DELETE_VERBS)


def unscoped_grants(document: Any) -> list[str]:
    """What each Allow statement on every resource grants without a scoping condition, described for a message."""
    found = []
    for s in statements(document):
        if get(s, "Effect") != "Allow":
            continue
        on_everything = "*" in strings(get(s, "Resource")) or get(s, "NotResource") is not None
        if not on_everything or is_scoped(condition_keys(s)):
            continue
        actions = strings(get(s, "Action"))
        if "*" in actions:
            found.append('every action ("*", full administrator)')
        elif get(s, "NotAction") is not None:
            found.append(f"every action except {', '.join(strings(get(s, 'NotAction')))}")
        else:
            risky = [a for a in actions if creates_or_deletes(a)]
            if risky:
                found.append(", ".join(risky))
    return found


def _policy_of(r: Resource) -> list[Any]:
    return [r.get("policy")]


def _inline_policies_of(role: Resource) -> list[Any]:
    return [get(inline, "policy") for inline in items(role.get("inlinePolicies"))]


def _documents(stack: Stack) -> Iterator[tuple[Resource, str, Callable[[], list[Any]]]]:
    """(resource to report, what holds the documents, reader of the documents) for every identity policy of the
    stack. Readers raise `UnknownValueError` for a document not known yet (a preview)."""
    for p in stack.of_type(ROLE_POLICY, USER_POLICY, GROUP_POLICY):
        roles = stack.referenced(p, "role", strings(peek(p.props, "role")), [ROLE]) if p.type == ROLE_POLICY else []
        owner = roles[0] if len(roles) == 1 else p
        label = f"role '{owner.name}' (inline policy '{p.name}')" if owner is not p else f"policy '{p.name}'"
        yield owner, label, partial(_policy_of, p)
    for p in stack.of_type(MANAGED_POLICY):
        yield p, f"managed policy '{p.name}'", partial(_policy_of, p)
    for role in stack.of_type(ROLE):
        label = f"role '{role.name}' (inline policies)"
        yield role, label, partial(_inline_policies_of, role)


def iam_no_unscoped_create_delete(stack: Stack, config: Config) -> StackViolations:
    """No identity policy creates, deletes, runs or terminates on every resource ("*") without a condition that
    scopes it to tagged or named resources, nor grants "*" or `service:*` unscoped, nor is an AWS-managed
    `*FullAccess`/`AdministratorAccess`/`PowerUserAccess` policy attached (FSBP IAM.1, IAM.21).

    A Create*/Delete*/Terminate*/Run* permission on "*" lets a stolen pod or node credential make or destroy anything
    of that kind in the account; a tag condition (`aws:ResourceTag/...`, `aws:RequestTag/...`, the service's own
    `<service>:ResourceTag/...`) or a resource ARN keeps it to the cluster's own resources, as cluster-autoscaler's
    `TerminateInstanceInAutoScalingGroup` on groups tagged for this cluster
    (https://docs.aws.amazon.com/securityhub/latest/userguide/iam-controls.html). Read-only Describe/List/Get on "*"
    stay allowed: most of them support no resource-level permissions. The violation is reported on the role, so the
    role's exception tag waives it. Documents not known yet (a preview of new resources) are judged after the
    known ones, which keep their verdicts, and end in the SDK's "can't run during preview" note.
    """
    unknown: UnknownValueError | None = None
    for owner, label, read in _documents(stack):
        try:
            grants = [grant for document in read() for grant in unscoped_grants(document)]
        except UnknownValueError as error:
            unknown = unknown or error
            continue
        for grant in grants:
            yield (
                f'{label} allows {grant} on every resource ("*") with no condition that scopes it: name the '
                "resources' ARNs or add an aws:ResourceTag/aws:RequestTag condition for the cluster's tag",
                owner.urn,
            )
    for owner, name in _broad_managed_policies(stack):
        yield (
            f"role '{owner.name}' has the AWS-managed policy {name} attached, which allows create/delete on every "
            "resource it covers: attach a policy of the stack scoped by ARN or tag instead",
            owner.urn,
        )
    if unknown is not None:
        raise unknown


def _broad_managed_policies(stack: Stack) -> Iterator[tuple[Resource, str]]:
    """(role, policy name) for every broad AWS-managed policy attached to a role (see BROAD_MANAGED_POLICY)."""
    for attachment in stack.of_type(ROLE_POLICY_ATTACHMENT):
        match = BROAD_MANAGED_POLICY.match(str(peek(attachment.props, "policyArn", default="")))
        if match:
            roles = stack.referenced(attachment, "role", strings(peek(attachment.props, "role")), [ROLE])
            yield (roles[0] if len(roles) == 1 else attachment), match.group(1)
    for role in stack.of_type(ROLE):
        for arn in strings(peek(role.props, "managedPolicyArns")):
            match = BROAD_MANAGED_POLICY.match(arn)
            if match:
                yield role, match.group(1)


def _principal_issues(statement: Mapping[str, Any]) -> Iterator[str]:
    """What a trust statement's principals lack (messages without the role's name)."""
    keys = condition_keys(statement)
    principal = get(statement, "Principal")
    everyone = principal == "*" or "*" in strings(get(principal, "AWS"))
    if everyone and not keys & PRINCIPAL_SCOPE_KEYS:
        yield 'trusts every AWS principal ("*") without an aws:PrincipalOrgID or aws:PrincipalAccount condition'
    for service in strings(get(principal, "Service")):
        if service in PASSED_ROLE_SERVICES:
            continue
        accepted = SOURCE_KEYS | SERVICE_SOURCE_KEYS.get(service, frozenset())
        if not keys & accepted:
            yield (
                f"trusts {service} without a source condition: add aws:SourceAccount (this account) and "
                "aws:SourceArn (the resources of this service that may assume it)"
            )
    for provider in strings(get(principal, "Federated")):
        if "saml-provider/" in provider:
            if "saml:aud" not in keys:
                yield f"trusts SAML provider {provider} without a SAML:aud condition"
            continue
        missing = [claim for claim in ("aud", "sub") if not any(k.endswith(f":{claim}") for k in keys)]
        if missing:
            yield (
                f"trusts web identities of {provider} without conditions on their "
                f"{' and '.join(':' + c for c in missing)} claims (the audience and the subject, e.g. the "
                "service account)"
            )


def iam_trust_source_conditions(role: Resource, config: Config) -> Iterator[str]:
    """Every role's trust policy says whose requests it accepts: service principals with aws:SourceAccount /
    aws:SourceArn (or the service's documented equivalent), web identities with `:aud` and `:sub` conditions.

    Without them a service can be talked into assuming the role for another account's resource (the "confused
    deputy", https://docs.aws.amazon.com/IAM/latest/UserGuide/confused-deputy.html), and any token of an OIDC provider
    (any service account of the cluster) can assume a web-identity role. EKS Pod Identity roles name the cluster with
    the `aws:RequestTag/eks-cluster-name` session tag instead. Exempt: ec2.amazonaws.com and eks.amazonaws.com, which
    receive a role only through iam:PassRole in this account and whose AWS-documented trust policies have no source
    keys (see PASSED_ROLE_SERVICES). No Security Hub control covers this; Access Analyzer and Prowler check it.
    """
    for statement in statements(role.get("assumeRolePolicy")):
        if get(statement, "Effect") != "Allow":
            continue
        for issue in _principal_issues(statement):
            yield f"role '{role.name}' {issue}"


#: Actions that hand their holder more access than the policy names when granted on every resource ("*"): pass any
#: role to a service, rewrite any role's or user's policies or trust, assume any role, run commands on any managed
#: instance, decrypt with any key, read any object. IAM's own list of what PassRole and the policy-writing actions
#: allow: https://docs.aws.amazon.com/IAM/latest/UserGuide/id_roles_use_passrole.html and
#: https://docs.aws.amazon.com/service-authorization/latest/reference/list_awsidentityandaccessmanagementiam.html.
ESCALATION_ACTIONS = (
    "iam:PassRole",
    "iam:PutRolePolicy",
    "iam:AttachRolePolicy",
    "iam:UpdateAssumeRolePolicy",
    "iam:PutUserPolicy",
    "iam:AttachUserPolicy",
    "iam:PutGroupPolicy",
    "iam:AttachGroupPolicy",
    "iam:CreatePolicyVersion",
    "sts:AssumeRole",
    "ssm:SendCommand",
    "kms:Decrypt",
    "s3:GetObject",
)


def matches_action(pattern: str, action: str) -> bool:
    """Whether an IAM action pattern (`*`, `iam:*`, `iam:Put*Policy`) matches `action`, case-insensitively as IAM
    matches action names."""
    return fnmatch.fnmatchcase(action.lower(), pattern.strip().lower())


def escalations(document: Any) -> list[str]:
    """The escalation actions an Allow statement grants on every resource, for a message. Conditions do not count:
    `iam:PassedToService` still lets every role in the account be passed to that service."""
    found: list[str] = []
    for s in statements(document):
        if get(s, "Effect") != "Allow":
            continue
        if not ("*" in strings(get(s, "Resource")) or get(s, "NotResource") is not None):
            continue
        patterns = strings(get(s, "Action"))
        excluded = strings(get(s, "NotAction"))
        for action in ESCALATION_ACTIONS:
            granted = (
                any(matches_action(p, action) for p in patterns)
                if get(s, "NotAction") is None
                else not any(matches_action(p, action) for p in excluded)
            )
            if granted and action not in found:
                found.append(action)
    return found


def iam_no_escalation_on_any_resource(stack: Stack, config: Config) -> StackViolations:
    """No identity policy grants an action that escalates privilege (`iam:PassRole`, `iam:PutRolePolicy`,
    `iam:AttachRolePolicy`, `iam:UpdateAssumeRolePolicy`, `sts:AssumeRole`, `ssm:SendCommand`, `kms:Decrypt`,
    `s3:GetObject` and the like) on every resource ("*").

    Each of them on "*" turns one stolen credential into any role, key, object or instance of the account: PassRole
    hands any role to a service (https://docs.aws.amazon.com/IAM/latest/UserGuide/id_roles_use_passrole.html), the
    policy-writing actions grant anything, SendCommand runs as root on every managed node. Name the ARNs instead.
    Wildcard patterns (`iam:*`, `iam:Put*`, `*`) and `NotAction` count; conditions do not exempt a statement.
    """
    unknown: UnknownValueError | None = None
    for owner, label, read in _documents(stack):
        try:
            found = [action for document in read() for action in escalations(document)]
        except UnknownValueError as error:
            unknown = unknown or error
            continue
        if found:
            yield (
                f'{label} allows {", ".join(dict.fromkeys(found))} on every resource ("*"): name the roles, keys, '
                "buckets or instances it needs by ARN",
                owner.urn,
            )
    if unknown is not None:
        raise unknown


_ACCOUNT_IN_ARN = re.compile(r"^arn:aws[\w-]*:(?:iam|sts)::(\d{12}):")


def principal_account(principal: str) -> str | None:
    """The account an AWS principal names: a bare account id or the account field of an IAM/STS ARN."""
    if re.fullmatch(r"\d{12}", principal):
        return principal
    match = _ACCOUNT_IN_ARN.match(principal)
    return match.group(1) if match else None


def home_accounts(stack: Stack) -> set[str]:
    """The stack's own account(s): where its roles live (their ARNs, when known) and whose root administers its KMS
    keys (every stack's cluster key policy names `arn:<partition>:iam::<account>:root`)."""
    found: set[str] = set()
    for role in stack.of_type(ROLE):
        account = principal_account(str(peek(role.props, "arn", default="")))
        if account:
            found.add(account)
    for key in stack.of_type(KMS_KEY):
        for s in statements(peek(key.props, "policy")):
            for principal in strings(get(get(s, "Principal"), "AWS")):
                if principal.endswith(":root") and principal_account(principal):
                    found.add(str(principal_account(principal)))
    return found


def iam_cross_account_external_id(stack: Stack, config: Config) -> StackViolations:
    """A role that trusts a principal of another account requires `sts:ExternalId` in its trust policy.

    Without the external id, anyone who can make that account's principal call `sts:AssumeRole` (a third-party
    service acting for many customers) can be steered into this account ("confused deputy",
    https://docs.aws.amazon.com/IAM/latest/UserGuide/id_roles_create_for-user_externalid.html). "Another account" is
    one that is neither the account of the stack's roles nor the one whose root administers the stack's KMS keys.
    """
    home = home_accounts(stack)
    for role in stack.of_type(ROLE):
        for s in statements(role.get("assumeRolePolicy")):
            if get(s, "Effect") != "Allow" or "sts:externalid" in condition_keys(s):
                continue
            foreign = sorted(
                {
                    str(principal_account(p))
                    for p in strings(get(get(s, "Principal"), "AWS"))
                    if principal_account(p) and principal_account(p) not in home
                }
            )
            if foreign:
                yield (
                    f"role '{role.name}' trusts account {', '.join(foreign)} without an sts:ExternalId condition",
                    role.urn,
                )
