"""Registers the pool-identity ValidatingAdmissionPolicy and its binding, planned in
`components.planning.pool_identity` from each pool's node role ARNs (known only once the roles exist)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import pulumi
import pulumi_kubernetes as k8s

from components.context import ClusterContext
from components.planning.pool_identity import POLICY_NAME, PoolIdentityPolicy, pool_identity_policy

MANAGED_BY = {"app.kubernetes.io/managed-by": "gpu-clusters"}


class PoolIdentityAdmission(pulumi.ComponentResource):
    """The policy refusing a node that labels itself with a pool its IAM role does not belong to, and its binding."""

    def __init__(
        self,
        name: str,
        ctx: ClusterContext,
        pool_role_arns: Mapping[str, pulumi.Input[str]],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpu-clusters:index:PoolIdentityAdmission", name, None, opts)
        pools = sorted(pool_role_arns)
        planned: pulumi.Output[PoolIdentityPolicy] = pulumi.Output.all(*[pool_role_arns[p] for p in pools]).apply(
            lambda arns: pool_identity_policy({pool: [arn] for pool, arn in zip(pools, arns, strict=True)})
        )
        k8s_opts = pulumi.ResourceOptions(provider=ctx.k8s_provider, parent=self, depends_on=list(ctx.kubernetes_ready))
        metadata = k8s.meta.v1.ObjectMetaArgs(name=POLICY_NAME, labels=MANAGED_BY)
        self.policy = k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
            f"{ctx.cluster_name_plain}-pool-identity",
            metadata=metadata,
            spec=cast(Any, planned.apply(lambda p: p.policy["spec"])),
            opts=k8s_opts,
        )
        self.binding = k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
            f"{ctx.cluster_name_plain}-pool-identity",
            metadata=metadata,
            spec=cast(Any, planned.apply(lambda p: p.binding["spec"])),
            opts=pulumi.ResourceOptions.merge(k8s_opts, pulumi.ResourceOptions(depends_on=[self.policy])),
        )
        self.register_outputs({"policy": POLICY_NAME})
