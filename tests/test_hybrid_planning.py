"""Pure hybrid-node planning: remote networks, IAM documents, activation sizing, Cilium values, the NodeConfig."""

from __future__ import annotations

import fnmatch
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
import yaml

from components.config import StackConfig, Taint
from components.errors import ConfigError
from components.managed_addons import addon_configuration
from components.planning import hybrid
from components.planning.pools import STARTUP_TAINT
from components.planning.stack_plan import plan_pools
from components.planning.tolerations import tolerates
from tests.builders import stack_config
from tests.test_hybrid_join import CLUSTER as CLUSTER_DETAILS

CLUSTER_ARN = "arn:aws:eks:us-east-1:123456789012:cluster/gpu"
A40_POOL: dict[str, Any] = {
    "name": "a40",
    "kind": "hybrid",
    "role": "inference",
    "gpuModel": "A40",
    "gpusPerNode": 4,
    "nodes": 2,
    "labels": {"site": "fra1"},
    "network": {"remoteNodeCidrs": ["10.80.0.0/16"], "remotePodCidrs": ["10.85.0.0/16"]},
}


def stack(*pools: dict[str, Any], version: str = "1.35") -> StackConfig:
    return stack_config(
        *pools, name="gpu", cluster={"kubernetesVersion": version}, network={"vpcCidr": "10.0.0.0/16"}, validated=True
    )


def pool(**changes: Any) -> dict[str, Any]:
    return {**A40_POOL, **changes}


# ------------------------------------------------------------------------------------------- remote networks
def test_remote_network_config_is_one_node_and_one_pod_network_object() -> None:
    spec = stack(
        pool(),
        pool(
            name="l40s",
            gpuModel="L40S",
            network={"remoteNodeCidrs": ["192.168.10.0/24"], "remotePodCidrs": ["192.168.64.0/20"]},
        ),
    )
    assert hybrid.remote_network_config(spec.hybrid_pools) == {
        "remoteNodeNetworks": {"cidrs": ["10.80.0.0/16", "192.168.10.0/24"]},
        "remotePodNetworks": {"cidrs": ["10.85.0.0/16", "192.168.64.0/20"]},
    }


def test_a_hybrid_pool_without_pod_cidrs_is_refused_even_without_webhooks() -> None:
    """Cilium's pool is the remote pod CIDRs whether or not webhooks run on-prem (hybrid-nodes-cni)."""
    with pytest.raises(ConfigError) as raised:
        stack(pool(network={"remoteNodeCidrs": ["10.80.0.0/16"], "webhooksOnHybridNodes": False}))
    (problem,) = raised.value.problems
    assert problem.path == "nodePools[0] (a40).network.remotePodCidrs"
    assert "Cilium" in problem.message


def test_cilium_refuses_an_empty_pod_cidr_pool() -> None:
    """Built without validation, a pool with no pod CIDRs would leave Cilium its chart default 10.0.0.0/8."""
    spec = stack_config(
        pool(network={"remoteNodeCidrs": ["10.80.0.0/16"]}),
        name="gpu",
        cluster={"kubernetesVersion": "1.35"},
        network={"vpcCidr": "10.0.0.0/16"},
    )
    with pytest.raises(ValueError, match="pod CIDR pool would be empty"):
        hybrid.cilium_values(plan_pools(spec))


def test_no_hybrid_pool_means_no_remote_network_config() -> None:
    assert hybrid.remote_network_config(stack().hybrid_pools) is None


def test_cilium_node_blocks_count_slash_25s() -> None:
    assert hybrid.cilium_node_blocks(["10.85.0.0/16"]) == 512
    assert hybrid.cilium_node_blocks(["10.85.0.0/24", "10.86.0.0/25"]) == 3
    assert hybrid.cilium_node_blocks(["10.85.0.0/26"]) == 0


