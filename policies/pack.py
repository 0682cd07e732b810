"""The rules of `policies.rules` as policy SDK objects: names, descriptions, enforcement levels, config schemas.

`POLICIES` is what `policies/__main__.py` serves to the Pulumi engine and what `blueprint.plan.check` runs over the
offline plan, so `pulumi preview --policy-pack policies` and `blueprint check` judge a stack with the same code.

One source for each setting: a policy's description (and URL) is the first paragraph of its rule's docstring;
its default enforcement level and parameter defaults come from `policy-config.json`, the file also handed to
`pulumi preview --policy-pack-config`. The schema here only says what each parameter means and which values are
valid; the engine fills in its `default`s when no config is given, and so do the wrappers below when a test or
the offline checker passes none.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, get_args

from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyConfigSchema,
    PolicyResource,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UnknownValueError

from components.config import DEFAULT_LOG_RETENTION_DAYS, MAX_IMDS_HOP_LIMIT, LogRetentionDays, LogType
from policies.resources import (
    EFS,
    EKS_CLUSTER,
    HELM_TYPES,
    KMS_KEY,
    LAUNCH_TEMPLATE,
    LUSTRE,
    SECURITY_GROUP,
    SG_INGRESS_RULE,
    SG_RULE,
    Resource,
    Stack,
)
from policies.rules import (
    alerts,
    control_plane,
    cost,
    data,
    encryption,
    fabric,
    iam,
    kubernetes,
    logs,
    network,
    nodes,
    queues,
    resource_policies,
    spot,
    supply_chain,
    user_data,
)
from policies.rules.exceptions import Approval, excepted, load_approvals, policy_exceptions

PACK_NAME = "gpu-clusters-guardrails"
#: The approved exceptions to the security rules (`policies/exceptions.json`, owned through `.github/CODEOWNERS`).
APPROVALS: list[Approval] = load_approvals()
CONFIG_FILE = Path(__file__).with_name("policy-config.json")
#: The shipped policy config: `{policy: {"enforcementLevel": ..., <parameter>: <default>}}`.
DEFAULT_CONFIG: dict[str, Any] = json.loads(CONFIG_FILE.read_text())

ResourceRule = Callable[[Resource, Mapping[str, Any]], Iterable[str]]
StackRule = Callable[[Stack, Mapping[str, Any]], Iterable[tuple[str, str | None]]]

_REQUIRE_KMS = {
    "requireKmsKey": {
        "type": "boolean",
        "description": "Require a customer-managed KMS key (kmsKeyId / SSE-KMS), not only AWS-managed encryption.",
    }
}
#: What each policy's parameters mean (JSON Schema); defaults come from policy-config.json.
PARAMETERS: dict[str, dict[str, dict[str, Any]]] = {
    "imdsv2-required": {
        "maxHopLimit": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_IMDS_HOP_LIMIT,
            "description": "Highest IMDS hop limit allowed (AWS: 2 for containers; 1 keeps pods off IMDS).",
        }
    },
    "encrypted-root-volume": _REQUIRE_KMS,
    "storage-encrypted": _REQUIRE_KMS,
    "s3-bucket-hardened": _REQUIRE_KMS,
    "eks-control-plane-logging": {
        "requiredLogTypes": {
            "type": "array",
            "items": {"type": "string", "enum": list(get_args(LogType))},
            "description": "EKS control-plane log types that must be enabled.",
        }
    },
    "spot-instance-diversification": {
        "minInstanceTypes": {
            "type": "integer",
            "minimum": 1,
            "description": "Fewest instance types a spot pool may offer.",
        }
    },
    "cost-allocation-tags": {
        "requiredTags": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Tag keys every taggable AWS resource must carry (cost allocation).",
        }
    },
    "log-group-retention": {
        "minRetentionDays": {
            "type": "integer",
            "minimum": 1,
            "maximum": max(get_args(LogRetentionDays)),
            "description": "Fewest days a log group may keep its logs "
            f"(Security Hub CloudWatch.16 defaults to {DEFAULT_LOG_RETENTION_DAYS}).",
        }
    },
    "gpu-budget": {
        "maxGpus": {
            "type": "integer",
            "minimum": 0,
            "description": "Most GPUs the node pools may reach at maximum size.",
        },
        "maxUsdPerHour": {
            "type": "number",
            "minimum": 0,
            "description": "Most USD per hour the node pools may cost at maximum size (on-demand list prices).",
        },
    },
}

_URL = re.compile(r"https?://[^\s)`\"']+")


def describe(rule: Callable[..., Any]) -> tuple[str, str | None]:
    """(description, first URL) from a rule's docstring: its first paragraph, on one line."""
    doc = (rule.__doc__ or "").strip()
    first = " ".join(line.strip() for line in doc.split("\n\n")[0].splitlines())
    url = _URL.search(doc)
    return first, url.group(0).rstrip(".,") if url else None


