"""The health loop: its service account and RBAC, the ConfigMaps of its program and settings, and its Deployment on
the system pool, in the `node-health` namespace (created with its Pod Security level by `components.namespaces`),
and the Pod Identity role of the repair path's AWS calls (`components.node_health_role`). What goes into them is
computed in `components.planning.addons.node_health` and `components.planning.node_health_repair`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import pulumi
import pulumi_kubernetes as k8s

from components.addons.service_account import service_account_with_roles
from components.config import NodeHealth
from components.context import ClusterContext
from components.node_health_role import node_health_role
from components.planning.addons import node_health as plan
from components.planning.health_checks import check_claim_templates
from components.planning.node_health_repair import ROLE_NAME, repair_config_data
from components.planning.pools import PoolPlan


class NodeHealthLoop(pulumi.ComponentResource):
    """The health loop's Deployment and what it needs."""

    def __init__(
        self,
        name: str,
        *,
        context: ClusterContext,
        settings: NodeHealth,
        plans: Sequence[PoolPlan],
        drain_timeout_seconds: int,
        cloudwatch: bool = False,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """`cloudwatch`: the stack runs Container Insights, so the loop publishes its metrics to CloudWatch (its
        settings say where, its role may write there) for the stack's alarms and dashboard."""
        super().__init__("gpu-clusters:index:NodeHealthLoop", name, None, opts)
        target = plan.cloudwatch_target(context.cluster_name_plain) if cloudwatch else None
        k8s_opts = pulumi.ResourceOptions(
            provider=context.k8s_provider, parent=self, depends_on=list(context.kubernetes_ready)
        )
        ns_opts = pulumi.ResourceOptions.merge(
            k8s_opts, pulumi.ResourceOptions(depends_on=context.namespace_ready(plan.NAMESPACE))
        )
        meta = k8s.meta.v1.ObjectMetaArgs
        # What the loop's RBAC cannot say: which pods it may create and which node fields it may change. Registered
        # before the Deployment, so the loop never runs unchecked (docs/security.md, "The health loop").
        self.admission: list[pulumi.Resource] = []
        for policy, binding in plan.admission_policies():
            vap = k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
                f"{name}-{policy['metadata']['name']}",
                metadata=meta(name=policy["metadata"]["name"]),
                spec=cast(Any, policy["spec"]),
                opts=k8s_opts,
            )
            vap_binding = k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
                f"{name}-{binding['metadata']['name']}",
                metadata=meta(name=binding["metadata"]["name"]),
                spec=cast(Any, binding["spec"]),
                opts=pulumi.ResourceOptions.merge(k8s_opts, pulumi.ResourceOptions(depends_on=[vap])),
            )
            self.admission += [vap, vap_binding]
        in_cluster = service_account_with_roles(
            name,
            account=plan.NAME,
            namespace=plan.NAMESPACE,
            cluster_rules=plan.CLUSTER_RULES,
            namespace_rules=plan.NAMESPACE_RULES,
            cluster_opts=k8s_opts,
            namespace_opts=ns_opts,
        )
        self.program = k8s.core.v1.ConfigMap(
            f"{name}-program",
            metadata=meta(name=plan.PROGRAM_CONFIG_MAP, namespace=plan.NAMESPACE),
            data=plan.program_files(),
            opts=ns_opts,
        )
        self.settings = k8s.core.v1.ConfigMap(
            f"{name}-settings",
            metadata=meta(name=plan.SETTINGS_CONFIG_MAP, namespace=plan.NAMESPACE),
            data={
                "config.json": plan.settings_file(settings, plans, target),
                **repair_config_data(
                    plans, drain_timeout_seconds, {p.name for p in plans if p.management == "managed"}
                ),
            },
            opts=ns_opts,
        )
        # A DRA pool's check pods take the node's GPUs through a claim made from these templates.
        self.claim_templates = [
            k8s.resource.v1.ResourceClaimTemplate(
                f"{name}-{template}",
                metadata=meta(name=template, namespace=plan.NAMESPACE),
                spec=cast(Any, spec),
                opts=ns_opts,
            )
            for template, spec in check_claim_templates(list(plans)).items()
        ]
        # The repair path's AWS calls: Pod Identity injects the credentials when the pod is admitted, so the
        # Deployment waits for the association, not only the role.
        namespace = target["namespace"] if target is not None else None
        iam_role = node_health_role(context.pod_identity_role, context.cluster_name_plain, self, namespace)
        association = getattr(context.pod_identity_role, "associations", {}).get(ROLE_NAME)
        identity = [iam_role, *([association] if association is not None else [])]
        self.deployment = k8s.apps.v1.Deployment(
            f"{name}-deployment",
            metadata=meta(name=plan.NAME, namespace=plan.NAMESPACE, labels=dict(plan.LOOP_POD_LABELS)),
            spec=cast(Any, plan.deployment_spec(plans, context.region)),
            opts=pulumi.ResourceOptions.merge(
                ns_opts,
                pulumi.ResourceOptions(
                    depends_on=[
                        *in_cluster,
                        *self.admission,
                        self.program,
                        self.settings,
                        *self.claim_templates,
                        *identity,
                    ]
                ),
            ),
        )
        self.register_outputs({"deployment": self.deployment.metadata.name})