# ----------------------------------------------------------------------------------------------- activation
def test_registration_limit_is_the_configured_one_when_set() -> None:
    spec = stack(
        pool(),
        pool(
            name="spare",
            network={"remoteNodeCidrs": ["10.90.0.0/16"], "remotePodCidrs": ["10.95.0.0/16"]},
            credentials={"activationLimit": 5},
        ),
    )
    assert hybrid.registration_limit(spec.pool("spare")) == 5


def test_activation_expiry_is_rfc3339_utc_hours_ahead() -> None:
    now = datetime(2026, 10, 1, 8, 30, tzinfo=timezone(timedelta(hours=2)))
    assert hybrid.activation_expiry(now, 24) == "2026-10-02T06:30:00Z"
    assert hybrid.activation_expiry(datetime(2026, 10, 1, tzinfo=UTC), 720) == "2026-10-31T00:00:00Z"


def test_activation_expiry_rejects_naive_time() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        hybrid.activation_expiry(datetime(2026, 10, 1), 24)


# ------------------------------------------------------------------------------------------------------ IAM
def test_managed_policies_per_provider() -> None:
    assert hybrid.managed_policy_names("ssm") == ("AmazonSSMManagedInstanceCore", "AmazonEC2ContainerRegistryPullOnly")
    assert hybrid.managed_policy_names("iam-roles-anywhere") == ("AmazonEC2ContainerRegistryPullOnly",)


def test_ssm_trust_is_limited_to_this_accounts_ssm() -> None:
    (statement,) = hybrid.ssm_trust_policy("123456789012", "us-east-1")["Statement"]
    assert statement["Principal"] == {"Service": "ssm.amazonaws.com"}
    assert statement["Action"] == "sts:AssumeRole"
    assert statement["Condition"] == {
        "StringEquals": {"aws:SourceAccount": "123456789012"},
        "ArnEquals": {"aws:SourceArn": "arn:aws:ssm:us-east-1:123456789012:*"},
    }


def test_roles_anywhere_trust_binds_session_name_to_certificate_cn_and_anchor() -> None:
    anchor = "arn:aws:rolesanywhere:us-east-1:123456789012:trust-anchor/abc"
    statements = hybrid.roles_anywhere_trust_policy(anchor)["Statement"]
    assert {s["Principal"]["Service"] for s in statements} == {"rolesanywhere.amazonaws.com"}
    assert all(s["Condition"]["ArnEquals"] == {"aws:SourceArn": anchor} for s in statements)
    tagging = next(s for s in statements if s["Action"] != "sts:AssumeRole")
    assert sorted(tagging["Action"]) == ["sts:SetSourceIdentity", "sts:TagSession"]
    assume = next(s for s in statements if s["Action"] == "sts:AssumeRole")
    assert assume["Condition"]["StringEquals"] == {"sts:RoleSessionName": "${aws:PrincipalTag/x509Subject/CN}"}


