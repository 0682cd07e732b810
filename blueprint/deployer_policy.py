"""The least-privilege IAM policy of a stack's deployer (the principal running `pulumi up`), derived from its plan.

Every resource type and provider invoke of the offline plan maps to its actions
(`components/catalog/deployer_permissions.yaml`, `deployer_provider_calls.yaml`); the actions are then scoped as far
as IAM allows from what the plan knows (name prefixes, passed-to services, the cluster, buckets, tagged keys, the
Region). Written to docs/deployer-policy/<stack>.json by `blueprint schema --write`.
See docs/operations.md#the-deployers-iam-policy.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from components.catalog import deployer_permissions
from components.catalog.regions import partitions
from components.planning.key_policy import SERVICE_LINKED_ROLE_PREFIXES
from components.tags import CLUSTER as CLUSTER_TAG

ROOT = Path(__file__).resolve().parents[1]
POLICY_DIR = ROOT / "docs" / "deployer-policy"
ROLE = "aws:iam/role:Role"
SERVICE_LINKED_ROLE = "aws:iam/serviceLinkedRole:ServiceLinkedRole"
#: IAM actions the deployer makes on roles that are not the stack's own (its own role, read by
#: `aws.iam.get_session_context`) or on the account.
IAM_ACCOUNT_ACTIONS = frozenset({"iam:GetRole", "iam:ListRoles", "iam:GetPolicy"})
#: Service-linked roles live under this path; creating one grants the deployer nothing.
SERVICE_LINKED_ACTIONS = frozenset(
    {"iam:CreateServiceLinkedRole", "iam:DeleteServiceLinkedRole", "iam:GetServiceLinkedRoleDeletionStatus"}
)
#: EKS actions that act on no cluster (Service Authorization Reference for Amazon EKS: no resource type).
EKS_ACCOUNT_ACTIONS = frozenset({"eks:ListClusters", "eks:DescribeAddonVersions", "eks:DescribeAddonConfiguration"})
#: FSx creates a role per file system linked to S3 under this path and the creator attaches its policies (FSx for
#: Lustre User Guide, using service-linked roles; AmazonFSxFullAccess grants the same two actions on this path).
FSX_S3_SERVICE = "s3.data-source.lustre.fsx.amazonaws.com"
FSX_S3_ROLE_ACTIONS = ("iam:AttachRolePolicy", "iam:PutRolePolicy")
DATA_REPOSITORY_ASSOCIATION = "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation"
BUCKET = "aws:s3/bucket:Bucket"
#: KMS actions with no resource (CreateKey, ListAliases) and the alias actions, which IAM authorizes on the alias and
#: on the key (Service Authorization Reference for AWS KMS).
KMS_CREATE_ACTIONS = frozenset({"kms:CreateKey", "kms:TagResource"})
KMS_ACCOUNT_ACTIONS = frozenset({"kms:ListAliases"})
KMS_ALIAS_ACTIONS = frozenset({"kms:CreateAlias", "kms:DeleteAlias", "kms:UpdateAlias"})


class UnmappedTypes(LookupError):
    """Resource types or invokes in a plan that the permissions catalog has no entry for."""


def partition_of(region: str) -> str:
    return next((name for name, regions in partitions().items() if region in regions), "aws")


def planned_actions(resources: Iterable[dict[str, Any]], invokes: Iterable[str]) -> set[str]:
    """The union of the actions every custom resource type and invoke needs; UnmappedTypes names what is missing."""
    actions: set[str] = set()
    missing: list[str] = []
    for resource_type in sorted({r["type"] for r in resources if r["custom"]}):
        try:
            actions.update(deployer_permissions.resource_actions(resource_type))
        except KeyError:
            missing.append(resource_type)
    for token in invokes:
        try:
            actions.update(deployer_permissions.invoke_actions(token))
        except KeyError:
            missing.append(token)
    if missing:
        raise UnmappedTypes(
            f"no deployer permissions for {', '.join(missing)}: add them to blueprint/deployer_permissions_table.py "
            "and regenerate components/catalog/deployer_permissions.yaml"
        )
    return actions


def _trusted_services(policy: Any) -> set[str]:
    document = json.loads(policy) if isinstance(policy, str) else policy
    services: set[str] = set()
    for statement in (document or {}).get("Statement", []):
        principal = statement.get("Principal", {})
        service = principal.get("Service", []) if isinstance(principal, dict) else []
        services.update([service] if isinstance(service, str) else service)
    return services


def _role_patterns(resources: Sequence[dict[str, Any]], prefix: str, arn: str) -> list[str]:
    """ARN patterns covering the stack's roles: `<cluster>-*`, plus any role whose name does not start with it."""
    patterns = {f"{arn}:role/{prefix}*"}
    for r in resources:
        if (
            r["type"] == ROLE
            and isinstance(r["inputs"].get("name"), str)
            and not r["inputs"]["name"].startswith(prefix)
        ):
            patterns.add(f"{arn}:role{r['inputs'].get('path') or '/'}{r['inputs']['name']}")
    return sorted(patterns)


