"""The health loop add-on (pure, no Pulumi): a one-replica Deployment on the system pool running
`programs.node_health` from a ConfigMap of its source on AWS's public Python image, its settings, its service
account and the RBAC it needs, nothing more. docs/operations.md, "The health loop"; the permissions' reasons:
docs/security.md.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from components.catalog.images import image
from components.config import NodeHealth
from components.planning.addons.placement import SYSTEM_NODE_SELECTOR, system_plans, tolerations_for
from components.planning.check_pods import DCGM_CAPABILITIES
from components.planning.health_checks import CHECK_POD_LABELS, DCGM_IMAGE, check_pod_templates
from components.planning.node_health import (
    CLOUDWATCH_NAMESPACE,
    FAILED_TAINT_KEY,
    HEALTH_STATE_LABEL,
    LOOP_POD_LABELS,
    METRICS_PORT,
    NODE_HEALTH_NAMESPACE,
    SERVICE_ACCOUNT,
    STARTUP_TAINT_KEY,
)

__all__ = ["LOOP_POD_LABELS"]
from components.planning.pools import PoolPlan

NAME = SERVICE_ACCOUNT
NAMESPACE = NODE_HEALTH_NAMESPACE
#: AWS's Lambda Python image with boto3 (catalog `images.yaml`, pinned by tag). Its own entry point is the Lambda
#: runtime's bootstrap: the Deployment's `command` replaces it ([LAMBDAIMG]).
IMAGE = image("node-health-loop").reference
#: The ConfigMap of the program's source and the one of its settings.
PROGRAM_CONFIG_MAP = "node-health-program"
SETTINGS_CONFIG_MAP = "node-health-settings"
#: Where the pod mounts them: the program as the package tree `programs/node_health/` under `PROGRAM_DIR`.
PROGRAM_DIR = "/opt/node-health"
SETTINGS_DIR = "/etc/node-health"
#: The image's runtime directory (`LAMBDA_RUNTIME_DIR` of its Dockerfile), where Lambda's Python runtime keeps the
#: SDK it ships: Lambda sets `PYTHONPATH` to it for a function, the image does not, so the Deployment does
#: ([LAMBDAIMG], [LAMBDAENV]).
LAMBDA_RUNTIME_DIR = "/var/runtime"
PYTHON_PATH = f"{PROGRAM_DIR}:{LAMBDA_RUNTIME_DIR}"
#: Seconds between the loop's passes.
POLL_SECONDS = 30
#: The unprivileged user the loop runs as (its image's files are world-readable; it writes nothing to disk).
RUN_AS = 65532
PROGRAMS_ROOT = Path(__file__).resolve().parents[3] / "programs"


def _sources() -> list[Path]:
    return [PROGRAMS_ROOT / "__init__.py", *sorted((PROGRAMS_ROOT / "node_health").glob("*.py"))]


def _key(path: Path) -> str:
    """A ConfigMap key for a source file: its path under the project with `/` as `.` (`programs.node_health.kube.py`;
    keys allow letters, digits, `-`, `_` and `.` only)."""
    return path.relative_to(PROGRAMS_ROOT.parent).as_posix().replace("/", ".")


def program_files() -> dict[str, str]:
    """The program's source by ConfigMap key: the package's modules and the parent package's `__init__.py`, read
    from the project so the cluster runs exactly what the tests ran."""
    return {_key(path): path.read_text() for path in _sources()}


def program_items() -> list[dict[str, str]]:
    """The ConfigMap volume's `items`: each key at its path in the package tree."""
    return [{"key": _key(path), "path": path.relative_to(PROGRAMS_ROOT.parent).as_posix()} for path in _sources()]


def cloudwatch_target(cluster_name: str) -> dict[str, str]:
    """Where the loop publishes its counters, conditions and heartbeat on a Container Insights stack
    (`programs.node_health.cloudwatch.from_settings` reads it): no Prometheus scrapes the loop there, and the stack's
    CloudWatch alarms and dashboard read these. `cluster_name` is the EKS cluster's, Container Insights' own
    `ClusterName`."""
    return {"namespace": CLOUDWATCH_NAMESPACE, "clusterName": cluster_name}