def _actions(policy: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found = {}
    for statement in policy["Statement"]:
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        for action in actions:
            found[action] = statement
    return found


def test_node_policy_scopes_eks_actions_to_the_cluster() -> None:
    actions = _actions(hybrid.hybrid_node_policy(CLUSTER_ARN, "iam-roles-anywhere"))
    assert actions["eks:DescribeCluster"]["Resource"] == CLUSTER_ARN
    assert actions["eks:ListAccessEntries"]["Resource"] == CLUSTER_ARN
    assert actions["eks-auth:AssumeRoleForPodIdentity"]["Resource"] == CLUSTER_ARN
    assert not any(action.startswith("ssm:") for action in actions)


def test_ssm_node_policy_deregisters_only_this_clusters_instances() -> None:
    actions = _actions(hybrid.hybrid_node_policy(CLUSTER_ARN, "ssm"))
    deregister = actions["ssm:DeregisterManagedInstance"]
    assert deregister["Condition"] == {"StringEquals": {"ssm:resourceTag/EKSClusterARN": CLUSTER_ARN}}
    # nodeadm uninstall looks its instance up first; Describe* takes no resource-level scoping
    assert actions["ssm:DescribeInstanceInformation"]["Resource"] == "*"


def test_ssm_node_policy_denies_every_parameter_store_read() -> None:
    """AmazonSSMManagedInstanceCore allows ssm:GetParameter(s) on "*"; the inline policy's explicit deny wins over
    it for every parameter, and nothing in the inline policy allows a read back."""
    policy = hybrid.hybrid_node_policy(CLUSTER_ARN, "ssm")
    denies = [s for s in policy["Statement"] if s["Effect"] == "Deny"]
    assert denies == [
        {"Sid": "NoParameterStoreReads", "Effect": "Deny", "Action": "ssm:GetParameter*", "Resource": "*"}
    ]
    allowed = {a for s in policy["Statement"] if s["Effect"] == "Allow" for a in _actions({"Statement": [s]})}
    assert not any(fnmatch.fnmatchcase(action, "ssm:GetParameter*") for action in allowed)
    for action in ("ssm:GetParameter", "ssm:GetParameters", "ssm:GetParametersByPath", "ssm:GetParameterHistory"):
        assert fnmatch.fnmatchcase(action, denies[0]["Action"])


def test_roles_anywhere_role_has_no_ssm_policy_to_deny() -> None:
    assert "ssm:GetParameter*" not in _actions(hybrid.hybrid_node_policy(CLUSTER_ARN, "iam-roles-anywhere"))
    assert hybrid.SSM_CORE_POLICY not in hybrid.managed_policy_names("iam-roles-anywhere")


# ----------------------------------------------------------------------------------------------------- Cilium
HYBRID_ONLY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "eks.amazonaws.com/compute-type", "operator": "In", "values": ["hybrid"]}
                    ]
                }
            ]
        }
    }
}


def test_cilium_runs_on_hybrid_nodes_only() -> None:
    values = hybrid.cilium_values(plan_pools(stack(pool())))
    assert values["affinity"] == HYBRID_ONLY
    assert values["operator"]["affinity"] == HYBRID_ONLY


def test_cilium_ipam_uses_every_remote_pod_cidr() -> None:
    spec = stack(
        pool(),
        pool(
            name="l40s",
            gpuModel="L40S",
            network={"remoteNodeCidrs": ["192.168.10.0/24"], "remotePodCidrs": ["192.168.64.0/20"]},
        ),
    )
    values = hybrid.cilium_values(plan_pools(spec))
    assert values["ipam"] == {
        "mode": "cluster-pool",
        "operator": {"clusterPoolIPv4PodCIDRList": ["10.85.0.0/16", "192.168.64.0/20"], "clusterPoolIPv4MaskSize": 25},
    }
    assert values["ipam"]["operator"]["clusterPoolIPv4PodCIDRList"] == hybrid.remote_pod_cidrs(spec.hybrid_pools)


def test_cilium_values_aws_lists_for_hybrid_nodes() -> None:
    values = hybrid.cilium_values(plan_pools(stack(pool())))
    assert values["operator"]["unmanagedPodWatcher"] == {"restart": False}
    assert values["envoy"] == {"enabled": False}
    assert values["kubeProxyReplacement"] == "false"
    assert values["loadBalancer"] == {"serviceTopology": True}


def test_cilium_tolerates_the_gpu_pool_taints() -> None:
    spec = stack(
        pool(
            taints=[{"key": "nvidia.com/gpu", "value": "true"}, {"key": "site", "value": "fra1", "effect": "NoExecute"}]
        )
    )
    (plan,) = [p for p in plan_pools(spec) if p.kind == "hybrid"]
    values = hybrid.cilium_values(plan_pools(spec))
    for taint in plan.taints:
        assert tolerates(values["tolerations"], taint)
        assert tolerates(values["operator"]["tolerations"], taint)
    not_ready = Taint(key="node.kubernetes.io/not-ready", effect="NoSchedule")
    assert tolerates(values["operator"]["tolerations"], not_ready)
    # the operator is not a catch-all: a taint of no hybrid pool keeps it away (draining works)
    assert not tolerates(values["operator"]["tolerations"], Taint(key="maintenance", value="true"))