def _statement(
    sid: str, actions: Iterable[str], resources: list[str], condition: dict[str, Any] | None = None
) -> dict[str, Any]:
    statement: dict[str, Any] = {"Sid": sid, "Effect": "Allow", "Action": sorted(actions), "Resource": resources}
    if condition:
        statement["Condition"] = condition
    return statement


def deployer_policy(plan: dict[str, Any], invokes: Iterable[str]) -> dict[str, Any]:
    """The IAM policy document the deployer of `plan` needs (see the module docstring)."""
    invokes = list(invokes)
    resources = plan["resources"]
    actions = planned_actions(resources, invokes)
    wildcards = sorted(a for a in actions if "*" in a)
    if wildcards:
        raise ValueError(f"the permissions catalog grants wildcard actions {wildcards}; name each action")
    cluster, region = plan["summary"]["cluster"], plan["summary"]["region"]
    partition = partition_of(region)
    iam_arn = f"arn:{partition}:iam::*"
    prefix = f"{cluster}-"
    in_region = {"StringEquals": {"aws:RequestedRegion": [region]}}
    by_service: dict[str, set[str]] = defaultdict(set)
    for action in actions:
        by_service[action.split(":", 1)[0]].add(action)
    statements = []
    iam = by_service.pop("iam", set())
    if "iam:PassRole" in iam:
        services = sorted(
            {s for r in resources if r["type"] == ROLE for s in _trusted_services(r["inputs"].get("assumeRolePolicy"))}
        )
        statements.append(
            _statement(
                "PassTheStacksRolesToTheirServices",
                ["iam:PassRole"],
                _role_patterns(resources, prefix, iam_arn),
                {"StringEquals": {"iam:PassedToService": services}},
            )
        )
    linked = service_linked_role_services(resources)
    own = own_service_linked_roles(resources, iam_arn)
    if iam & SERVICE_LINKED_ACTIONS and linked:
        # The roles services create on first use, anywhere under their path; the stack's own ones, by name.
        created = [f"{iam_arn}:role/aws-service-role/{service}/*" for service in linked if service not in own]
        created += [arn for arns in own.values() for arn in arns]
        if "iam:CreateServiceLinkedRole" in iam:
            statements.append(
                _statement(
                    "CreateTheServiceLinkedRolesTheStackUses",
                    ["iam:CreateServiceLinkedRole"],
                    created,
                    {"StringEquals": {"iam:AWSServiceName": list(linked)}},
                )
            )
    if own:
        statements.append(
            _statement(
                "ManageTheStacksOwnServiceLinkedRoles",
                set(deployer_permissions.resource_actions(SERVICE_LINKED_ROLE))
                - {"iam:CreateServiceLinkedRole"}
                - IAM_ACCOUNT_ACTIONS,
                [arn for arns in own.values() for arn in arns],
            )
        )
    if own:
        # A group given a custom-suffix role needs the caller to pass it (Amazon EC2 Auto Scaling User Guide,
        # identity-based policy examples, "Restrict which service-linked role can be passed": the role's exact ARN,
        # no condition; whether Auto Scaling sets `iam:PassedToService` there is not documented, and only that
        # service can assume a service-linked role anyway).
        statements.append(
            _statement(
                "PassTheStacksServiceLinkedRolesToTheirServices",
                ["iam:PassRole"],
                [arn for arns in own.values() for arn in arns],
            )
        )
    if FSX_S3_SERVICE in linked:
        statements.append(
            _statement(
                "FsxLinksTheFileSystemToS3",
                FSX_S3_ROLE_ACTIONS,
                [f"{iam_arn}:role/aws-service-role/{FSX_S3_SERVICE}/AWSServiceRoleForFSxS3Access_*"],
            )
        )
    if iam & IAM_ACCOUNT_ACTIONS:
        statements.append(_statement("ReadRolesAndPolicies", iam & IAM_ACCOUNT_ACTIONS, ["*"]))
    managed = iam - {"iam:PassRole"} - SERVICE_LINKED_ACTIONS - IAM_ACCOUNT_ACTIONS
    if managed:
        statements.append(
            _statement(
                "ManageTheStacksRolesAndInstanceProfiles",
                managed,
                [*_role_patterns(resources, prefix, iam_arn), f"{iam_arn}:instance-profile/{prefix}*"],
            )
        )
    eks = by_service.pop("eks", set())
    eks_arn = f"arn:{partition}:eks:{region}:*"
    if eks - EKS_ACCOUNT_ACTIONS:
        statements.append(
            _statement(
                "TheStacksCluster",
                eks - EKS_ACCOUNT_ACTIONS,
                [
                    f"{eks_arn}:cluster/{cluster}",
                    f"{eks_arn}:addon/{cluster}/*",
                    f"{eks_arn}:access-entry/{cluster}/*",
                    f"{eks_arn}:podidentityassociation/{cluster}/*",
                ],
            )
        )
    if eks & EKS_ACCOUNT_ACTIONS:
        statements.append(_statement("EksAccount", eks & EKS_ACCOUNT_ACTIONS, ["*"], in_region))
    s3 = by_service.pop("s3", set())
    buckets = bucket_patterns(resources, partition)
    if s3 and buckets:
        statements.append(_statement("TheStacksBuckets", s3, buckets))
    elif s3:
        raise ValueError("the plan grants S3 actions but creates no bucket to scope them to")
    kms = by_service.pop("kms", set())
    statements += _kms_statements(kms, partition, region, cluster, in_region)
    for service in sorted(by_service):
        sid = "".join(part.capitalize() for part in service.replace("-", " ").split()) + "InTheStacksRegion"
        statements.append(_statement(sid, by_service[service], ["*"], in_region))
    return {"Version": "2012-10-17", "Statement": statements}