def default_level(name: str) -> EnforcementLevel:
    return EnforcementLevel(DEFAULT_CONFIG[name]["enforcementLevel"])


def schema(name: str) -> PolicyConfigSchema | None:
    params = PARAMETERS.get(name)
    if not params:
        return None
    defaults = DEFAULT_CONFIG.get(name, {})
    return PolicyConfigSchema(
        properties={k: {**v, **({"default": defaults[k]} if k in defaults else {})} for k, v in params.items()}
    )


def schema_defaults(policy: Policy) -> dict[str, Any]:
    """The parameter defaults the engine applies before any policy config (`default` of each schema property)."""
    if policy.config_schema is None:
        return {}
    return {k: v["default"] for k, v in policy.config_schema.properties.items() if "default" in v}


def _metadata(name: str, description: str, url: str | None) -> dict[str, Any]:
    """What every policy declares besides its check: name, description, default level, config schema, link."""
    return {
        "name": name,
        "description": description,
        "enforcement_level": default_level(name),
        "config_schema": schema(name),
        "url": url,
    }


#: Each resource policy's resource types (None: every type). The engine calls every policy on every resource, and
#: the wrapper below passes over the other types; `blueprint check` calls a policy only on its own types.
RESOURCE_TYPES: dict[str, frozenset[str] | None] = {}


def resource_policy(name: str, rule: ResourceRule, types: Collection[str] | None) -> ResourceValidationPolicy:
    """Wrap a resource rule: it runs on resources of `types` (None: every resource) and reports each message, except
    on a resource that carries an exception from this policy with a reason (`policies.rules.exceptions`)."""
    description, url = describe(rule)
    RESOURCE_TYPES[name] = frozenset(types) if types is not None else None

    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        if types is not None and args.resource_type not in types:
            return
        resource = Resource.from_args(args)
        approvals = APPROVALS if name in APPROVAL_REQUIRED else None
        config = {**schema_defaults(policy), **args.get_config()}
        # The exception is read only where it changes the outcome (a message, or a value unknown in a preview):
        # most resources break no rule, and reading every resource's tags once per policy was a third of a check.
        try:
            messages = list(rule(resource, config))
        except UnknownValueError:
            if excepted(resource, name, approvals):
                return
            raise
        if messages and not excepted(resource, name, approvals):
            for message in messages:
                report_violation(message, None)

    policy = ResourceValidationPolicy(validate=validate, **_metadata(name, description, url))
    return policy


#: The last resource list `stack_view` indexed, and its index.
_last_view: tuple[Sequence[PolicyResource], Stack] | None = None


def stack_view(resources: Sequence[PolicyResource]) -> Stack:
    """The rules' indexed view of a stack's resources, built once per resource list.

    Every stack policy of one run receives the same list (from the analyzer and from `blueprint check` alike) and
    rules only read the view, so the stack policies share one index instead of rebuilding it each.
    """
    global _last_view
    if _last_view is None or _last_view[0] is not resources:
        _last_view = (resources, Stack(Resource.from_policy_resource(r) for r in resources))
    return _last_view[1]


