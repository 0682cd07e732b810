"""The whole cluster as one component: network, EKS, node pools, storage, add-ons, hybrid nodes.

This module only composes. Every decision is made earlier (config validation, then
`components.planning.stack_plan.plan_stack`) or inside the component that owns it; this file hands each component
the `ClusterContext` and its slice of the `StackPlan`, in the order AWS needs things to exist.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_aws as aws

from components import kubernetes_access, tags
from components.addons import Addons, MonitoredFileSystems
from components.cluster import EksCluster
from components.context import ClusterContext
from components.flow_logs import VpcFlowLogs
from components.hybrid import HybridNodes
from components.identity import NodeIdentity, PodIdentityRoles
from components.managed_addons import DNS_ADDON, SYSTEM_ADDONS, ManagedAddons, node_agent_addons
from components.namespaces import StackNamespaces
from components.network import Network
from components.node_pool import NodePool
from components.planning.hybrid import remote_network_config
from components.planning.key_domains import stack_key_domains
from components.planning.network_policies import cross_cni_sources
from components.planning.pools import PoolPlan
from components.planning.s3_endpoint import stack_buckets
from components.planning.site_routes import site_cidrs
from components.planning.stack_plan import StackPlan
from components.planning.stateful import stateful_protection
from components.pool_identity import PoolIdentityAdmission
from components.security_groups import lustre_client_group
from components.storage import EfsStorage, SharedStorage
from components.training import TrainingScript
from components.workloads import ServingWorkloads


class GpuCluster(pulumi.ComponentResource):
    def __init__(
        self, name: str, *, stack_plan: StackPlan, stack: str, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-clusters:index:GpuCluster", name, None, opts)
        spec = stack_plan.spec
        self.base_name = name
        self.stack_plan = stack_plan
        self.spec = spec
        self.stack = stack
        self.tags = tags.cluster_tags(spec.cluster.name, stack, spec.cluster.tags)
        self.pool_plans: list[PoolPlan] = stack_plan.pools
        self._exports: dict[str, Any] = {
            "clusterName": spec.cluster.name,
            "region": spec.region,
            "nodePools": [p.name for p in self.pool_plans],
        }
        self._cluster_core()
        self._context()
        self._node_agents()
        self._node_pools()
        self._system_addons()
        self._namespaces()
        self._storage()
        self._addons()
        self._workloads()
        self._training()
        self._hybrid_nodes()
        self._pool_identity()
        self.register_outputs({})

    def exports(self) -> dict[str, Any]:
        """Stack outputs: what operators and CI need after `pulumi up` (kubeconfig as a secret)."""
        return dict(self._exports)

    def _child(self) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions(parent=self)

    def _cluster_core(self) -> None:
        """Network, EKS control plane and node identity: what every later component is attached to."""
        spec, name = self.spec, self.base_name
        self.account_id = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(parent=self)).account_id
        self.partition = aws.get_partition_output(opts=pulumi.InvokeOutputOptions(parent=self)).partition
        self.stateful = stateful_protection(spec.cluster.protect_stateful)
        self.network = Network(
            f"{name}-network",
            spec.network,
            spec.cluster.name,
            spec.region,
            self.tags,
            site_cidrs(spec.network.vpc_cidr, spec.cluster.endpoint.private_access_cidrs, spec.hybrid_pools),
            s3_buckets=stack_buckets(spec),
            opts=self._child(),
        )
        self.eks = EksCluster(
            f"{name}-eks",
            spec.cluster,
            self.network,
            remote_network_config(spec.hybrid_pools),
            self.stateful["kms-key"],
            self.tags,
            self.account_id,
            self.partition,
            spec.region,
            key_domains=stack_key_domains(spec),
            opts=self._child(),
        )
        self.node_identity = NodeIdentity(
            spec.cluster.name,
            [plan.name for plan in self.pool_plans if plan.kind == "aws"],
            self.eks.name,
            self.partition,
            self.tags,
            managed_pools=[plan.name for plan in self.pool_plans if plan.management == "managed"],
            opts=self._child(),
        )
        self.flow_logs: VpcFlowLogs | None = None
        if self.network.vpc is not None and spec.network.flow_logs.enabled:
            self.flow_logs = VpcFlowLogs(
                f"{name}-flow-logs",
                spec.cluster.name,
                self.network.vpc.id,
                spec.network.flow_logs,
                self.eks.key_arn("logs"),
                self.account_id,
                self.partition,
                spec.region,
                self.tags,
                retain_on_delete=self.stateful["kms-key"].retain_on_delete,
                opts=self._child(),
            )

    def _context(self) -> None:
        """The Kubernetes provider and the `ClusterContext`: the only things later components read from the core,
        with the few config values all of them need (names, region, versions, protection)."""
        spec, name = self.spec, self.base_name
        self.kubeconfig = kubernetes_access.kubeconfig(
            spec.cluster.name, self.eks.endpoint, self.eks.certificate_authority, spec.region
        )
        # The Lustre client pools' boot script names the file system, which `_storage` creates after the pools.
        self._lustre_boot_script: tuple[pulumi.Output[str], Any] | None = (
            pulumi.deferred_output() if spec.storage.lustre is not None else None
        )
        self.context = ClusterContext(
            stack=self.stack,
            cluster_name_plain=spec.cluster.name,
            region=spec.region,
            kubernetes_version=spec.cluster.kubernetes_version,
            service_cidr=str(spec.cluster.service_cidr),
            managed_addon_pins=dict(spec.addons.managed.pins),
            stateful=self.stateful,
            tags=self.tags,
            account_id=self.account_id,
            partition=self.partition,
            vpc_id=self.network.vpc_id,
            vpc_cidr=self.network.vpc_cidr,
            zones=list(self.network.zones),
            private_subnet_ids=self.network.private_subnet_ids,
            cluster_name=self.eks.name,
            cluster_arn=self.eks.arn,
            endpoint=self.eks.endpoint,
            certificate_authority=self.eks.certificate_authority,
            cluster_security_group_id=self.eks.cluster_security_group_id,
            node_security_group_id=self.eks.node_security_group_id,
            lustre_client_security_group_id=(
                lustre_client_group(spec.cluster.name, self.network.vpc_id, self.tags, self._child()).id
                if spec.storage.lustre is not None
                else None
            ),
            lustre_boot_script=self._lustre_boot_script[0] if self._lustre_boot_script is not None else None,
            node_role_arns=self.node_identity.role_arns,
            node_instance_profile_arns=self.node_identity.instance_profile_arns,
            kms_key_arn=self.eks.kms_key.arn,
            domain_key_arns={domain: key.arn for domain, key in self.eks.keys.items() if domain != "cluster"},
            autoscaling_role_arn=self.eks.autoscaling_role.arn,
            # Kubernetes objects go through the private endpoint from the site: not before the routes there exist.
            k8s_provider=kubernetes_access.kubernetes_provider(
                f"{name}-k8s",
                self.kubeconfig,
                # And not before the deployer's access entry: without it the API answers Unauthorized.
                opts=pulumi.ResourceOptions(
                    parent=self, depends_on=[*self.network.site_routes, *self.eks.deployer_access]
                ),
            ),
            pod_identity_role=PodIdentityRoles(
                self.eks.name, spec.cluster.name, self.partition, self.tags, self.account_id, self.eks.arn
            ),
        )

    def _node_agents(self) -> None:
        """The managed add-ons nodes need to become Ready (VPC CNI, kube-proxy, Pod Identity agent, the latter with
        its hybrid DaemonSet when there are hybrid pools), and the core's stack outputs."""
        self.node_agents = ManagedAddons(
            f"{self.base_name}-node-agents",
            self.context,
            node_agent_addons(self.stack_plan.pools),
            hybrid_pools=self.stack_plan.hybrid,
            plans=self.stack_plan.pools,
            opts=self._child(),
        )
        secret_kubeconfig: pulumi.Output[str] = pulumi.Output.secret(self.kubeconfig)
        self._exports.update(
            {
                "kubeconfig": secret_kubeconfig,
                "vpcId": self.network.vpc_id,
                "privateSubnetIds": self.network.private_subnet_ids,
                "clusterArn": self.eks.arn,
                "clusterEndpoint": self.eks.endpoint,
                "clusterSecurityGroupId": self.eks.cluster_security_group_id,
                "nodeSecurityGroupId": self.eks.node_security_group_id,
                "nodeRoleArns": self.node_identity.role_arns,
                "kmsKeyArn": self.eks.kms_key.arn,
            }
        )
        if len(self.eks.keys) > 1:
            self._exports["kmsKeyArns"] = {domain: key.arn for domain, key in self.eks.keys.items()}

    def _node_pools(self) -> None:
        """One launch template and Auto Scaling group per `aws` pool, the system pool included."""
        self.node_pools: dict[str, NodePool] = {
            plan.name: NodePool(f"{self.base_name}-{plan.name}", plan, self.context, opts=self._child())
            for plan in self.pool_plans
            if plan.kind == "aws"
        }
        self._exports["nodePoolAsgNames"] = {pool: np.asg_name for pool, np in self.node_pools.items()}

    @property
    def _system_asgs(self) -> list[pulumi.Resource]:
        return [np.group for np in self.node_pools.values() if np.plan.role == "system"]

    def _system_addons(self) -> None:
        """The managed add-ons that run as pods (CoreDNS, EBS CSI): they wait for the system pool and the node
        agents, or EKS reports them degraded.

        Kubernetes objects (charts, claims, CSI add-ons) then wait for CoreDNS. The system pool's Auto Scaling group
        is created without waiting for capacity, so it proves nothing about nodes; an ACTIVE CoreDNS add-on does:
        the provider waits for ACTIVE and treats DEGRADED as still pending, and CoreDNS stays DEGRADED until its
        pods run on a Ready system node (hashicorp/terraform-provider-aws#44669,
        https://github.com/hashicorp/terraform-provider-aws/issues/44669).
        """
        self.system_addons = ManagedAddons(
            f"{self.base_name}-system-addons",
            self.context,
            SYSTEM_ADDONS,
            after=[*self._system_asgs, self.node_agents],
            hybrid_pools=self.stack_plan.hybrid,
            cloud_zones=len(
                {zone for p in self.stack_plan.pools if p.role == "system" for zone in p.availability_zones}
            ),
            opts=self._child(),
        )
        self.context.kubernetes_ready.append(self.system_addons.addons[DNS_ADDON])

    def _namespaces(self) -> None:
        """Every namespace the stack installs into, with its Pod Security labels, the workload namespaces' GPU
        quotas and the NetworkPolicies: before anything lands in one (`ClusterContext.namespace_ready`)."""
        self.namespaces = StackNamespaces(
            f"{self.base_name}-namespaces",
            self.context,
            self.stack_plan.namespaces,
            self.stack_plan.addons,
            cross_cni_sources(self.spec.network, self.stack_plan.pools),
            opts=self._child(),
        )
        self.context.namespaces.update(self.namespaces.namespaces)

    def _storage(self) -> None:
        """FSx for Lustre for training, EFS or an existing NFS server for inference, and their claims."""
        self.storage = SharedStorage(
            f"{self.base_name}-storage", self.context, self.spec.storage, self.pool_plans, opts=self._child()
        )
        if self._lustre_boot_script is not None and self.storage.lustre is not None:
            self._lustre_boot_script[1](self.storage.lustre.boot_script())
        self._exports.update(self.storage.exports())

    def _addons(self) -> None:
        """Device plugins, cluster-autoscaler, spot interruption handling, KEDA, monitoring and alerts; each only
        when switched (or `auto`-resolved) on."""
        self.addons = Addons(
            f"{self.base_name}-addons",
            context=self.context,
            stack_plan=self.stack_plan,
            asg_names={pool: np.asg_name for pool, np in self.node_pools.items()},
            file_systems=MonitoredFileSystems(
                lustre=self.storage.lustre.file_system_id if self.storage.lustre is not None else None,
                efs=self.storage.nfs.file_system_id if isinstance(self.storage.nfs, EfsStorage) else None,
            ),
            opts=self._child(),
        )
        self._exports.update(self.addons.exports())

    def _workloads(self) -> None:
        """The serving example: each `workloads.serving` entry with its autoscaler (after storage and add-ons)."""
        if not self.spec.workloads.serving:
            return
        self.workloads = ServingWorkloads(
            f"{self.base_name}-serving",
            context=self.context,
            stack_plan=self.stack_plan,
            storage=self.storage,
            addons=self.addons,
            opts=self._child(),
        )
        self._exports.update(self.workloads.exports())

    def _training(self) -> None:
        """The reference training job's script as a ConfigMap in its namespace, and its PodMonitor on the Prometheus
        path; the job itself is printed by `blueprint training-job` for the user to submit, never started by the
        stack."""
        self.training: TrainingScript | None = None
        if self.stack_plan.training is not None:
            monitoring = self.addons.monitoring
            self.training = TrainingScript(
                f"{self.base_name}-training",
                context=self.context,
                plan=self.stack_plan.training,
                prometheus=monitoring.prometheus if monitoring is not None else None,
                opts=self._child(),
            )

    def _hybrid_nodes(self) -> None:
        """For hybrid pools only: the role and SSM activation or Roles Anywhere, the HYBRID_LINUX access entry, API
        ingress from the remote networks, Cilium, and a secret NodeConfig per pool for `nodeadm init`."""
        self.hybrid: HybridNodes | None = None
        if self.spec.hybrid_pools:
            self.hybrid = HybridNodes(
                f"{self.base_name}-hybrid", self.context, self.stack_plan.hybrid, opts=self._child()
            )
            self._exports.update(self.hybrid.exports())

    def _pool_identity(self) -> None:
        """The admission policy holding each node's pool label to its pool's IAM role: every pool, EC2 and hybrid,
        has a role of its own (docs/security.md, "Tenants")."""
        roles: dict[str, pulumi.Output[str]] = dict(self.node_identity.role_arns)
        if self.hybrid is not None:
            roles.update({pool: hybrid.role.arn for pool, hybrid in self.hybrid.pools.items()})
        self.pool_identity = PoolIdentityAdmission(
            f"{self.base_name}-pool-identity", self.context, roles, opts=self._child()
        )
