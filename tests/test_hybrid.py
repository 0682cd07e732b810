"""The HybridNodes component under Pulumi mocks: what it registers for the 4xA40 pool, and what it exports."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml

from blueprint.plan.mocks import FAKE_CA
from blueprint.plan.runner import ProgramRun
from components import tags
from components.catalog import versions
from components.config import StackConfig, Taint
from components.context import ClusterContext
from components.errors import ConfigError
from components.hybrid import HybridNodes
from components.managed_addons import addon_configuration
from components.planning.hybrid import ROLES_ANYWHERE_NODE_NAME_PLACEHOLDER, ROLES_ANYWHERE_SESSION_SECONDS
from components.planning.pools import STARTUP_TAINT
from components.planning.stack_plan import plan_pools
from components.planning.tolerations import tolerates
from tests.builders import (
    ACCESS_ENTRY,
    EKS_ADDON,
    EKS_CLUSTER,
    HELM_RELEASE,
    IAM_ROLE,
    ROLE_POLICY,
    ROLE_POLICY_ATTACHMENT,
    SG_INGRESS_RULE,
    SYSTEM,
    ShippedStack,
    run_with_context,
    stack_config,
)
from tests.fakes import CERTIFICATE_AUTHORITY, CLUSTER_ENDPOINT, CLUSTER_SECURITY_GROUP_ID, NODE_SECURITY_GROUP_ID

NOW = datetime(2026, 10, 1, 9, 0, tzinfo=UTC)
CLUSTER_ARN = "arn:aws:eks:us-east-1:123456789012:cluster/gpu"
CA_PEM = "-----BEGIN CERTIFICATE-----\nMIIBonprem\n-----END CERTIFICATE-----\n"
A40: dict[str, Any] = {
    "name": "a40",
    "kind": "hybrid",
    "role": "inference",
    "gpuModel": "A40",
    "gpusPerNode": 4,
    "nodes": 2,
    "network": {"remoteNodeCidrs": ["10.80.0.0/16"], "remotePodCidrs": ["10.85.0.0/16"]},
}
ROLE = IAM_ROLE
ACTIVATION = "aws:ssm/activation:Activation"
INGRESS = SG_INGRESS_RULE
EGRESS = "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"
RELEASE = HELM_RELEASE
ADDON = EKS_ADDON


def stack(*pools: dict[str, Any]) -> StackConfig:
    return stack_config(
        *(pools or [A40]),
        name="gpu",
        cluster={"kubernetesVersion": "1.35"},
        network={"vpcCidr": "10.0.0.0/16"},
        validated=True,
    )


def build(spec: StackConfig) -> tuple[ProgramRun, dict[str, Any]]:
    """Run HybridNodes under mocks; returns the registrations and each export resolved (+ `<key>:secret`)."""
    seen: dict[str, Any] = {}

    def program(ctx: ClusterContext) -> Any:
        component = HybridNodes("gpu-hybrid", ctx, plan_pools(spec), clock=lambda: NOW)

        async def resolve() -> None:
            for key, value in component.exports().items():
                if hasattr(value, "future"):
                    seen[f"{key}:secret"] = await value.is_secret()
                    seen[key] = await value.future()
                else:
                    seen[key] = value
            for name, pool in component.pools.items():
                if pool.activation is not None:
                    seen[f"activationId-{name}"] = await pool.activation.id.future()
                if pool.trust_anchor is not None and pool.profile is not None:
                    seen[f"trustAnchorArn-{name}"] = await pool.trust_anchor.arn.future()
                    seen[f"profileArn-{name}"] = await pool.profile.arn.future()

        return asyncio.ensure_future(resolve())

    return run_with_context(spec, program), seen


@pytest.fixture(scope="module")
def ssm() -> tuple[ProgramRun, dict[str, Any]]:
    return build(stack())


@pytest.fixture(scope="module")
def roles_anywhere() -> tuple[ProgramRun, dict[str, Any]]:
    return build(stack({**A40, "credentials": {"provider": "iam-roles-anywhere", "trustAnchorCertificate": CA_PEM}}))


# ------------------------------------------------------------------------------------------------- IAM role
@pytest.mark.program
def test_ssm_role_trusts_ssm_of_this_account(ssm: tuple[ProgramRun, dict[str, Any]]) -> None:
    role = ssm[0].one(ROLE, "gpu-a40-hybrid-node")
    (statement,) = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
    assert statement["Principal"] == {"Service": "ssm.amazonaws.com"}
    assert statement["Condition"]["StringEquals"] == {"aws:SourceAccount": "123456789012"}
    assert role.inputs["tags"][tags.POOL] == "a40"
    assert role.inputs["tags"][tags.GPU_MODEL] == "A40"


@pytest.mark.program
def test_ssm_role_gets_ssm_core_and_ecr_pull_only(ssm: tuple[ProgramRun, dict[str, Any]]) -> None:
    arns = sorted(r.inputs["policyArn"] for r in ssm[0].of_type(ROLE_POLICY_ATTACHMENT))
    assert arns == [
        "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryPullOnly",
        "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore",
    ]
    assert {r.inputs["role"] for r in ssm[0].of_type(ROLE_POLICY_ATTACHMENT)} == {"gpu-a40-hybrid-node"}


@pytest.mark.program
def test_inline_policy_describes_this_cluster_only(ssm: tuple[ProgramRun, dict[str, Any]]) -> None:
    policy = json.loads(ssm[0].one(ROLE_POLICY, "gpu-a40-hybrid-node").inputs["policy"])
    describe = next(s for s in policy["Statement"] if "eks:DescribeCluster" in s["Action"])
    assert describe["Resource"] == CLUSTER_ARN
    deregister = next(s for s in policy["Statement"] if s["Action"] == "ssm:DeregisterManagedInstance")
    assert deregister["Condition"] == {"StringEquals": {"ssm:resourceTag/EKSClusterARN": CLUSTER_ARN}}


@pytest.mark.program
def test_the_ssm_role_reads_no_parameter_despite_its_managed_policy(ssm: tuple[ProgramRun, dict[str, Any]]) -> None:
    """The role carries AmazonSSMManagedInstanceCore (GetParameter/GetParameters on "*"); its own inline policy,
    on the same role, denies every Parameter Store read, and an explicit deny wins."""
    inline = ssm[0].one(ROLE_POLICY, "gpu-a40-hybrid-node")
    assert inline.inputs["role"] == "gpu-a40-hybrid-node"
    policy = json.loads(inline.inputs["policy"])
    assert {"Sid": "NoParameterStoreReads", "Effect": "Deny", "Action": "ssm:GetParameter*", "Resource": "*"} in (
        policy["Statement"]
    )


@pytest.mark.program
def test_roles_anywhere_role_trusts_the_pools_trust_anchor(
    roles_anywhere: tuple[ProgramRun, dict[str, Any]],
) -> None:
    run, seen = roles_anywhere
    anchor = run.one("aws:rolesanywhere/trustAnchor:TrustAnchor")
    assert anchor.inputs["source"] == {
        "sourceType": "CERTIFICATE_BUNDLE",
        "sourceData": {"x509CertificateData": CA_PEM},
    }
    role = run.one(ROLE, "gpu-a40-hybrid-node")
    statements = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
    assert {s["Principal"]["Service"] for s in statements} == {"rolesanywhere.amazonaws.com"}
    assert seen["trustAnchorArn-a40"].startswith("arn:aws:rolesanywhere:")
    assert {s["Condition"]["ArnEquals"]["aws:SourceArn"] for s in statements} == {seen["trustAnchorArn-a40"]}
    assert role.inputs["maxSessionDuration"] > ROLES_ANYWHERE_SESSION_SECONDS
    arns = [r.inputs["policyArn"] for r in run.of_type(ROLE_POLICY_ATTACHMENT)]
    assert arns == ["arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryPullOnly"]
    assert not run.of_type(ACTIVATION)


@pytest.mark.program
def test_roles_anywhere_profile_accepts_node_names_as_session_names(
    roles_anywhere: tuple[ProgramRun, dict[str, Any]],
) -> None:
    profile = roles_anywhere[0].one("aws:rolesanywhere/profile:Profile")
    assert profile.inputs["acceptRoleSessionName"] is True
    assert profile.inputs["roleArns"] == ["arn:aws:iam::123456789012:role/gpu-a40-hybrid-node"]
    assert profile.inputs["durationSeconds"] == ROLES_ANYWHERE_SESSION_SECONDS


# ----------------------------------------------------------------------------------------------- activation
@pytest.mark.program
def test_activation_admits_the_pools_nodes_plus_spares_and_expires(ssm: tuple[ProgramRun, dict[str, Any]]) -> None:
    activation = ssm[0].one(ACTIVATION, "gpu-a40-hybrid-node")
    assert activation.inputs["registrationLimit"] == 2 + 2  # nodes + the default spareRegistrations
    assert activation.inputs["expirationDate"] == "2026-10-02T09:00:00Z"
    assert activation.inputs["iamRole"] == "gpu-a40-hybrid-node"
    assert activation.inputs["tags"]["EKSClusterARN"] == CLUSTER_ARN


@pytest.mark.program
def test_activation_expiry_is_not_replaced_on_every_run(ssm: tuple[ProgramRun, dict[str, Any]]) -> None:
    activation = ssm[0].one(ACTIVATION, "gpu-a40-hybrid-node")
    assert activation.ignore_changes == ["expirationDate"]
    # created only once the role has its permissions, so a server registering at once can join
    policies = ssm[0].of_type(ROLE_POLICY_ATTACHMENT)
    policies += ssm[0].of_type(ROLE_POLICY)
    assert len(policies) == 3
    assert {p.urn for p in policies} <= set(activation.depends_on)


@pytest.mark.program
def test_activation_code_is_a_secret_output_in_the_state(ssm: tuple[ProgramRun, dict[str, Any]]) -> None:
    # The provider reports the code in plain text; whoever reads the state could register servers with it.
    activation = ssm[0].one(ACTIVATION, "gpu-a40-hybrid-node")
    assert activation.additional_secret_outputs == ["activationCode"]


@pytest.mark.program
def test_activation_limit_and_expiry_follow_config() -> None:
    run, _ = build(stack({**A40, "nodes": 4, "credentials": {"activationLimit": 6, "activationExpiryHours": 72}}))
    activation = run.one(ACTIVATION, "gpu-a40-hybrid-node")
    assert activation.inputs["registrationLimit"] == 6
    assert activation.inputs["expirationDate"] == "2026-10-04T09:00:00Z"


# --------------------------------------------------------------------------------------- access and network
@pytest.mark.program
def test_access_entry_is_hybrid_linux_for_the_role(ssm: tuple[ProgramRun, dict[str, Any]]) -> None:
    entry = ssm[0].one(ACCESS_ENTRY, "gpu-a40-hybrid-node")
    assert entry.inputs["type"] == "HYBRID_LINUX"
    assert entry.inputs["principalArn"] == "arn:aws:iam::123456789012:role/gpu-a40-hybrid-node"
    assert entry.inputs["clusterName"] == "gpu"
    assert "kubernetesGroups" not in entry.inputs  # non-STANDARD entries cannot have groups (facts §5e)


@pytest.mark.program
def test_cluster_security_group_admits_remote_nodes_and_pods_on_443(
    ssm: tuple[ProgramRun, dict[str, Any]],
) -> None:
    rules = {r.inputs["cidrIpv4"]: r.inputs for r in ssm[0].of_type(INGRESS) if "-api-from-" in r.name}
    assert sorted(rules) == ["10.80.0.0/16", "10.85.0.0/16"]
    for rule in rules.values():
        assert rule["securityGroupId"] == CLUSTER_SECURITY_GROUP_ID
        assert (rule["ipProtocol"], rule["fromPort"], rule["toPort"]) == ("tcp", 443, 443)
        assert rule["tags"][tags.POOL] == "a40"


def rules_of(run: ProgramRun, kind: str, group: str, cidr: str) -> set[tuple[str, int, int]]:
    """(protocol, from, to) of the `kind` rules on `group` for `cidr`."""
    return {
        (r.inputs["ipProtocol"], r.inputs["fromPort"], r.inputs["toPort"])
        for r in run.of_type(kind)
        if r.inputs["securityGroupId"] == group and r.inputs.get("cidrIpv4") == cidr
    }


@pytest.mark.program
def test_control_plane_reaches_the_kubelet_on_remote_nodes(ssm: tuple[ProgramRun, dict[str, Any]]) -> None:
    """Cluster security group table: outbound TCP 10250 to the remote node CIDRs (logs, exec, port-forward)."""
    assert rules_of(ssm[0], EGRESS, CLUSTER_SECURITY_GROUP_ID, "10.80.0.0/16") == {("tcp", 10250, 10250)}


@pytest.mark.program
def test_control_plane_reaches_webhooks_on_remote_pods(ssm: tuple[ProgramRun, dict[str, Any]]) -> None:
    """Cluster security group table: outbound webhook ports to the remote pod CIDRs."""
    assert rules_of(ssm[0], EGRESS, CLUSTER_SECURITY_GROUP_ID, "10.85.0.0/16") == {
        ("tcp", 443, 443),
        ("tcp", 1025, 65535),
    }


@pytest.mark.program
@pytest.mark.parametrize("cidr", ["10.80.0.0/16", "10.85.0.0/16"])
def test_node_security_group_admits_dns_from_remote_nodes_and_pods(
    ssm: tuple[ProgramRun, dict[str, Any]], cidr: str
) -> None:
    """On-premises table: pods reach CoreDNS in the VPC on UDP and TCP 53; masqueraded, they come from node IPs."""
    assert rules_of(ssm[0], INGRESS, NODE_SECURITY_GROUP_ID, cidr) == {("udp", 53, 53), ("tcp", 53, 53)}


@pytest.mark.program
def test_no_other_rule_opens_the_node_group_to_the_site(ssm: tuple[ProgramRun, dict[str, Any]]) -> None:
    opened = [r for r in ssm[0].of_type(INGRESS) if r.inputs["securityGroupId"] == NODE_SECURITY_GROUP_ID]
    assert {r.inputs["fromPort"] for r in opened} == {53}
    assert not [r for r in ssm[0].of_type(EGRESS) if r.inputs["securityGroupId"] == NODE_SECURITY_GROUP_ID]


@pytest.mark.program
def test_every_pool_gets_its_own_credentials_and_rules() -> None:
    l40s = {
        **A40,
        "name": "l40s",
        "gpuModel": "L40S",
        "network": {
            "remoteNodeCidrs": ["192.168.10.0/24"],
            "remotePodCidrs": ["192.168.64.0/20"],
            "webhooksOnHybridNodes": False,
        },
    }
    run, seen = build(stack(A40, l40s))
    assert sorted(r.name for r in run.of_type(ACTIVATION)) == ["gpu-a40-hybrid-node", "gpu-l40s-hybrid-node"]
    assert sorted(r.inputs["cidrIpv4"] for r in run.of_type(INGRESS) if "-api-from-" in r.name) == [
        "10.80.0.0/16",
        "10.85.0.0/16",
        "192.168.10.0/24",
        "192.168.64.0/20",
    ]
    # No webhooks on the L40S servers: the control plane gets no webhook rule towards their pods.
    assert rules_of(run, EGRESS, CLUSTER_SECURITY_GROUP_ID, "192.168.64.0/20") == set()
    assert rules_of(run, EGRESS, CLUSTER_SECURITY_GROUP_ID, "192.168.10.0/24") == {("tcp", 10250, 10250)}
    assert {"hybridNodeConfig-a40", "hybridNodeConfig-l40s"} <= set(seen)
    assert "hybridCiliumBgp" not in seen


@pytest.mark.program
def test_bgp_pools_export_the_cilium_bgp_objects_and_enable_the_control_plane() -> None:
    bgp = {"peerAddress": "10.80.0.1", "peerAsn": 65000, "localAsn": 65010}
    run, seen = build(stack({**A40, "network": {**A40["network"], "bgp": bgp}}))
    values = run.one(RELEASE).inputs["values"]
    assert values["bgpControlPlane"] == {"enabled": True}
    docs = list(yaml.safe_load_all(seen["hybridCiliumBgp"]))
    assert [d["kind"] for d in docs] == ["CiliumBGPClusterConfig", "CiliumBGPPeerConfig", "CiliumBGPAdvertisement"]
    (instance,) = docs[0]["spec"]["bgpInstances"]
    assert instance["localASN"] == 65010
    assert instance["peers"][0]["peerAddress"] == "10.80.0.1"


# ----------------------------------------------------------------------------------------------------- Cilium
@pytest.mark.program
def test_cilium_release_is_pinned_and_runs_only_on_hybrid_nodes(ssm: tuple[ProgramRun, dict[str, Any]]) -> None:
    release = ssm[0].one(RELEASE)
    pin = versions.chart("cilium")
    assert release.inputs["chart"] == pin.chart_ref
    assert release.inputs["version"] == pin.version
    assert release.inputs["namespace"] == "kube-system"
    values = release.inputs["values"]
    term = values["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["nodeSelectorTerms"] == [
        {"matchExpressions": [{"key": "eks.amazonaws.com/compute-type", "operator": "In", "values": ["hybrid"]}]}
    ]
    assert values["operator"]["affinity"] == values["affinity"]
    assert values["ipam"]["mode"] == "cluster-pool"
    assert values["ipam"]["operator"]["clusterPoolIPv4PodCIDRList"] == ["10.85.0.0/16"]
    assert values["operator"]["unmanagedPodWatcher"]["restart"] is False


@pytest.mark.program
def test_cilium_does_not_wait_for_servers_that_join_after_the_stack(ssm: tuple[ProgramRun, dict[str, Any]]) -> None:
    release = ssm[0].one(RELEASE)
    assert release.inputs["skipAwait"] is True
    assert release.provider is not None and "k8s" in release.provider


@pytest.mark.program
def test_cilium_tolerates_the_a40_gpu_taint(ssm: tuple[ProgramRun, dict[str, Any]]) -> None:
    values = ssm[0].one(RELEASE).inputs["values"]
    (plan,) = [p for p in plan_pools(stack()) if p.kind == "hybrid"]
    assert plan.taints, "GPU pools are tainted by default"
    for taint in plan.taints:
        assert tolerates(values["tolerations"], taint)
        assert tolerates(values["operator"]["tolerations"], taint)


# ------------------------------------------------------------------------------------------------ NodeConfig
@pytest.mark.program
def test_node_config_is_a_secret_output_that_parses_back(ssm: tuple[ProgramRun, dict[str, Any]]) -> None:
    _, seen = ssm
    assert seen["hybridNodeConfig-a40:secret"] is True
    doc = yaml.safe_load(seen["hybridNodeConfig-a40"])
    assert doc["apiVersion"] == "node.eks.aws/v1alpha1" and doc["kind"] == "NodeConfig"
    # Endpoint, CA and service CIDR from the cluster, so `nodeadm init` makes no eks:DescribeCluster call.
    assert doc["spec"]["cluster"] == {
        "name": "gpu",
        "region": "us-east-1",
        "apiServerEndpoint": CLUSTER_ENDPOINT,
        "certificateAuthority": CERTIFICATE_AUTHORITY,
        "cidr": "172.20.0.0/16",
    }
    assert doc["spec"]["hybrid"]["ssm"]["activationId"] == seen["activationId-a40"]
    assert doc["spec"]["hybrid"]["ssm"]["activationCode"] == "offline-activation-code"
    flags = doc["spec"]["kubelet"]["flags"]
    assert any(f.startswith("--node-labels=") and "nvidia.com/gpu.present=true" in f for f in flags)
    assert any(f.startswith("--node-labels=") and "gpu-clusters/pool=a40" in f for f in flags)
    assert f"--register-with-taints=nvidia.com/gpu=true:NoSchedule,{STARTUP_TAINT.render()}" in flags
    # AWS's CoreDNS guidance: hybrid nodes carry an on-prem zone, so a CoreDNS replica spreads onto them.
    assert any(f.startswith("--node-labels=") and "topology.kubernetes.io/zone=onprem" in f for f in flags)


@pytest.mark.program
def test_roles_anywhere_node_config_carries_the_arns(roles_anywhere: tuple[ProgramRun, dict[str, Any]]) -> None:
    _, seen = roles_anywhere
    doc = yaml.safe_load(seen["hybridNodeConfig-a40"])["spec"]["hybrid"]["iamRolesAnywhere"]
    assert doc["trustAnchorArn"] == seen["trustAnchorArn-a40"]
    assert doc["profileArn"] == seen["profileArn-a40"]
    assert doc["nodeName"] == ROLES_ANYWHERE_NODE_NAME_PLACEHOLDER  # each server puts its cert CN
    assert doc["roleArn"] == "arn:aws:iam::123456789012:role/gpu-a40-hybrid-node"
    assert seen["hybridNodeadmInstall-a40"] == "nodeadm install 1.35 --credential-provider iam-ra --region us-east-1"


@pytest.mark.program
def test_install_command_is_a_plain_output(ssm: tuple[ProgramRun, dict[str, Any]]) -> None:
    assert ssm[1]["hybridNodeadmInstall-a40"] == "nodeadm install 1.35 --credential-provider ssm --region us-east-1"


@pytest.mark.program
def test_needs_a_hybrid_pool() -> None:
    spec = stack(SYSTEM)
    with pytest.raises(ValueError, match="hybrid"):
        run_with_context(spec, lambda ctx: HybridNodes("x", ctx, plan_pools(spec), clock=lambda: NOW))


# --------------------------------------------------------------------------------------- the shipped stack
def test_hybrid_stack_joins_the_4x_a40_pool(hybrid_stack: ShippedStack) -> None:
    """stacks/Pulumi.hybrid.yaml through the real program: everything a server owner needs is planned."""
    run = hybrid_stack.run
    remote = run.one(EKS_CLUSTER).inputs["remoteNetworkConfig"]
    assert remote == {
        "remoteNodeNetworks": {"cidrs": ["192.168.100.0/24"]},
        "remotePodNetworks": {"cidrs": ["192.168.128.0/18"]},
    }
    assert run.one(EKS_CLUSTER).inputs["accessConfig"]["authenticationMode"] != "CONFIG_MAP"
    assert run.one(ACTIVATION, "hybrid-a40-hybrid-node").inputs["registrationLimit"] == 4 + 2
    assert run.one(ACCESS_ENTRY, "hybrid-a40-hybrid-node").inputs["type"] == "HYBRID_LINUX"
    cilium = run.one(RELEASE, "hybrid-cilium").inputs["values"]
    assert cilium["ipam"]["operator"]["clusterPoolIPv4PodCIDRList"] == ["192.168.128.0/18"]
    node_config = yaml.safe_load(hybrid_stack.exports["hybridNodeConfig-a40"])
    cluster = node_config["spec"]["cluster"]
    assert cluster["name"] == "hybrid" and cluster["region"] == "us-east-1" and cluster["cidr"] == "172.20.0.0/16"
    # the mocks' cluster outputs (blueprint.plan.mocks), as `pulumi up` puts the real ones
    assert cluster["apiServerEndpoint"].endswith(".gr7.us-east-1.eks.amazonaws.com")
    assert cluster["certificateAuthority"] == FAKE_CA
    assert "ssm" in node_config["spec"]["hybrid"]


# ----------------------------------------------------------------------------------------------- CoreDNS
def test_hybrid_stack_runs_a_coredns_replica_on_prem_and_two_in_the_cloud(hybrid_stack: ShippedStack) -> None:
    """AWS's mixed-mode guidance: at least one CoreDNS replica on hybrid nodes and one in the cloud, spread by a
    preferred anti-affinity on hostname (100) and zone (50), set through the add-on's configuration."""
    addon = next(a for a in hybrid_stack.run.of_type(ADDON) if a.inputs["addonName"] == "coredns")
    config = json.loads(addon.inputs["configurationValues"])
    assert config["replicaCount"] == 3
    terms = config["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [
        {"matchExpressions": [{"key": "gpu-clusters/role", "operator": "In", "values": ["system"]}]},
        {"matchExpressions": [{"key": "eks.amazonaws.com/compute-type", "operator": "In", "values": ["hybrid"]}]},
    ]
    spread = config["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert [(s["podAffinityTerm"]["topologyKey"], s["weight"]) for s in spread] == [
        ("kubernetes.io/hostname", 100),
        ("topology.kubernetes.io/zone", 50),
    ]
    assert tolerates(config["tolerations"], Taint(key="nvidia.com/gpu", value="true", effect="NoSchedule"))
    assert "nodeSelector" not in config  # a selector would AND with the affinity and keep CoreDNS off-prem


