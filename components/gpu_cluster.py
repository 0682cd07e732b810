"""The whole cluster as one component: network, EKS, node pools, storage, add-ons, hybrid nodes.

This module only composes. Every decision is made earlier (config validation, the pure planning functions) or
inside the component that owns it; this file passes a validated spec and the `ClusterContext` along, in the order
AWS needs things to exist.
"""

from __future__ import annotations

from typing import Any

import pulumi

from components import tags
from components.config import StackConfig
from components.planning.pools import PoolPlan, plan_pools


class GpuCluster(pulumi.ComponentResource):
    def __init__(self, name: str, spec: StackConfig, stack: str, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpu-clusters:index:GpuCluster", name, None, opts)
        self.spec = spec
        self.stack = stack
        self.tags = tags.cluster_tags(spec.cluster.name, stack, spec.cluster.tags)
        self.pool_plans: list[PoolPlan] = plan_pools(spec)
        self._exports: dict[str, Any] = {
            "clusterName": spec.cluster.name,
            "region": spec.region,
            "nodePools": [p.name for p in self.pool_plans],
        }
        child = pulumi.ResourceOptions(parent=self)
        del child  # each section below builds its components with `pulumi.ResourceOptions(parent=self)`

        # -- cluster core (issue 3): network, EKS control plane, identities, managed add-ons, Kubernetes provider
        # Imported here so each section's imports stay inside its own hunk.
        import pulumi_aws as aws

        from components import kubernetes_access
        from components.cluster import EksCluster
        from components.context import ClusterContext
        from components.identity import NodeIdentity, PodIdentityRoles
        from components.managed_addons import NODE_AGENT_ADDONS, ManagedAddons
        from components.network import Network

        account_id = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(parent=self)).account_id
        partition = aws.get_partition_output(opts=pulumi.InvokeOutputOptions(parent=self)).partition
        self.network = Network(f"{name}-network", spec, self.tags, opts=pulumi.ResourceOptions(parent=self))
        self.eks = EksCluster(
            f"{name}-eks",
            spec,
            self.network,
            self.tags,
            account_id,
            partition,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.node_identity = NodeIdentity(
            spec.cluster.name, self.eks.name, partition, self.tags, opts=pulumi.ResourceOptions(parent=self)
        )
        kubeconfig = kubernetes_access.kubeconfig(
            spec.cluster.name, self.eks.endpoint, self.eks.certificate_authority, spec.region
        )
        self.context = ClusterContext(
            spec=spec,
            stack=stack,
            tags=self.tags,
            account_id=account_id,
            partition=partition,
            vpc_id=self.network.vpc_id,
            vpc_cidr=self.network.vpc_cidr,
            private_subnet_ids=self.network.private_subnet_ids,
            cluster_name=self.eks.name,
            cluster_arn=self.eks.arn,
            endpoint=self.eks.endpoint,
            certificate_authority=self.eks.certificate_authority,
            cluster_security_group_id=self.eks.cluster_security_group_id,
            node_security_group_id=self.eks.node_security_group_id,
            node_role_arn=self.node_identity.role_arn,
            node_instance_profile_arn=self.node_identity.instance_profile_arn,
            kms_key_arn=self.eks.kms_key.arn,
            k8s_provider=kubernetes_access.kubernetes_provider(
                f"{name}-k8s", kubeconfig, opts=pulumi.ResourceOptions(parent=self)
            ),
            pod_identity_role=PodIdentityRoles(self.eks.name, spec.cluster.name, partition, self.tags),
        )
        # Step 1 of the managed add-ons (CNI, kube-proxy, Pod Identity agent): nodes need them to become Ready.
        # Step 2 (CoreDNS, EBS CSI) waits for the system pool and is built after the node pools:
        #   ManagedAddons(f"{name}-system-addons", self.context, SYSTEM_ADDONS, after=[<system pool>, self.node_agents])
        self.node_agents = ManagedAddons(
            f"{name}-node-agents", self.context, NODE_AGENT_ADDONS, opts=pulumi.ResourceOptions(parent=self)
        )
        secret_kubeconfig: pulumi.Output[str] = pulumi.Output.secret(kubeconfig)
        self._exports.update(
            {
                "kubeconfig": secret_kubeconfig,
                "vpcId": self.network.vpc_id,
                "privateSubnetIds": self.network.private_subnet_ids,
                "clusterArn": self.eks.arn,
                "clusterEndpoint": self.eks.endpoint,
                "clusterSecurityGroupId": self.eks.cluster_security_group_id,
                "nodeSecurityGroupId": self.eks.node_security_group_id,
                "nodeRoleArn": self.node_identity.role_arn,
                "kmsKeyArn": self.eks.kms_key.arn,
            }
        )
        # -- node pools (issue 4): one launch template + ASG per `aws` pool, the system pool included
        from components.node_pool import NodePool

        self.node_pools: dict[str, NodePool] = {
            plan.name: NodePool(f"{name}-{plan.name}", plan, self.context, opts=pulumi.ResourceOptions(parent=self))
            for plan in self.pool_plans
            if plan.kind == "aws"
        }
        # Controllers and charts need somewhere to run: Kubernetes objects wait for the system pool's group, and so
        # does step 2 of the managed add-ons (CoreDNS, EBS CSI), as the cluster core section above plans it.
        system_asgs = [np.asg for np in self.node_pools.values() if np.plan.role == "system"]
        self.context.kubernetes_ready.extend(system_asgs)
        from components.managed_addons import SYSTEM_ADDONS

        self.system_addons = ManagedAddons(
            f"{name}-system-addons",
            self.context,
            SYSTEM_ADDONS,
            after=[*system_asgs, self.node_agents],
            opts=pulumi.ResourceOptions(parent=self),
        )
        self._exports["nodePoolAsgNames"] = {pool: np.asg.name for pool, np in self.node_pools.items()}
        # -- storage (issue 5): FSx for Lustre for training, EFS or an existing NFS server for inference, and claims
        from components.storage import SharedStorage

        self.storage = SharedStorage(
            f"{name}-storage", self.context, self.pool_plans, opts=pulumi.ResourceOptions(parent=self)
        )
        self._exports.update(self.storage.exports())
        # -- add-ons (issue 6): NVIDIA/EFA device plugins, cluster-autoscaler, spot interruption handling,
        # GPU-utilization scaling, monitoring and alerts; each only when switched (or `auto`-resolved) on
        from components.addons import Addons

        self.addons = Addons(
            f"{name}-addons",
            self.context,
            self.pool_plans,
            asg_names={pool: np.asg.name for pool, np in self.node_pools.items()},
            opts=pulumi.ResourceOptions(parent=self),
        )
        self._exports.update(self.addons.exports())
        # -- hybrid nodes (issue 7): role + SSM activation or Roles Anywhere, HYBRID_LINUX access entry, API ingress
        # from the remote networks, Cilium on hybrid nodes, and a secret NodeConfig per pool for `nodeadm init`
        from components.hybrid import HybridNodes

        self.hybrid: HybridNodes | None = None
        if spec.hybrid_pools:
            self.hybrid = HybridNodes(
                f"{name}-hybrid", self.context, self.pool_plans, opts=pulumi.ResourceOptions(parent=self)
            )
            self._exports.update(self.hybrid.exports())

        self.register_outputs({})

    def exports(self) -> dict[str, Any]:
        """Stack outputs: what operators and CI need after `pulumi up` (kubeconfig as a secret)."""
        return dict(self._exports)