def settings(
    config: NodeHealth, plans: Sequence[PoolPlan], cloudwatch: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The loop's `config.json` (programs.node_health.checks.Settings): the gated pools' check pods and the
    timings of `addons.nodeHealth`, and `cloudWatch` (`cloudwatch_target`) when the loop publishes there."""
    idle = config.idle_check_minutes
    return {
        **({"cloudWatch": dict(cloudwatch)} if cloudwatch else {}),
        "pools": check_pod_templates(list(plans), config.check_timeout_seconds),
        "idleCheckSeconds": idle * 60 if idle is not None else None,
        "maxConcurrentChecks": config.max_concurrent_checks,
        "checkTimeoutSeconds": config.check_timeout_seconds,
        "scheduleTimeoutSeconds": config.schedule_timeout_seconds,
        "pollSeconds": POLL_SECONDS,
        "metricsPort": METRICS_PORT,
    }


def settings_file(config: NodeHealth, plans: Sequence[PoolPlan], cloudwatch: Mapping[str, str] | None = None) -> str:
    return json.dumps(settings(config, plans, cloudwatch), indent=1, sort_keys=True)


#: Least privilege, by what the loop does: read nodes and patch them (state label, annotations, the startup taint,
#: cordon); see every pod (is a node running GPU work; the repair path drains); evict pods (the drain honours
#: PodDisruptionBudgets); in its own namespace create and delete its check pods and keep the repair path's state
#: ConfigMap.
CLUSTER_RULES: tuple[dict[str, Any], ...] = (
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "patch"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
    {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
)
NAMESPACE_RULES: tuple[dict[str, Any], ...] = (
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "delete", "list"]},
    {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "create", "patch"]},
)


def deployment_spec(plans: Sequence[PoolPlan], region: str) -> dict[str, Any]:
    """One replica (`Recreate`: never two loops at once, each would start checks), on the system pool, restricted.
    `AWS_REGION` for the repair path's AWS calls (Pod Identity gives credentials, not a region)."""
    labels = dict(LOOP_POD_LABELS)
    return {
        "replicas": 1,
        "strategy": {"type": "Recreate"},
        "selector": {"matchLabels": labels},
        "template": {
            "metadata": {"labels": labels},
            "spec": {
                "serviceAccountName": SERVICE_ACCOUNT,
                "nodeSelector": dict(SYSTEM_NODE_SELECTOR),
                "tolerations": tolerations_for(system_plans(plans)),
                "securityContext": {
                    "runAsNonRoot": True,
                    "runAsUser": RUN_AS,
                    "runAsGroup": RUN_AS,
                    "seccompProfile": {"type": "RuntimeDefault"},
                },
                "containers": [
                    {
                        "name": "loop",
                        "image": IMAGE,
                        "command": ["python3", "-m", "programs.node_health.loop"],
                        "env": [
                            {"name": "PYTHONPATH", "value": PYTHON_PATH},
                            {"name": "PYTHONUNBUFFERED", "value": "1"},
                            # the root filesystem and the program's ConfigMap are read-only: no `.pyc` to write
                            {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},
                            {"name": "AWS_REGION", "value": region},
                            {"name": "NODE_HEALTH_CONFIG", "value": f"{SETTINGS_DIR}/config.json"},
                        ],
                        "ports": [{"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"}],
                        "resources": {
                            "requests": {"cpu": "50m", "memory": "128Mi"},
                            "limits": {"memory": "256Mi"},
                        },
                        "securityContext": {
                            "allowPrivilegeEscalation": False,
                            "readOnlyRootFilesystem": True,
                            "capabilities": {"drop": ["ALL"]},
                        },
                        "volumeMounts": [
                            {"name": "program", "mountPath": PROGRAM_DIR, "readOnly": True},
                            {"name": "settings", "mountPath": SETTINGS_DIR, "readOnly": True},
                        ],
                    }
                ],
                "volumes": [
                    {"name": "program", "configMap": {"name": PROGRAM_CONFIG_MAP, "items": program_items()}},
                    {"name": "settings", "configMap": {"name": SETTINGS_CONFIG_MAP}},
                ],
            },
        },
    }


#: The loop's identity as the API server sees it: only its requests are judged by the admission policies below.
LOOP_USERNAME = f"system:serviceaccount:{NODE_HEALTH_NAMESPACE}:{SERVICE_ACCOUNT}"
#: The node annotations the loop keeps its state in all start with this (programs.node_health.names, .repair).
STATE_ANNOTATION_PREFIX = f"{HEALTH_STATE_LABEL}-"
#: The taints a node patch of the loop may add or remove: the startup taint (the gate removes it), the status taint
#: a failed gate swaps it for, and the one the node lifecycle controller mirrors `spec.unschedulable` into (the
#: loop cordons).
LOOP_TAINTS = (STARTUP_TAINT_KEY, FAILED_TAINT_KEY, "node.kubernetes.io/unschedulable")
#: Node spec and metadata fields the loop never changes (everything of a Node's spec but its taints and
#: `unschedulable`; the status is not writable through the main resource).
FROZEN_NODE_FIELDS = (
    "spec.podCIDR",
    "spec.podCIDRs",
    "spec.providerID",
    "spec.configSource",
    "spec.externalID",
    "metadata.ownerReferences",
    "metadata.finalizers",
)
POD_POLICY_NAME = "gpu-clusters-node-health-pods"
NODE_POLICY_NAME = "gpu-clusters-node-health-nodes"


def _literal(value: Any) -> str:
    """A CEL literal: JSON's strings, lists and booleans are valid CEL for the values used here."""
    return json.dumps(value)


def _unchanged(path: str) -> str:
    """Field `path` is absent from both the new and the old object, or equal in both."""
    new, old = f"object.{path}", f"oldObject.{path}"
    return f"has({new}) == has({old}) && (!has({new}) || {new} == {old})"


def _only_changed(new: str, old: str, may_change: str) -> str:
    """Every key of map `new` is `may_change(k)` or has `old`'s value, and every key of `old` that may not change
    is still in `new`."""
    allowed = may_change.format(k="k")
    return f"{new}.all(k, {allowed} || (k in {old} && {old}[k] == {new}[k])) && {old}.all(k, {allowed} || k in {new})"


def _policy(
    name: str, operations: list[str], resource: str, variables: list[dict[str, str]], validations: list[dict[str, str]]
) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            # Fail: the policy judges the loop's requests only (matchConditions), so an expression that cannot be
            # evaluated refuses the loop's request, never anyone else's; a broken policy must not open the door.
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {"apiGroups": [""], "apiVersions": ["v1"], "operations": operations, "resources": [resource]}
                ]
            },
            "matchConditions": [
                {"name": "health-loop", "expression": f"request.userInfo.username == {_literal(LOOP_USERNAME)}"}
            ],
            "variables": variables,
            "validations": [{**v, "reason": "Forbidden"} for v in validations],
        },
    }