def test_without_hybrid_pools_coredns_stays_on_the_system_pool() -> None:
    config = addon_configuration("coredns")
    assert config is not None
    assert config["replicaCount"] == 2 and config["nodeSelector"] == {"gpu-clusters/role": "system"}
    assert "affinity" not in config


@pytest.mark.program
def test_activation_revision_reissues_the_activation_by_name() -> None:
    # Every argument of an SSM activation forces a replacement: a new name is a new code and a new expiry.
    first = build(stack({**A40, "nodes": 4}))[0].one(ACTIVATION, "gpu-a40-hybrid-node").inputs
    second = build(stack({**A40, "nodes": 4, "credentials": {"activationRevision": 2}}))[0]
    reissued = second.one(ACTIVATION, "gpu-a40-hybrid-node").inputs
    assert reissued["name"] == f"{first['name']}-r2"
    assert reissued["registrationLimit"] == first["registrationLimit"] == 4 + 2


def test_roles_anywhere_pool_refuses_ssm_rejoin_settings() -> None:
    creds = {"provider": "iam-roles-anywhere", "trustAnchorCertificate": CA_PEM, "activationRevision": 2}
    with pytest.raises(ConfigError) as raised:
        stack({**A40, "credentials": creds})
    assert [p.path for p in raised.value.problems] == ["nodePools[0] (a40).credentials.activationRevision"]
