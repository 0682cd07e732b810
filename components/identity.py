"""IAM identities of the cluster: one node role per `aws` pool, and one Pod Identity role per controller.

Nodes: each `aws` node pool gets its own IAM role and instance profile, with the same managed policies (what an EKS
node needs) and an `EC2_LINUX` access entry, so nodes authenticate to the API without the deprecated `aws-auth`
ConfigMap (the cluster runs authentication mode `API`). Pools differ in hardware, not in what the node itself may
call; the role is per pool so the API server knows a node's pool from its credentials, which the node cannot forge:
the pool-identity admission policy (`components.planning.pool_identity`) holds each node's pool label to it.

Controllers (EBS CSI driver, cluster-autoscaler, node termination handler, ...): each gets its own role through
EKS Pod Identity, never the node role. `PodIdentityRoles` is the one helper that builds them; its trust policy is
scoped to the cluster, namespace and service account through the session tags Pod Identity sets, so a role cannot
be borrowed by another service account or cluster in the account.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import pulumi
import pulumi_aws as aws

from components.planning.management import node_role_suffix
from components.planning.trust_policies import EC2_SERVICE, pod_identity_trust_policy, service_trust_policy
from components.tags import POOL as POOL_TAG

#: Managed policies of the node role (EKS user guide, "Amazon EKS node IAM role",
#: https://docs.aws.amazon.com/eks/latest/userguide/create-node-role.html): worker node (DescribeCluster,
#: eks-auth:AssumeRoleForPodIdentity), ECR pull-only (images); not the VPC CNI's `AmazonEKS_CNI_Policy`, which the
#: `aws-node` service account gets through Pod Identity (`components.managed_addons`), so a pod that reads the
#: node's credentials cannot change the account's network interfaces; and the SSM agent's
#: minimum, so nodes can be reached with Session Manager instead of SSH keys and open ports. That minimum is
#: `AmazonSSMManagedEC2InstanceDefaultPolicy` (the policy of Systems Manager's Default Host Management Configuration:
#: the agent's core calls, `ssmmessages` and `ec2messages`,
#: https://docs.aws.amazon.com/aws-managed-policy/latest/reference/AmazonSSMManagedEC2InstanceDefaultPolicy.html),
#: not `AmazonSSMManagedInstanceCore`, which also grants `ssm:GetParameter*` on every parameter of the account
#: (https://docs.aws.amazon.com/aws-managed-policy/latest/reference/AmazonSSMManagedInstanceCore.html).
NODE_SSM_POLICY = "AmazonSSMManagedEC2InstanceDefaultPolicy"
NODE_MANAGED_POLICIES: tuple[str, ...] = (
    "AmazonEKSWorkerNodePolicy",
    "AmazonEC2ContainerRegistryPullOnly",
    NODE_SSM_POLICY,
)
#: Access entry type for EC2 Linux nodes; EKS maps it to `system:node:{{EC2PrivateDNSName}}` in `system:nodes`
#: (aws-gpu-facts.md §5e, [BC] + [EKSUG] grant-k8s-access).
NODE_ACCESS_ENTRY_TYPE = "EC2_LINUX"


def aws_managed_policy_arn(partition: pulumi.Input[str], policy: str) -> pulumi.Output[str]:
    """`AmazonEKSWorkerNodePolicy` or `service-role/AmazonEBSCSIDriverPolicy` -> its ARN in the partition."""
    return pulumi.Output.concat("arn:", partition, ":iam::aws:policy/", policy)


class NodeIdentity(pulumi.ComponentResource):
    """One node role, instance profile and `EC2_LINUX` access entry per `aws` pool, keyed by pool name.

    `role_arns[pool]` and `instance_profile_arns[pool]` resolve only once that pool's access entry exists: a launch
    template that reads them therefore waits for the entry, and nodes never boot into a cluster that rejects them.
    `managed_pools` get no entry: EKS creates the access entry of a managed node group's role itself, and a role can
    be in only one access entry, so a second one from the stack would fail (EKS user guide, "Create access
    entries": "It's unnecessary to create an access entry for an IAM role that's used for a managed node group";
    "An IAM principal can't be included in more than one access entry"). So a managed pool's role has its own name
    (`<pool>-managed-node`): a pool that changes kind replaces its role with the node group or Auto Scaling group,
    and no role ever passes between the stack's entry and EKS's.
    """

    def __init__(
        self,
        name: str,
        pools: Sequence[str],
        cluster_name: pulumi.Input[str],
        partition: pulumi.Input[str],
        tags: Mapping[str, str],
        managed_pools: Sequence[str] = (),
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpu-clusters:index:NodeIdentity", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.roles: dict[str, aws.iam.Role] = {}
        self.instance_profiles: dict[str, aws.iam.InstanceProfile] = {}
        self.access_entries: dict[str, aws.eks.AccessEntry] = {}
        self.role_arns: dict[str, pulumi.Output[str]] = {}
        self.instance_profile_arns: dict[str, pulumi.Output[str]] = {}
        policy_arns = {policy: aws_managed_policy_arn(partition, policy) for policy in NODE_MANAGED_POLICIES}
        for pool in pools:
            # one role per management kind: a pool that changes kind gets a new role and access entry together
            prefix = f"{name}-{pool}-{node_role_suffix('managed' if pool in managed_pools else 'self-managed')}"
            pool_tags = {**tags, POOL_TAG: pool}
            role = aws.iam.Role(
                prefix,
                assume_role_policy=json.dumps(service_trust_policy(EC2_SERVICE)),
                description=f"EKS nodes of pool {pool} in cluster {name}",
                tags=pool_tags,
                opts=child,
            )
            attachments = [
                aws.iam.RolePolicyAttachment(
                    f"{prefix}-{policy}",
                    role=role.name,
                    policy_arn=policy_arns[policy],
                    opts=child,
                )
                for policy in NODE_MANAGED_POLICIES
            ]
            profile = aws.iam.InstanceProfile(prefix, role=role.name, tags=pool_tags, opts=child)
            waits: list[pulumi.Output[str]] = [a.id for a in attachments]
            if pool not in managed_pools:
                entry = aws.eks.AccessEntry(
                    prefix,
                    cluster_name=cluster_name,
                    principal_arn=role.arn,
                    type=NODE_ACCESS_ENTRY_TYPE,
                    tags=pool_tags,
                    opts=child,
                )
                self.access_entries[pool] = entry
                waits.append(entry.access_entry_arn)
            ready = pulumi.Output.all(*waits)
            self.roles[pool], self.instance_profiles[pool] = role, profile
            self.role_arns[pool] = pulumi.Output.all(role.arn, ready).apply(lambda v: v[0])
            self.instance_profile_arns[pool] = pulumi.Output.all(profile.arn, ready).apply(lambda v: v[0])
        self.register_outputs({"roleArns": {pool: role.arn for pool, role in self.roles.items()}})


class PodIdentityRoles:
    """Builds least-privilege IAM roles for Kubernetes service accounts through EKS Pod Identity.

    Called as `ClusterContext.pod_identity_role(name, namespace, service_account, policy_json,
    managed_policy_arns, parent)`. Each call registers, parented to `parent`:
      * an IAM role trusting `pods.eks.amazonaws.com` (`sts:AssumeRole` + `sts:TagSession`) for exactly this
        cluster (name and ARN), namespace and service account, for this account only;
      * the inline policy `policy_json` when given, and one attachment per managed policy. A managed policy is
        given as a full ARN or as an AWS managed policy path (`service-role/AmazonEBSCSIDriverPolicy`), which is
        qualified with the stack's partition;
      * the `aws.eks.PodIdentityAssociation` that binds the role to the service account.

    Pods receive Pod Identity credentials only if the association exists when they start: a workload should wait
    for the association (`associations[name]`) or for `ClusterContext.kubernetes_ready`, which comes later anyway.
    """

    def __init__(
        self,
        cluster_name: pulumi.Input[str],
        cluster_name_plain: str,
        partition: pulumi.Input[str],
        tags: Mapping[str, str],
        account_id: pulumi.Input[str],
        cluster_arn: pulumi.Input[str],
    ) -> None:
        self.cluster_name = cluster_name
        self.account_id = account_id
        self.cluster_arn = cluster_arn
        self.cluster_name_plain = cluster_name_plain
        self.partition = partition
        self.tags = dict(tags)
        self.roles: dict[str, aws.iam.Role] = {}
        self.associations: dict[str, aws.eks.PodIdentityAssociation] = {}

    def __call__(
        self,
        name: str,
        namespace: str,
        service_account: str,
        policy_json: pulumi.Input[str] | None,
        managed_policy_arns: Sequence[str],
        parent: pulumi.Resource,
    ) -> aws.iam.Role:
        if name in self.roles:
            raise ValueError(f"a Pod Identity role named {name!r} already exists in this cluster")
        child = pulumi.ResourceOptions(parent=parent)
        prefix = f"{self.cluster_name_plain}-{name}"
        role = aws.iam.Role(
            prefix,
            assume_role_policy=pulumi.Output.all(self.account_id, self.cluster_arn).apply(
                lambda v: json.dumps(
                    pod_identity_trust_policy(self.cluster_name_plain, namespace, service_account, v[0], v[1])
                )
            ),
            description=f"Pod Identity role of {namespace}/{service_account} in cluster {self.cluster_name_plain}",
            tags={**self.tags, "kubernetes-namespace": namespace, "kubernetes-service-account": service_account},
            opts=child,
        )
        if policy_json is not None:
            aws.iam.RolePolicy(prefix, role=role.id, policy=policy_json, opts=child)
        for policy in managed_policy_arns:
            arn: pulumi.Input[str] = (
                policy if policy.startswith("arn:") else aws_managed_policy_arn(self.partition, policy)
            )
            aws.iam.RolePolicyAttachment(
                f"{prefix}-{policy.rsplit('/', 1)[-1]}", role=role.name, policy_arn=arn, opts=child
            )
        self.associations[name] = aws.eks.PodIdentityAssociation(
            prefix,
            cluster_name=self.cluster_name,
            namespace=namespace,
            service_account=service_account,
            role_arn=role.arn,
            tags=dict(self.tags),
            opts=child,
        )
        self.roles[name] = role
        return role