def stack_policy(name: str, rule: StackRule) -> StackValidationPolicy:
    """Wrap a stack rule: it sees every resource and reports each message against the resource it names, except on
    a resource that carries an exception from this policy with a reason (`policies.rules.exceptions`)."""
    description, url = describe(rule)

    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        config = {**schema_defaults(policy), **args.get_config()}
        stack = stack_view(args.resources)
        for message, urn in rule(stack, config):
            if urn is not None and excepted(
                stack.by_urn.get(urn), name, APPROVALS if name in APPROVAL_REQUIRED else None
            ):
                continue
            report_violation(message, urn)

    policy = StackValidationPolicy(validate=validate, **_metadata(name, description, url))
    return policy


POLICIES: list[Policy] = [
    # GPU fabric
    resource_policy("efa-interfaces-complete", fabric.efa_interfaces_complete, [LAUNCH_TEMPLATE]),
    stack_policy("efa-security-group-self-referencing", fabric.efa_security_group_self_referencing),
    stack_policy("efa-pool-single-az", fabric.efa_pool_single_az),
    stack_policy("efa-placement-group", fabric.efa_placement_group),
    stack_policy("efa-device-plugin-deployed", fabric.efa_device_plugin_deployed),
    stack_policy("efa-jobs-request-every-device", fabric.efa_jobs_request_every_device),
    # Nodes
    resource_policy("imdsv2-required", nodes.imdsv2_required, [LAUNCH_TEMPLATE]),
    resource_policy("imds-hop-limit-justified", nodes.imds_hop_limit_justified, [LAUNCH_TEMPLATE]),
    resource_policy("no-secrets-in-user-data", user_data.no_secrets_in_user_data, [LAUNCH_TEMPLATE]),
    resource_policy("no-public-ip", nodes.no_public_ip, [LAUNCH_TEMPLATE]),
    resource_policy("encrypted-root-volume", nodes.encrypted_root_volume, [LAUNCH_TEMPLATE]),
    stack_policy("gpu-pools-tainted-and-tolerated", nodes.gpu_pools_tainted_and_tolerated),
    # Data
    resource_policy("storage-encrypted", data.storage_encrypted, [LUSTRE, EFS]),
    stack_policy("s3-bucket-hardened", data.s3_bucket_hardened),
    resource_policy("stateful-resources-protected", data.stateful_protected, None),
    resource_policy("lustre-valid-size", data.lustre_valid_size, [LUSTRE]),
    # Control plane
    resource_policy("eks-endpoint-private", control_plane.eks_endpoint_private, [EKS_CLUSTER]),
    resource_policy("eks-secrets-encryption", control_plane.eks_secrets_encryption, [EKS_CLUSTER]),
    resource_policy("eks-control-plane-logging", control_plane.eks_control_plane_logging, [EKS_CLUSTER]),
    # Network
    resource_policy("no-public-ingress", network.no_public_ingress, [SECURITY_GROUP, SG_INGRESS_RULE, SG_RULE]),
    resource_policy(
        "no-world-admin-ports",
        network.no_world_admin_ports,
        [SECURITY_GROUP, network.DEFAULT_SECURITY_GROUP, SG_INGRESS_RULE, SG_RULE],
    ),
    stack_policy("default-security-group-closed", network.default_security_group_closed),
    stack_policy("vpc-flow-logs", logs.vpc_flow_logs),
    stack_policy("no-public-ingress-combined", network.no_public_ingress_combined),
    # Identity and access
    stack_policy("iam-no-unscoped-create-delete", iam.iam_no_unscoped_create_delete),
    stack_policy("iam-no-escalation-on-any-resource", iam.iam_no_escalation_on_any_resource),
    resource_policy("iam-trust-source-conditions", iam.iam_trust_source_conditions, [iam.ROLE]),
    stack_policy("iam-cross-account-external-id", iam.iam_cross_account_external_id),
    resource_policy(
        "resource-policy-no-open-principal",
        resource_policies.resource_policy_no_open_principal,
        resource_policies.RESOURCE_POLICY_TYPES,
    ),
    stack_policy("s3-tls-only", resource_policies.s3_tls_only),
    # Kubernetes objects the stack declares
    resource_policy("k8s-service-exposure", kubernetes.k8s_service_exposure, [kubernetes.SERVICE]),
    resource_policy("k8s-pod-host-access", kubernetes.k8s_pod_host_access, kubernetes.POD_TEMPLATES.keys()),
    resource_policy("k8s-namespace-pod-security", kubernetes.k8s_namespace_pod_security, kubernetes.NAMESPACE_SOURCES),
    stack_policy("training-namespaces-queued", queues.training_namespaces_queued),
    # Encryption and logs
    resource_policy("kms-key-rotation", encryption.kms_key_rotation, [KMS_KEY]),
    resource_policy("sqs-queue-encrypted", encryption.sqs_queue_encrypted, [encryption.SQS_QUEUE]),
    resource_policy("sns-topic-encrypted", encryption.sns_topic_encrypted, [encryption.SNS_TOPIC]),
    resource_policy("log-group-encrypted", encryption.log_group_encrypted, [encryption.LOG_GROUP]),
    resource_policy("log-group-retention", logs.log_group_retention, [encryption.LOG_GROUP]),
    stack_policy("eks-log-group-declared", logs.eks_log_group_declared),
    # Spot
    stack_policy("spot-instance-diversification", spot.spot_instance_diversification),
    stack_policy("spot-capacity-rebalance", spot.spot_capacity_rebalance),
    stack_policy("spot-interruption-handler", spot.spot_interruption_handler),
    # Supply chain
    resource_policy("helm-chart-pinned", supply_chain.helm_chart_pinned, HELM_TYPES),
    # Cost
    resource_policy("cost-allocation-tags", cost.cost_allocation_tags, None),
    stack_policy("gpu-budget", cost.gpu_budget),
    # Operations
    resource_policy("alarms-notify-someone", alerts.alarms_notify_someone, [alerts.METRIC_ALARM]),
]
#: The security rules: a tag in the stack's own files cannot waive them; only an approval in `policies/exceptions.json`
#: can, a file whose changes need its CODEOWNERS' review (docs/security.md, "Raising an exception").
APPROVAL_REQUIRED: frozenset[str] = frozenset(
    {
        "imdsv2-required",
        "imds-hop-limit-justified",
        "no-secrets-in-user-data",
        "no-public-ip",
        "encrypted-root-volume",
        "storage-encrypted",
        "s3-bucket-hardened",
        "eks-endpoint-private",
        "eks-secrets-encryption",
        "eks-control-plane-logging",
        "no-public-ingress",
        "no-public-ingress-combined",
        "no-world-admin-ports",
        "default-security-group-closed",
        "vpc-flow-logs",
        "iam-no-unscoped-create-delete",
        "iam-no-escalation-on-any-resource",
        "iam-trust-source-conditions",
        "iam-cross-account-external-id",
        "resource-policy-no-open-principal",
        "s3-tls-only",
        "kms-key-rotation",
        "sqs-queue-encrypted",
        "sns-topic-encrypted",
        "k8s-service-exposure",
        "k8s-pod-host-access",
        "k8s-namespace-pod-security",
    }
)
# Exceptions: every waiver and its reason, reported (advisory) so none is silent.
POLICIES.append(
    stack_policy(
        "policy-exceptions", policy_exceptions({p.name for p in POLICIES}, APPROVAL_REQUIRED, lambda: APPROVALS)
    )
)

#: Policies by name.
BY_NAME: dict[str, Policy] = {p.name: p for p in POLICIES}