def service_linked_role_services(resources: Iterable[dict[str, Any]]) -> list[str]:
    """The services whose service-linked roles the stack's resources may create, sorted: those created on a
    resource's first use, and those of the stack's own `ServiceLinkedRole` resources."""
    resources = list(resources)
    services = {
        s for r in resources if r["custom"] for s in deployer_permissions.service_linked_role_services(r["type"])
    }
    services.update(r["inputs"]["awsServiceName"] for r in resources if r["type"] == SERVICE_LINKED_ROLE)
    return sorted(services)


def own_service_linked_roles(resources: Iterable[dict[str, Any]], iam_arn: str) -> dict[str, list[str]]:
    """`{service: ARN patterns}` of the service-linked roles the stack creates itself, named as IAM names them:
    `<the service's prefix>_<custom suffix>` under `/aws-service-role/<service>/`."""
    out: dict[str, list[str]] = defaultdict(list)
    for r in resources:
        if r["type"] != SERVICE_LINKED_ROLE:
            continue
        service, suffix = r["inputs"]["awsServiceName"], r["inputs"].get("customSuffix")
        name = SERVICE_LINKED_ROLE_PREFIXES[service] + (f"_{suffix}" if suffix else "")
        out[service].append(f"{iam_arn}:role/aws-service-role/{service}/{name}")
    return dict(out)


def bucket_patterns(resources: Iterable[dict[str, Any]], partition: str) -> list[str]:
    """ARN patterns of the stack's buckets: Pulumi names each from its `bucketPrefix` (`<cluster>-<fs>-data-`,
    components/planning/storage.py `bucket_prefix`) plus a random suffix, or its fixed `bucket` name."""
    patterns = set()
    for r in resources:
        if r["type"] != BUCKET:
            continue
        inputs = r["inputs"]
        if isinstance(inputs.get("bucket"), str):
            patterns.add(f"arn:{partition}:s3:::{inputs['bucket']}")
        elif isinstance(inputs.get("bucketPrefix"), str):
            patterns.add(f"arn:{partition}:s3:::{inputs['bucketPrefix']}*")
    return sorted(patterns)