def test_default_gpu_taint_is_tolerated_by_the_operator() -> None:
    (plan,) = [p for p in plan_pools(stack(pool())) if p.kind == "hybrid"]
    assert [t.render() for t in plan.taints] == ["nvidia.com/gpu=true:NoSchedule"]
    assert tolerates(hybrid.cilium_values([plan])["operator"]["tolerations"], plan.taints[0])


def test_tolerates_follows_kubernetes_matching() -> None:
    taint = Taint(key="nvidia.com/gpu", value="true", effect="NoSchedule")
    assert tolerates([{"operator": "Exists"}], taint)
    assert tolerates([{"key": "nvidia.com/gpu", "operator": "Exists"}], taint)
    assert not tolerates([{"key": "nvidia.com/gpu", "operator": "Equal", "value": "false"}], taint)
    assert not tolerates([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}], taint)


# ------------------------------------------------------------------------------------------------- NodeConfig
def test_ssm_node_config_parses_back_with_credentials_and_kubelet_flags() -> None:
    (plan,) = [p for p in plan_pools(stack(pool())) if p.kind == "hybrid"]
    text = hybrid.render_node_config(
        hybrid.hybrid_node_config(
            "gpu", "us-east-1", CLUSTER_DETAILS, hybrid.SsmActivation("act-123", "code-xyz"), plan
        )
    )
    doc = yaml.safe_load(text)
    assert doc["apiVersion"] == "node.eks.aws/v1alpha1"
    assert doc["kind"] == "NodeConfig"
    assert doc["spec"]["cluster"] == {"name": "gpu", "region": "us-east-1", **CLUSTER_DETAILS.render()}
    assert doc["spec"]["hybrid"] == {
        "ssm": {"activationCode": "code-xyz", "activationId": "act-123"},
        "enableCredentialsFile": True,
    }
    flags = doc["spec"]["kubelet"]["flags"]
    (labels_flag,) = [f for f in flags if f.startswith("--node-labels=")]
    labels = dict(item.split("=", 1) for item in labels_flag.removeprefix("--node-labels=").split(","))
    assert labels["nvidia.com/gpu.present"] == "true"
    assert labels["gpu-clusters/pool"] == "a40"
    assert labels["gpu-clusters/gpu-model"] == "A40"
    assert labels["site"] == "fra1"
    # the health gate's startup taint too: on-prem servers pass the same check before they take work
    assert f"--register-with-taints=nvidia.com/gpu=true:NoSchedule,{STARTUP_TAINT.render()}" in flags


def test_roles_anywhere_node_config_names_the_arns_and_certificate_paths() -> None:
    (plan,) = [p for p in plan_pools(stack(pool())) if p.kind == "hybrid"]
    creds = hybrid.RolesAnywhere("arn:ta", "arn:profile", "arn:role")
    doc = yaml.safe_load(
        hybrid.render_node_config(hybrid.hybrid_node_config("gpu", "us-east-1", CLUSTER_DETAILS, creds, plan))
    )
    assert doc["spec"]["hybrid"] == {
        "iamRolesAnywhere": {
            "nodeName": hybrid.ROLES_ANYWHERE_NODE_NAME_PLACEHOLDER,
            "trustAnchorArn": "arn:ta",
            "profileArn": "arn:profile",
            "roleArn": "arn:role",
            "certificatePath": "/etc/iam/pki/server.pem",
            "privateKeyPath": "/etc/iam/pki/server.key",
        },
        "enableCredentialsFile": True,
    }