def _binding(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {"policyName": name, "validationActions": ["Deny", "Audit"]},
    }


def pod_policy() -> dict[str, Any]:
    """The loop may create only check pods: the DCGM image, no capability but DCGM's, not privileged, no host
    namespace, port or path, no service account token, the check's labels. Its RBAC alone (pods `create` in a
    `privileged` namespace) would let it start a root pod on any node (docs/security.md, "The health loop")."""
    labels = " && ".join(
        f"{_literal(k)} in variables.labels && variables.labels[{_literal(k)}] == {_literal(v)}"
        for k, v in sorted(CHECK_POD_LABELS.items())
    )
    capabilities = _literal(list(DCGM_CAPABILITIES))
    container_ok = (
        f"c.image == {_literal(DCGM_IMAGE)}"
        " && (!has(c.ports) || c.ports.all(p, !has(p.hostPort) || p.hostPort == 0))"
        " && (!has(c.securityContext) || ("
        "(!has(c.securityContext.privileged) || !c.securityContext.privileged)"
        " && (!has(c.securityContext.capabilities) || !has(c.securityContext.capabilities.add)"
        f" || c.securityContext.capabilities.add.all(a, a in {capabilities}))))"
    )
    validations = [
        {
            "expression": f"object.spec.containers.all(c, {container_ok})",
            "message": f"the health loop's pods run {DCGM_IMAGE}, add no capability but {', '.join(DCGM_CAPABILITIES)}"
            ", are not privileged and use no host port",
        },
        {
            "expression": "(!has(object.spec.initContainers) || size(object.spec.initContainers) == 0)"
            " && (!has(object.spec.ephemeralContainers) || size(object.spec.ephemeralContainers) == 0)",
            "message": "the health loop's pods have no init or ephemeral containers",
        },
        {
            "expression": " && ".join(
                f"(!has(object.spec.{f}) || !object.spec.{f})" for f in ("hostNetwork", "hostPID", "hostIPC")
            ),
            "message": "the health loop's pods share no host namespace",
        },
        {
            "expression": "!has(object.spec.volumes) || object.spec.volumes.all(v, !has(v.hostPath))",
            "message": "the health loop's pods mount no host path",
        },
        {
            "expression": "has(object.spec.automountServiceAccountToken) && !object.spec.automountServiceAccountToken",
            "message": "the health loop's pods mount no service account token",
        },
        {"expression": labels, "message": "the health loop creates check pods only (their labels)"},
    ]
    variables = [
        {"name": "labels", "expression": "has(object.metadata.labels) ? object.metadata.labels : {}"},
    ]
    return _policy(POD_POLICY_NAME, ["CREATE"], "pods", variables, validations)


