"""The stack's namespaces with their Pod Security labels, the workload namespaces' GPU quotas, and the
NetworkPolicies: everything that bounds a namespace, built before anything is installed into one.

Planned in `components.planning.namespaces` (levels, reasons, quotas) and `components.planning.network_policies`;
this component only registers them. Helm releases, claims and workloads wait for their namespace through
`ClusterContext.namespace_ready`, so no pod is admitted before its namespace's labels exist.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import pulumi
import pulumi_kubernetes as k8s

from components.context import ClusterContext
from components.planning.addons.selection import AddonSelection
from components.planning.gpu_quotas import GpuQuota
from components.planning.namespaces import NamespacePlan, pod_security_labels
from components.planning.network_policies import CrossCniSources, network_policies

MANAGED_BY = {"app.kubernetes.io/managed-by": "gpu-clusters"}
#: The ResourceQuota of a workload namespace.
GPU_QUOTA_NAME = "gpus"


class StackNamespaces(pulumi.ComponentResource):
    """`namespaces`: the Namespace (or, for `default`, the NamespacePatch) of each labelled namespace, by name.
    `across`: the stack's cross-network sources when it has hybrid pools (`cross_cni_sources`)."""

    def __init__(
        self,
        name: str,
        ctx: ClusterContext,
        plans: Sequence[NamespacePlan],
        addons: AddonSelection,
        across: CrossCniSources | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpu-clusters:index:StackNamespaces", name, None, opts)
        prefix = ctx.cluster_name_plain
        k8s_opts = pulumi.ResourceOptions(provider=ctx.k8s_provider, parent=self, depends_on=list(ctx.kubernetes_ready))
        self.namespaces: dict[str, pulumi.Resource] = {}
        for plan in plans:
            if not plan.labelled:
                continue
            labels = {**MANAGED_BY, **pod_security_labels(plan.level, ctx.kubernetes_version)}
            if plan.ownership == "patched":
                # Kubernetes made it; server-side apply adds only our labels and removes only them on delete.
                self.namespaces[plan.name] = k8s.core.v1.NamespacePatch(
                    f"{prefix}-ns-{plan.name}",
                    metadata=k8s.meta.v1.ObjectMetaPatchArgs(name=plan.name, labels=labels),
                    opts=k8s_opts,
                )
            else:
                self.namespaces[plan.name] = k8s.core.v1.Namespace(
                    f"{prefix}-ns-{plan.name}",
                    metadata=k8s.meta.v1.ObjectMetaArgs(name=plan.name, labels=labels),
                    opts=k8s_opts,
                )
        self.quotas: dict[str, k8s.core.v1.ResourceQuota] = {
            plan.name: self._quota(prefix, plan.quota, k8s_opts) for plan in plans if plan.quota is not None
        }
        self.network_policies: dict[str, k8s.networking.v1.NetworkPolicy] = {}
        for policy in network_policies(plans, addons, across):
            self.network_policies[f"{policy.namespace}/{policy.name}"] = k8s.networking.v1.NetworkPolicy(
                f"{prefix}-{policy.namespace}-{policy.name}",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=policy.name, namespace=policy.namespace, labels=MANAGED_BY),
                spec=cast(Any, policy.spec),
                opts=self._in(policy.namespace, k8s_opts),
            )
        self.register_outputs({"namespaces": list(self.namespaces)})

    def _in(self, namespace: str, base: pulumi.ResourceOptions) -> pulumi.ResourceOptions:
        waits = [self.namespaces[namespace]] if namespace in self.namespaces else []
        return pulumi.ResourceOptions.merge(base, pulumi.ResourceOptions(depends_on=waits))

    def _quota(self, prefix: str, quota: GpuQuota, base: pulumi.ResourceOptions) -> k8s.core.v1.ResourceQuota:
        return k8s.core.v1.ResourceQuota(
            f"{prefix}-{quota.namespace}-{GPU_QUOTA_NAME}-quota",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=GPU_QUOTA_NAME, namespace=quota.namespace, labels=MANAGED_BY),
            spec=k8s.core.v1.ResourceQuotaSpecArgs(hard=quota.hard),
            opts=self._in(quota.namespace, base),
        )