def test_pod_identity_works_on_hybrid_nodes_as_aws_documents() -> None:
    """EKS user guide, hybrid-nodes-add-ons.html: nodeadm writes the credentials file (`enableCredentialsFile`, in
    every NodeConfig above) and the agent add-on runs its hybrid DaemonSet, which reads it; a cluster without
    hybrid pools keeps the add-on's defaults."""
    hybrid_pools = hybrid.hybrid_plans(plan_pools(stack(pool())))
    assert hybrid_pools
    assert addon_configuration("eks-pod-identity-agent", hybrid_pools) == {"daemonsets": {"hybrid": {"create": True}}}
    assert addon_configuration("eks-pod-identity-agent", ()) is None


@pytest.mark.parametrize(("provider", "flag"), [("ssm", "ssm"), ("iam-roles-anywhere", "iam-ra")])
def test_nodeadm_install_command(provider: hybrid.Provider, flag: str) -> None:
    assert (
        hybrid.nodeadm_install_command("1.34", provider, "eu-west-1")
        == f"nodeadm install 1.34 --credential-provider {flag} --region eu-west-1"
    )


# ------------------------------------------------------------------------------ AWS security group rules
def planned_rules(**changes: Any) -> list[hybrid.NetworkRule]:
    (plan,) = hybrid.hybrid_plans(plan_pools(stack(pool(**changes))))
    return hybrid.network_rules(plan.pool)


def test_kubelet_rule_is_cluster_group_egress_10250_to_each_node_cidr() -> None:
    (rule,) = [r for r in planned_rules() if r.name == "kubelet-to-nodes"]
    assert (rule.group, rule.direction, rule.protocol) == ("cluster", "egress", "tcp")
    assert (rule.from_port, rule.to_port, rule.cidr) == (10250, 10250, "10.80.0.0/16")


def test_webhook_rules_are_cluster_group_egress_to_each_pod_cidr() -> None:
    rules = [r for r in planned_rules() if r.name.startswith("webhooks-to-pods")]
    assert {(r.group, r.direction, r.protocol, r.cidr) for r in rules} == {("cluster", "egress", "tcp", "10.85.0.0/16")}
    assert sorted((r.from_port, r.to_port) for r in rules) == [(443, 443), (1025, 65535)]


def test_no_webhook_rules_when_no_webhooks_run_on_hybrid_nodes() -> None:
    network = {**A40_POOL["network"], "webhooksOnHybridNodes": False}
    assert not [r for r in planned_rules(network=network) if r.name.startswith("webhooks")]


@pytest.mark.parametrize("protocol", ["udp", "tcp"])
@pytest.mark.parametrize(("kind", "cidr"), [("nodes", "10.80.0.0/16"), ("pods", "10.85.0.0/16")])
def test_dns_rule_is_node_group_ingress_53_from_remote_nodes_and_pods(protocol: str, kind: str, cidr: str) -> None:
    (rule,) = [r for r in planned_rules() if r.name == f"dns-{protocol}-from-{kind}"]
    assert (rule.group, rule.direction, rule.protocol) == ("node", "ingress", protocol)
    assert (rule.from_port, rule.to_port, rule.cidr) == (53, 53, cidr)


def test_rule_names_are_unique_per_pool_and_cidr() -> None:
    rules = planned_rules()
    assert len({(r.name, r.cidr) for r in rules}) == len(rules) == 7


# ------------------------------------------------------------------------------------------- Cilium BGP
BGP = {"peerAddress": "10.80.0.1", "peerAsn": 65000, "localAsn": 65010}


def test_without_bgp_cilium_has_no_bgp_control_plane_and_nothing_to_apply() -> None:
    plans = plan_pools(stack(pool()))
    assert "bgpControlPlane" not in hybrid.cilium_values(plans)
    assert hybrid.cilium_bgp_manifests(plans) == []