def node_policy() -> dict[str, Any]:
    """The loop's node patches may change only the health state label, its own annotations, `spec.unschedulable`
    and the startup and unschedulable taints: without this its `nodes patch` could relabel or untaint any node."""
    variables = [
        {"name": name, "expression": f"has({obj}.metadata.{field}) ? {obj}.metadata.{field} : {{}}"}
        for name, obj, field in (
            ("labels", "object", "labels"),
            ("oldLabels", "oldObject", "labels"),
            ("annotations", "object", "annotations"),
            ("oldAnnotations", "oldObject", "annotations"),
        )
    ] + [
        {
            "name": name,
            "expression": f"has({obj}.spec.taints)"
            f" ? {obj}.spec.taints.filter(t, !(t.key in {_literal(list(LOOP_TAINTS))})) : []",
        }
        for name, obj in (("otherTaints", "object"), ("oldOtherTaints", "oldObject"))
    ]
    validations = [
        {
            "expression": _only_changed(
                "variables.labels", "variables.oldLabels", f"{{k}} == {_literal(HEALTH_STATE_LABEL)}"
            ),
            "message": f"the health loop changes no node label but {HEALTH_STATE_LABEL}",
        },
        {
            "expression": _only_changed(
                "variables.annotations",
                "variables.oldAnnotations",
                f"{{k}}.startsWith({_literal(STATE_ANNOTATION_PREFIX)})",
            ),
            "message": f"the health loop changes no node annotation but its own ({STATE_ANNOTATION_PREFIX}*)",
        },
        {
            "expression": "variables.otherTaints == variables.oldOtherTaints",
            "message": f"the health loop adds or removes no node taint but {', '.join(LOOP_TAINTS)}",
        },
        {
            "expression": " && ".join(f"({_unchanged(path)})" for path in FROZEN_NODE_FIELDS),
            "message": "the health loop changes no node field but spec.unschedulable and spec.taints",
        },
    ]
    return _policy(NODE_POLICY_NAME, ["UPDATE"], "nodes", variables, validations)


def admission_policies() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """The loop's two admission policies, each with its binding."""
    return [(policy, _binding(policy["metadata"]["name"])) for policy in (pod_policy(), node_policy())]
