"""A controller's identity in the cluster: its ServiceAccount, a ClusterRole and a Role in its namespace with the
rules its planning module lists, and their bindings. The add-ons that run their own controllers (the mig-manager, the
health loop) build it here, so each only states its rules (and why) in planning."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s


def _rules(rules: Sequence[dict[str, Any]]) -> list[k8s.rbac.v1.PolicyRuleArgs]:
    return [
        k8s.rbac.v1.PolicyRuleArgs(api_groups=r["apiGroups"], resources=r["resources"], verbs=r["verbs"]) for r in rules
    ]


def service_account_with_roles(
    name: str,
    *,
    account: str,
    namespace: str,
    cluster_rules: Sequence[dict[str, Any]],
    namespace_rules: Sequence[dict[str, Any]],
    cluster_opts: pulumi.ResourceOptions,
    namespace_opts: pulumi.ResourceOptions,
) -> list[pulumi.Resource]:
    """The ServiceAccount `account` in `namespace` bound to a ClusterRole and a Role of the same name; returns the
    account and the bindings, which the controller's pods wait for. `name` prefixes the resource names."""
    meta = k8s.meta.v1.ObjectMetaArgs
    service_account = k8s.core.v1.ServiceAccount(
        f"{name}-service-account", metadata=meta(name=account, namespace=namespace), opts=namespace_opts
    )
    cluster_role = k8s.rbac.v1.ClusterRole(
        f"{name}-cluster-role", metadata=meta(name=account), rules=_rules(cluster_rules), opts=cluster_opts
    )
    role = k8s.rbac.v1.Role(
        f"{name}-role",
        metadata=meta(name=account, namespace=namespace),
        rules=_rules(namespace_rules),
        opts=namespace_opts,
    )
    subject = k8s.rbac.v1.SubjectArgs(kind="ServiceAccount", name=account, namespace=namespace)
    rbac = "rbac.authorization.k8s.io"
    return [
        service_account,
        k8s.rbac.v1.ClusterRoleBinding(
            f"{name}-cluster-role-binding",
            metadata=meta(name=account),
            role_ref=k8s.rbac.v1.RoleRefArgs(api_group=rbac, kind="ClusterRole", name=account),
            subjects=[subject],
            opts=pulumi.ResourceOptions.merge(cluster_opts, pulumi.ResourceOptions(depends_on=[cluster_role])),
        ),
        k8s.rbac.v1.RoleBinding(
            f"{name}-role-binding",
            metadata=meta(name=account, namespace=namespace),
            role_ref=k8s.rbac.v1.RoleRefArgs(api_group=rbac, kind="Role", name=account),
            subjects=[subject],
            opts=pulumi.ResourceOptions.merge(namespace_opts, pulumi.ResourceOptions(depends_on=[role])),
        ),
    ]