def _kms_statements(
    kms: set[str], partition: str, region: str, cluster: str, in_region: dict[str, Any]
) -> list[dict[str, Any]]:
    """KMS scoped by the cluster tag every key of the stack carries (components/tags.py, `cluster_tags`): keys are
    created only with it (`aws:RequestTag`) and managed only when they have it (`aws:ResourceTag`); aliases by name."""
    if not kms:
        return []
    kms_arn = f"arn:{partition}:kms:{region}:*"
    tagged = {f"aws:ResourceTag/{CLUSTER_TAG}": [cluster]}
    statements = []
    if kms & KMS_CREATE_ACTIONS:
        condition = {"StringEquals": {**in_region["StringEquals"], f"aws:RequestTag/{CLUSTER_TAG}": [cluster]}}
        statements.append(_statement("CreateKeysTaggedWithTheCluster", kms & KMS_CREATE_ACTIONS, ["*"], condition))
    keyed = kms - {"kms:CreateKey"} - KMS_ACCOUNT_ACTIONS - KMS_ALIAS_ACTIONS
    if keyed:
        statements.append(_statement("KeysTaggedWithTheCluster", keyed, [f"{kms_arn}:key/*"], {"StringEquals": tagged}))
    if kms & KMS_ALIAS_ACTIONS:
        statements.append(
            _statement(
                "TheClustersAliases", kms & KMS_ALIAS_ACTIONS, [f"{kms_arn}:alias/{cluster}-*", f"{kms_arn}:key/*"]
            )
        )
    if kms & KMS_ACCOUNT_ACTIONS:
        statements.append(_statement("ListAliases", kms & KMS_ACCOUNT_ACTIONS, ["*"], in_region))
    return statements


#: "Managed policy size: 6,144 characters", not counting white space (IAM User Guide, IAM and AWS STS quotas,
#: https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_iam-quotas.html).
MANAGED_POLICY_CHARS = 6144


def policy_chars(document: dict[str, Any]) -> int:
    """A policy's size as IAM counts it: its JSON without white space."""
    return len(json.dumps(document, separators=(",", ":")))


def _fitting(statement: dict[str, Any]) -> list[dict[str, Any]]:
    """The statement, or its actions split in halves until each part fits a managed policy on its own."""
    if policy_chars({"Version": "2012-10-17", "Statement": [statement]}) <= MANAGED_POLICY_CHARS:
        return [statement]
    half = len(statement["Action"]) // 2
    first = {**statement, "Sid": statement["Sid"] + "A", "Action": statement["Action"][:half]}
    second = {**statement, "Sid": statement["Sid"] + "B", "Action": statement["Action"][half:]}
    return [*_fitting(first), *_fitting(second)]


def managed_policies(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The policy cut into managed policies of at most `MANAGED_POLICY_CHARS` each, statements kept in order."""
    parts: list[list[dict[str, Any]]] = [[]]
    for statement in (part for s in document["Statement"] for part in _fitting(s)):
        candidate = {"Version": document["Version"], "Statement": [*parts[-1], statement]}
        if parts[-1] and policy_chars(candidate) > MANAGED_POLICY_CHARS:
            parts.append([])
        parts[-1].append(statement)
    return [{"Version": document["Version"], "Statement": statements} for statements in parts]


def policy_text(stack: str, plan: dict[str, Any], invokes: Iterable[str]) -> str:
    """The stack's deployer policy as managed policies to attach together, by name: `<project>-deployer-<stack>-N`."""
    parts = managed_policies(deployer_policy(plan, invokes))
    named = {f"{plan['project']}-deployer-{stack}-{n}": part for n, part in enumerate(parts, start=1)}
    return json.dumps(named, indent=2) + "\n"


def policy_path(stack: str) -> Path:
    return POLICY_DIR / f"{stack}.json"


def stack_policy_text(stack: str | None = None, config_file: Path | None = None) -> str:
    """Plan the stack offline (raises ConfigError on an invalid config) and render its deployer policy."""
    from blueprint.plan.plan import run_stack_under_mocks  # imports pulumi and the providers: only when planning

    planned = run_stack_under_mocks(stack, config_file)
    return policy_text(planned.files.stack, planned.plan, planned.run.invokes)


def _generated() -> dict[Path, str]:
    from blueprint.plan.runner import list_stacks

    return {policy_path(stack): stack_policy_text(stack) for stack in list_stacks()}


def write() -> None:
    """Write docs/deployer-policy/<stack>.json for every stack in stacks/, and remove those of stacks gone."""
    POLICY_DIR.mkdir(exist_ok=True)
    generated = _generated()
    for path in POLICY_DIR.glob("*.json"):
        if path not in generated:
            path.unlink()
    for path, text in generated.items():
        path.write_text(text)


def stale() -> list[str]:
    """The policy files that differ from what the stacks' plans derive, are missing, or belong to no stack."""
    generated = _generated()
    existing = set(POLICY_DIR.glob("*.json")) if POLICY_DIR.exists() else set()
    out = [p for p, text in generated.items() if not p.exists() or p.read_text() != text]
    out += sorted(existing - set(generated))
    return [str(p.relative_to(ROOT)) for p in out]