def test_bgp_enables_cilium_bgp_control_plane_and_rolls_the_operator() -> None:
    values = hybrid.cilium_values(plan_pools(stack(pool(network={**A40_POOL["network"], "bgp": BGP}))))
    assert values["bgpControlPlane"] == {"enabled": True}
    assert values["operator"]["rollOutPods"] is True


def test_bgp_objects_peer_each_pool_with_its_router_and_advertise_pod_cidrs() -> None:
    l40s = pool(
        name="l40s",
        network={
            "remoteNodeCidrs": ["192.168.10.0/24"],
            "remotePodCidrs": ["192.168.64.0/20"],
            "bgp": {"peerAddress": "192.168.10.1", "peerAsn": 65100, "localAsn": 65110},
        },
    )
    docs = hybrid.cilium_bgp_manifests(plan_pools(stack(pool(network={**A40_POOL["network"], "bgp": BGP}), l40s)))
    assert {d["apiVersion"] for d in docs} == {"cilium.io/v2alpha1"}
    clusters = [d for d in docs if d["kind"] == "CiliumBGPClusterConfig"]
    assert [c["spec"]["nodeSelector"] for c in clusters] == [
        {"matchLabels": {"gpu-clusters/pool": "a40"}},
        {"matchLabels": {"gpu-clusters/pool": "l40s"}},
    ]
    (a40,) = clusters[0]["spec"]["bgpInstances"]
    assert a40["localASN"] == 65010
    assert a40["peers"] == [
        {"name": "a40-router", "peerASN": 65000, "peerAddress": "10.80.0.1", "peerConfigRef": {"name": "cilium-peer"}}
    ]
    (peer,) = [d for d in docs if d["kind"] == "CiliumBGPPeerConfig"]
    (advertisement,) = [d for d in docs if d["kind"] == "CiliumBGPAdvertisement"]
    (family,) = peer["spec"]["families"]
    assert family["advertisements"]["matchLabels"] == advertisement["metadata"]["labels"]
    assert advertisement["spec"]["advertisements"] == [{"advertisementType": "PodCIDR"}]
    assert list(yaml.safe_load_all(hybrid.render_manifests(docs))) == docs


@pytest.mark.parametrize(
    ("bgp", "key"),
    [
        ({**BGP, "peerAsn": 0}, "peerAsn"),
        ({**BGP, "localAsn": 4_294_967_296}, "localAsn"),
        ({**BGP, "peerAddress": "10.80.0.0/24"}, "peerAddress"),
    ],
)
def test_bgp_settings_are_checked(bgp: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as raised:
        stack(pool(network={**A40_POOL["network"], "bgp": bgp}))
    assert any(problem.path.endswith(f"network.bgp.{key}") for problem in raised.value.problems)


def test_registration_limit_leaves_spares_beyond_the_node_count() -> None:
    # Equal to the node count, a replacement server could not join until the activation is re-issued.
    spec = stack(
        pool(),
        pool(
            name="spare",
            network={"remoteNodeCidrs": ["10.90.0.0/16"], "remotePodCidrs": ["10.95.0.0/16"]},
            credentials={"spareRegistrations": 0},
        ),
    )
    a40 = spec.pool("a40")
    assert a40.nodes is not None
    assert hybrid.registration_limit(a40) == a40.nodes + a40.credentials.spare_registrations
    assert hybrid.registration_limit(a40) > a40.nodes
    assert hybrid.registration_limit(spec.pool("spare")) == spec.pool("spare").nodes


def test_activation_revision_renames_the_activation_from_revision_two() -> None:
    spec = stack(
        pool(),
        pool(
            name="spare",
            network={"remoteNodeCidrs": ["10.90.0.0/16"], "remotePodCidrs": ["10.95.0.0/16"]},
            credentials={"activationRevision": 3},
        ),
    )
    assert hybrid.activation_name("gpu-a40", spec.pool("a40")) == "gpu-a40"  # revision 1: the name stacks have
    assert hybrid.activation_name("gpu-spare", spec.pool("spare")) == "gpu-spare-r3"
