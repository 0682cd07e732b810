"""EKS cluster component: encryption, endpoint access, logging, access entries, hybrid networks, security groups,
plus the cluster core as GpuCluster wires it (context, kubeconfig export)."""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pulumi_aws as aws
import pytest

from blueprint.plan import runner
from blueprint.plan.mocks import PlanMocks
from blueprint.plan.monitor import SECRET
from blueprint.plan.runner import ProgramRun, run_mocked
from components import cluster as cluster_module
from components import kubernetes_access
from components.catalog import versions
from components.cluster import EksCluster
from components.config import StackConfig
from components.gpu_cluster import GpuCluster
from components.network import Network
from components.planning.hybrid import remote_network_config
from components.planning.stack_plan import plan_stack
from components.planning.stateful import stateful_protection
from tests.builders import (
    ACCESS_ENTRY,
    AUTOSCALING_GROUP,
    EKS_ADDON,
    EKS_CLUSTER,
    KMS_KEY,
    LOG_GROUP,
    ROLE_POLICY,
    ROLE_POLICY_ATTACHMENT,
    SG_INGRESS_RULE,
    SYSTEM_DEFAULT_SCALING,
    once_per_config,
    stack_config,
)

SYSTEM_POOL = SYSTEM_DEFAULT_SCALING
#: Who runs `pulumi up` offline (blueprint.plan.mocks: getCallerIdentity).
OFFLINE_DEPLOYER = "arn:aws:iam::123456789012:user/offline"
ENTRY = ACCESS_ENTRY
ASSOCIATION = "aws:eks/accessPolicyAssociation:AccessPolicyAssociation"
CLUSTER_ADMIN = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"


def spec(cluster: dict[str, Any] | None = None, pools: list[dict[str, Any]] | None = None) -> StackConfig:
    return stack_config(*(pools if pools is not None else [SYSTEM_POOL]), cluster=cluster)


@once_per_config
def build(config: StackConfig) -> tuple[ProgramRun, dict[str, Any]]:
    seen: dict[str, Any] = {}

    def program() -> None:
        tags = {"gpu-clusters/cluster": config.cluster.name}
        partition = aws.get_partition_output().partition
        account = aws.get_caller_identity_output().account_id
        net = Network("demo-network", config.network, config.cluster.name, config.region, tags)
        eks = EksCluster(
            "demo-eks",
            config.cluster,
            net,
            remote_network_config(config.hybrid_pools),
            stateful_protection(config.cluster.protect_stateful)["kms-key"],
            tags,
            account,
            partition,
            config.region,
        )
        seen["deployer_access"] = eks.deployer_access
        pulumi.Output.all(
            key=eks.kms_key.arn,
            cluster_sg=eks.cluster_security_group_id,
            node_sg=eks.node_security_group_id,
            private=pulumi.Output.all(*net.private_subnet_id_list),
            endpoint=eks.endpoint,
            ca=eks.certificate_authority,
        ).apply(seen.update)

    return run_mocked(program), seen


def cluster_inputs(run: ProgramRun) -> dict[str, Any]:
    return run.one(EKS_CLUSTER).inputs


@pytest.mark.program
def test_secrets_are_envelope_encrypted_with_a_rotating_protected_key() -> None:
    run, seen = build(spec())
    encryption = cluster_inputs(run)["encryptionConfig"]
    assert encryption["resources"] == ["secrets"]
    assert encryption["provider"]["keyArn"] == seen["key"]
    key = run.one(KMS_KEY)
    assert key.inputs["enableKeyRotation"] is True
    assert key.protect is True
    assert key.retain_on_delete is True


@pytest.mark.program
def test_unprotected_stacks_may_delete_the_key() -> None:
    key = build(spec({"protectStateful": False}))[0].one(KMS_KEY)
    assert key.protect is False
    assert key.retain_on_delete is False


#: The stack's own Auto Scaling service-linked role: `demo` in us-east-1 (tests.builders.stack_config).
AUTOSCALING_ROLE = (
    "arn:aws:iam::123456789012:role/aws-service-role/autoscaling.amazonaws.com/"
    "AWSServiceRoleForAutoScaling_demo.us-east-1"
)
SERVICE_LINKED_ROLE = "aws:iam/serviceLinkedRole:ServiceLinkedRole"


@pytest.mark.program
def test_every_stack_creates_its_own_auto_scaling_role_named_after_its_cluster_and_region() -> None:
    """A custom suffix: no lookup, no role shared with other stacks of the account, and always in the plan."""
    run, _ = build(spec())
    role = run.one(SERVICE_LINKED_ROLE)
    assert role.name == "demo-autoscaling-role"
    assert role.inputs["awsServiceName"] == "autoscaling.amazonaws.com"
    assert role.inputs["customSuffix"] == "demo.us-east-1"
    assert role.retain_on_delete is False  # the stack's own: `pulumi destroy` deletes it after the groups
    assert role.protect is False


@pytest.mark.program
def test_key_policy_lets_the_stacks_auto_scaling_role_launch_nodes_with_encrypted_volumes() -> None:
    run, _ = build(spec())
    policy = json.loads(run.one(KMS_KEY).inputs["policy"])
    principals = {s["Sid"]: s["Principal"].get("AWS") for s in policy["Statement"]}
    assert principals["AccountAdministersKeyThroughIam"] == "arn:aws:iam::123456789012:root"
    assert principals["AutoScalingUsesKeyForEncryptedVolumes"] == AUTOSCALING_ROLE
    assert principals["AutoScalingGrantsForAttachedVolumes"] == AUTOSCALING_ROLE


@pytest.mark.program
def test_the_auto_scaling_role_exists_before_the_key_names_it() -> None:
    """KMS refuses a key policy naming a principal that does not exist (MalformedPolicyDocumentException)."""
    run, _ = build(spec())
    assert run.one(SERVICE_LINKED_ROLE).urn in run.one(KMS_KEY).depends_on


@pytest.mark.program
def test_two_regions_of_one_account_get_two_auto_scaling_roles() -> None:
    """IAM names are account-wide, EKS cluster names only Region-wide: the Region is part of the suffix."""
    west = stack_config(SYSTEM_POOL, region="us-west-2", zones=["us-west-2a", "us-west-2b"])
    run, _ = build(west)
    assert run.one(SERVICE_LINKED_ROLE).inputs["customSuffix"] == "demo.us-west-2"


@pytest.mark.program
def test_the_account_is_never_asked_for_roles() -> None:
    run, _ = build(spec())
    assert "aws:iam/getRoles:getRoles" not in run.invokes


def test_every_group_of_a_shipped_stack_launches_as_the_role_its_key_names(each_shipped_plan: dict[str, Any]) -> None:
    """The plan shows the fresh-account path: the stack's own role, set on every group and named by the key, so
    Auto Scaling never uses (nor creates) the account's default role for these groups."""
    resources = each_shipped_plan["resources"]
    summary = each_shipped_plan["summary"]
    (role,) = [r for r in resources if r["type"] == SERVICE_LINKED_ROLE]
    assert role["inputs"]["customSuffix"] == f"{summary['cluster']}.{summary['region']}"
    arn = (
        "arn:aws:iam::123456789012:role/aws-service-role/autoscaling.amazonaws.com/"
        f"AWSServiceRoleForAutoScaling_{summary['cluster']}.{summary['region']}"
    )
    groups = [r for r in resources if r["type"] == AUTOSCALING_GROUP]
    assert groups
    assert {g["inputs"]["serviceLinkedRoleArn"] for g in groups} == {arn}
    (key,) = [r for r in resources if r["type"] == KMS_KEY]
    named = {json.dumps(s["Principal"]) for s in json.loads(key["inputs"]["policy"])["Statement"] if "Auto" in s["Sid"]}
    assert named == {json.dumps({"AWS": arn})}


@pytest.mark.program
def test_cluster_role_may_use_the_key_and_has_the_cluster_policy() -> None:
    run, seen = build(spec())
    inline = json.loads(run.one(ROLE_POLICY, "demo-cluster-encryption").inputs["policy"])
    assert inline["Statement"][0]["Resource"] == seen["key"]
    assert "kms:Decrypt" in inline["Statement"][0]["Action"]
    attachment = run.one(ROLE_POLICY_ATTACHMENT, "demo-cluster-AmazonEKSClusterPolicy")
    assert attachment.inputs["policyArn"] == "arn:aws:iam::aws:policy/AmazonEKSClusterPolicy"
    assert attachment.urn in run.one(EKS_CLUSTER).depends_on


@pytest.mark.program
def test_private_endpoint_by_default() -> None:
    run, seen = build(spec())
    vpc = cluster_inputs(run)["vpcConfig"]
    assert vpc["endpointPrivateAccess"] is True
    assert vpc["endpointPublicAccess"] is False
    assert "publicAccessCidrs" not in vpc
    assert vpc["subnetIds"] == seen["private"]


@pytest.mark.program
def test_public_endpoint_only_for_the_allow_list() -> None:
    run, _ = build(spec({"endpoint": {"public": True, "publicAccessCidrs": ["203.0.113.0/24", "198.51.100.7/32"]}}))
    vpc = cluster_inputs(run)["vpcConfig"]
    assert vpc["endpointPublicAccess"] is True
    assert vpc["endpointPrivateAccess"] is True
    assert vpc["publicAccessCidrs"] == ["203.0.113.0/24", "198.51.100.7/32"]


@pytest.mark.program
def test_control_plane_logging_types() -> None:
    assert cluster_inputs(build(spec())[0])["enabledClusterLogTypes"] == [
        "api",
        "audit",
        "authenticator",
        "controllerManager",
        "scheduler",
    ]
    custom = build(spec({"logging": ["api", "audit", "authenticator", "scheduler"]}))[0]
    assert cluster_inputs(custom)["enabledClusterLogTypes"] == ["api", "audit", "authenticator", "scheduler"]


@pytest.mark.program
def test_version_access_mode_upgrade_policy_and_service_cidr_from_config() -> None:
    run, _ = build(spec({"kubernetesVersion": "1.34", "supportType": "EXTENDED", "serviceCidr": "10.100.0.0/16"}))
    inputs = cluster_inputs(run)
    assert inputs["name"] == "demo"
    assert inputs["version"] == "1.34"
    assert inputs["accessConfig"] == {"authenticationMode": "API", "bootstrapClusterCreatorAdminPermissions": False}
    assert inputs["upgradePolicy"] == {"supportType": "EXTENDED"}
    assert inputs["kubernetesNetworkConfig"]["serviceIpv4Cidr"] == "10.100.0.0/16"
    assert inputs["bootstrapSelfManagedAddons"] is False


@pytest.mark.program
def test_deletion_protection_is_on_unless_the_stack_turns_it_off() -> None:
    assert cluster_inputs(build(spec())[0])["deletionProtection"] is True
    assert cluster_inputs(build(spec({"deletionProtection": False}))[0])["deletionProtection"] is False


@pytest.mark.program
def test_unsupported_kubernetes_version_is_refused() -> None:
    config = spec({"kubernetesVersion": "1.20"})
    assert "1.20" not in versions.supported_kubernetes_versions()
    with pytest.raises(ValueError, match=r"Kubernetes 1\.20 is not supported"):
        build(config)


@pytest.mark.program
def test_admins_get_standard_access_entries_with_their_access_policy() -> None:
    admins = [
        {"principalArn": "arn:aws:iam::123456789012:role/platform-admins"},
        {"principalArn": "arn:aws:iam::123456789012:user/ci", "policy": "AmazonEKSViewPolicy"},
    ]
    run, _ = build(spec({"admins": admins}))
    entries = {e.inputs["principalArn"]: e for e in run.of_type(ACCESS_ENTRY)}
    assert set(entries) == {a["principalArn"] for a in admins} | {OFFLINE_DEPLOYER}
    assert {e.inputs["type"] for e in entries.values()} == {"STANDARD"}
    associations = {
        a.inputs["principalArn"]: a.inputs
        for a in run.of_type("aws:eks/accessPolicyAssociation:AccessPolicyAssociation")
    }
    assert associations["arn:aws:iam::123456789012:role/platform-admins"]["policyArn"] == (
        "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
    )
    assert associations["arn:aws:iam::123456789012:user/ci"]["policyArn"] == (
        "arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy"
    )
    assert all(a["accessScope"] == {"type": "cluster"} for a in associations.values())


HYBRID = {
    "kind": "hybrid",
    "role": "inference",
    "gpuModel": "A40",
    "gpusPerNode": 4,
    "nodes": 2,
}


@pytest.mark.program
def test_hybrid_pools_become_one_remote_network_object_with_every_cidr() -> None:
    pools: list[dict[str, Any]] = [
        SYSTEM_POOL,
        {
            **HYBRID,
            "name": "site-a",
            "network": {"remoteNodeCidrs": ["192.168.100.0/24"], "remotePodCidrs": ["192.168.128.0/18"]},
        },
        {
            **HYBRID,
            "name": "site-b",
            "network": {"remoteNodeCidrs": ["172.16.0.0/24", "192.168.100.0/24"], "remotePodCidrs": ["172.16.64.0/18"]},
        },
    ]
    remote = cluster_inputs(build(spec(pools=pools))[0])["remoteNetworkConfig"]
    assert remote == {
        "remoteNodeNetworks": {"cidrs": ["192.168.100.0/24", "172.16.0.0/24"]},
        "remotePodNetworks": {"cidrs": ["192.168.128.0/18", "172.16.64.0/18"]},
    }


@pytest.mark.program
def test_no_remote_network_config_without_hybrid_pools() -> None:
    assert "remoteNetworkConfig" not in cluster_inputs(build(spec())[0])


def rules(run: ProgramRun, kind: str) -> list[dict[str, Any]]:
    token = f"aws:vpc/securityGroup{kind}Rule:SecurityGroup{kind}Rule"
    return [r.inputs for r in run.of_type(token)]


def deployer_rules(run: ProgramRun, cluster_sg: str) -> list[dict[str, Any]]:
    return [r for r in rules(run, "Ingress") if r["securityGroupId"] == cluster_sg and "deployer" in r["description"]]


@pytest.mark.program
def test_private_endpoint_admits_the_deployers_networks_and_groups_on_443() -> None:
    endpoint = {"privateAccessCidrs": ["192.168.10.0/24"], "privateAccessSecurityGroupIds": ["sg-0123456789abcdef0"]}
    run, seen = build(spec({"endpoint": endpoint}))
    admitted = deployer_rules(run, seen["cluster_sg"])
    assert {(r.get("cidrIpv4"), r.get("referencedSecurityGroupId")) for r in admitted} == {
        ("192.168.10.0/24", None),
        (None, "sg-0123456789abcdef0"),
    }
    assert all(r["ipProtocol"] == "tcp" and r["fromPort"] == r["toPort"] == 443 for r in admitted)


@pytest.mark.program
def test_deploying_from_the_vpc_admits_the_vpc_cidr() -> None:
    run, seen = build(spec({"endpoint": {"deployFromVpc": True}}))
    assert [r["cidrIpv4"] for r in deployer_rules(run, seen["cluster_sg"])] == ["10.0.0.0/16"]


@pytest.mark.program
def test_no_deployer_rules_without_an_access_path() -> None:
    run, seen = build(spec())
    assert deployer_rules(run, seen["cluster_sg"]) == []


@pytest.mark.program
def test_no_security_group_ingress_from_anywhere() -> None:
    run, _ = build(spec({"endpoint": {"public": True, "publicAccessCidrs": ["203.0.113.0/24"]}}))
    ingress = rules(run, "Ingress")
    assert ingress
    assert all("cidrIpv4" not in r for r in ingress)


@pytest.mark.program
def test_nodes_talk_to_each_other_both_ways_for_efa() -> None:
    run, seen = build(spec())
    node_sg = seen["node_sg"]
    self_rules = [
        (kind, r["ipProtocol"])
        for kind in ("Ingress", "Egress")
        for r in rules(run, kind)
        if r["securityGroupId"] == node_sg and r.get("referencedSecurityGroupId") == node_sg
    ]
    assert sorted(self_rules) == [("Egress", "-1"), ("Ingress", "-1")]


def covers(rule: dict[str, Any], port: int) -> bool:
    return rule["ipProtocol"] == "tcp" and rule["fromPort"] <= port <= rule["toPort"]


@pytest.mark.program
def test_control_plane_reaches_kubelet_and_webhooks_and_nodes_reach_the_api() -> None:
    run, seen = build(spec())
    from_control_plane = [
        r
        for r in rules(run, "Ingress")
        if r["securityGroupId"] == seen["node_sg"] and r.get("referencedSecurityGroupId") == seen["cluster_sg"]
    ]
    for port in (443, 10250, 9443):
        assert any(covers(r, port) for r in from_control_plane), port
    assert not any(covers(r, 22) for r in from_control_plane)
    to_api = [
        r
        for r in rules(run, "Ingress")
        if r["securityGroupId"] == seen["cluster_sg"] and r.get("referencedSecurityGroupId") == seen["node_sg"]
    ]
    assert len(to_api) == 1 and covers(to_api[0], 443) and not covers(to_api[0], 444)


@pytest.mark.program
def test_security_group_rules_carry_the_cluster_tags() -> None:
    run, _ = build(spec())
    assert all(r["tags"]["gpu-clusters/cluster"] == "demo" for r in rules(run, "Ingress") + rules(run, "Egress"))


def test_kubeconfig_uses_aws_eks_get_token_against_the_cluster() -> None:
    doc = kubernetes_access.kubeconfig_document("demo", "https://example.eks.amazonaws.com", "Q0E=", "eu-west-1")
    assert doc["clusters"][0]["cluster"] == {
        "server": "https://example.eks.amazonaws.com",
        "certificate-authority-data": "Q0E=",
    }
    user = doc["users"][0]["user"]["exec"]
    assert user["command"] == "aws"
    assert user["args"][:2] == ["eks", "get-token"]
    assert user["args"][user["args"].index("--cluster-name") + 1] == "demo"
    assert user["args"][user["args"].index("--region") + 1] == "eu-west-1"
    assert doc["current-context"] == "demo"


# ------------------------------------------------------------------------------- the core as GpuCluster wires it
@once_per_config
def run_gpu_cluster(config: StackConfig) -> tuple[ProgramRun, dict[str, Any]]:
    seen: dict[str, Any] = {}

    def program() -> None:
        cluster = GpuCluster("demo", stack_plan=plan_stack(config), stack="test")
        exports = cluster.exports()
        seen["exports"] = exports
        seen["context"] = cluster.context
        # A probe resource whose input is the exported kubeconfig: secrets show up masked in its inputs.
        aws.ssm.Parameter("kubeconfig-probe", type="SecureString", value=exports["kubeconfig"])
        pulumi.Output.all(
            kubeconfig=exports["kubeconfig"],
            endpoint=exports["clusterEndpoint"],
            vpc=exports["vpcId"],
            role=cluster.context.node_role_arns["system"],
            node_sg=cluster.context.node_security_group_id,
        ).apply(seen.update)

    return run_mocked(program), seen


@pytest.mark.program
def test_gpu_cluster_exports_the_kubeconfig_as_a_secret_and_the_core_outputs() -> None:
    run, seen = run_gpu_cluster(spec())
    assert run.one("aws:ssm/parameter:Parameter", "kubeconfig-probe").inputs["value"] == SECRET
    kubeconfig = json.loads(seen["kubeconfig"])
    assert kubeconfig["clusters"][0]["cluster"]["server"] == seen["endpoint"]
    assert seen["endpoint"].startswith("https://")
    assert seen["vpc"].startswith("vpc-")
    assert seen["role"] == "arn:aws:iam::123456789012:role/demo-system-managed-node"
    assert {"vpcId", "clusterEndpoint", "clusterArn", "nodeSecurityGroupId", "kmsKeyArn"} <= set(seen["exports"])


@pytest.mark.program
def test_gpu_cluster_context_and_kubernetes_provider() -> None:
    run, seen = run_gpu_cluster(spec())
    ctx = seen["context"]
    assert ctx.cluster_name_plain == "demo"
    assert sorted(ctx.private_subnet_ids) == ["us-east-1a", "us-east-1b"]
    provider = run.one("pulumi:providers:kubernetes", "demo-k8s")
    assert json.loads(provider.inputs["kubeconfig"])["users"][0]["user"]["exec"]["command"] == "aws"
    addons = {a.inputs["addonName"] for a in run.of_type(EKS_ADDON)}
    assert {"vpc-cni", "kube-proxy", "eks-pod-identity-agent"} <= addons


@pytest.mark.program
def test_kubernetes_provider_waits_for_the_deployers_way_in() -> None:
    """The first Kubernetes call must not race the security group rule that lets the deployer reach the API."""
    run, _ = run_gpu_cluster(spec({"endpoint": {"privateAccessCidrs": ["192.168.10.0/24"]}}))
    rule = run.one(
        SG_INGRESS_RULE,
        "demo-control-plane-from-deployer-cidr-192-168-10-0-24",
    )
    provider = run.one("pulumi:providers:kubernetes", "demo-k8s")
    assert rule.urn in provider.property_dependencies["kubeconfig"]


# ------------------------------------------------------------------------------------ control-plane log group
@pytest.mark.program
def test_the_control_plane_log_group_exists_before_the_cluster_encrypted_with_a_retention() -> None:
    """EKS would create `/aws/eks/<name>/cluster` itself, with no retention and no KMS key, if it were missing."""
    run, seen = build(spec({"logRetentionDays": 731}))
    group = run.one(LOG_GROUP, "demo-control-plane")
    assert group.inputs["name"] == "/aws/eks/demo/cluster"
    assert group.inputs["retentionInDays"] == 731
    assert group.inputs["kmsKeyId"] == seen["key"]
    assert group.urn in run.one(EKS_CLUSTER).depends_on


@pytest.mark.program
def test_the_control_plane_logs_are_kept_with_the_key_that_decrypts_them() -> None:
    assert build(spec())[0].one(LOG_GROUP).retain_on_delete is True
    assert build(spec({"protectStateful": False}))[0].one(LOG_GROUP).retain_on_delete is False
    assert build(spec())[0].one(LOG_GROUP).inputs["retentionInDays"] == 365


@pytest.mark.program
def test_cloudwatch_logs_may_use_the_key_for_this_clusters_log_groups_only() -> None:
    policy = json.loads(build(spec())[0].one(KMS_KEY).inputs["policy"])
    (logs,) = [s for s in policy["Statement"] if s["Sid"] == "CloudWatchLogsEncryptsTheClustersLogGroups"]
    assert logs["Principal"] == {"Service": "logs.us-east-1.amazonaws.com"}
    assert logs["Condition"] == {
        "ArnEquals": {
            "kms:EncryptionContext:aws:logs:arn": [
                "arn:aws:logs:us-east-1:123456789012:log-group:/aws/eks/demo/cluster",
                "arn:aws:logs:us-east-1:123456789012:log-group:/aws/vpc/demo/flow-logs",
            ]
        }
    }


# ----------------------------------------------------------------------------------------- deployer access
@pytest.mark.program
def test_the_deployer_gets_an_explicit_cluster_admin_entry_instead_of_the_creators_implicit_one() -> None:
    run, seen = build(spec())
    assert cluster_inputs(run)["accessConfig"]["bootstrapClusterCreatorAdminPermissions"] is False
    # A cluster created with it on is not replaced for it (the provider replaces on any change of this input).
    assert "accessConfig.bootstrapClusterCreatorAdminPermissions" in run.one(EKS_CLUSTER).ignore_changes
    entry = run.one(ENTRY, "demo-deployer")
    assert entry.inputs["principalArn"] == OFFLINE_DEPLOYER
    assert entry.inputs["type"] == "STANDARD"
    association = run.one(ASSOCIATION, "demo-deployer")
    assert association.inputs["policyArn"] == CLUSTER_ADMIN
    assert association.inputs["accessScope"] == {"type": "cluster"}
    assert [type(r) for r in seen["deployer_access"]] == [aws.eks.AccessEntry, aws.eks.AccessPolicyAssociation]


class AssumedRoleMocks(PlanMocks):
    """The deployer is a session of a role, as with SSO or `aws sts assume-role`."""

    def call(self, args: Any) -> Any:
        if args.token == "aws:index/getCallerIdentity:getCallerIdentity":
            return {**super().call(args), "arn": "arn:aws:sts::123456789012:assumed-role/platform-deploy/alice"}
        return super().call(args)


@pytest.mark.program
def test_an_assumed_role_session_gets_the_entry_of_its_role(monkeypatch: pytest.MonkeyPatch) -> None:
    """An access entry names a role, never an STS session (which changes with every login)."""
    monkeypatch.setattr(runner, "PlanMocks", AssumedRoleMocks)
    run, _ = build.__wrapped__(spec())  # type: ignore[attr-defined]
    assert run.one(ENTRY, "demo-deployer").inputs["principalArn"] == "arn:aws:iam::123456789012:role/platform-deploy"


@pytest.mark.program
def test_a_deployer_listed_as_cluster_admin_keeps_its_one_entry() -> None:
    """A second entry for the same principal fails (ResourceInUseException): the listed one serves the deployer."""
    run, seen = build(spec({"admins": [{"principalArn": OFFLINE_DEPLOYER}]}))
    assert [e.inputs["principalArn"] for e in run.of_type(ENTRY)] == [OFFLINE_DEPLOYER]
    associations = run.of_type(ASSOCIATION)
    assert [a.inputs["policyArn"] for a in associations] == [CLUSTER_ADMIN]
    assert [type(r) for r in seen["deployer_access"]] == [aws.eks.AccessEntry, aws.eks.AccessPolicyAssociation]


@pytest.mark.program
def test_a_deployer_listed_with_a_lesser_policy_also_gets_cluster_admin_on_the_same_entry() -> None:
    run, seen = build(spec({"admins": [{"principalArn": OFFLINE_DEPLOYER, "policy": "AmazonEKSViewPolicy"}]}))
    assert [e.inputs["principalArn"] for e in run.of_type(ENTRY)] == [OFFLINE_DEPLOYER]
    policies = sorted(a.inputs["policyArn"] for a in run.of_type(ASSOCIATION))
    assert policies == [CLUSTER_ADMIN, "arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy"]
    assert [type(r) for r in seen["deployer_access"]] == [aws.eks.AccessEntry, aws.eks.AccessPolicyAssociation]


@pytest.mark.program
def test_kubernetes_objects_wait_for_the_deployers_access_entry() -> None:
    """Without its access entry the deployer's first Kubernetes call is Unauthorized."""
    run, _ = run_gpu_cluster(spec())
    provider = run.one("pulumi:providers:kubernetes", "demo-k8s")
    assert run.one(ENTRY, "demo-deployer").urn in provider.depends_on
    assert run.one(ASSOCIATION, "demo-deployer").urn in provider.depends_on


@pytest.mark.program
def test_a_configured_deployer_gets_the_entry_whoever_runs_the_program() -> None:
    """Previews from a pull-request role must not move the entry away from the deploy role."""
    deployer = "arn:aws:iam::123456789012:role/ci/platform-deploy"
    run, _ = build(spec({"deployerPrincipalArn": deployer}))
    assert run.one(ENTRY, "demo-deployer").inputs["principalArn"] == deployer
    assert OFFLINE_DEPLOYER not in {e.inputs["principalArn"] for e in run.of_type(ENTRY)}


@pytest.mark.program
def test_moving_the_deployer_in_or_out_of_admins_keeps_its_entry_state() -> None:
    """Renaming the deployer's entry would create the new one first, for a principal that already has an entry
    (ResourceInUseException): each name answers to the other through an alias, so the move is an update."""
    listed, _ = build(spec({"admins": [{"principalArn": OFFLINE_DEPLOYER}]}))
    admin_name = cluster_module.admin_resource_name("demo", OFFLINE_DEPLOYER)
    assert listed.one(ENTRY, admin_name).aliases == ["name=demo-deployer"]
    assert listed.one(ASSOCIATION, admin_name).aliases == ["name=demo-deployer"]
    unlisted, _ = build(spec())
    assert unlisted.one(ENTRY, "demo-deployer").aliases == [f"name={admin_name}"]
    assert unlisted.one(ASSOCIATION, "demo-deployer").aliases == [f"name={admin_name}"]


@pytest.mark.program
def test_other_admins_answer_to_no_old_name() -> None:
    run, _ = build(spec({"admins": [{"principalArn": "arn:aws:iam::123456789012:role/platform-admins"}]}))
    assert run.one(ENTRY, "demo-admin-role-platform-admins").aliases == []


@pytest.mark.program
def test_team_admins_and_editors_get_their_policy_in_their_namespaces_only() -> None:
    admins = [
        {"principalArn": "arn:aws:iam::123456789012:role/team-a-admins", "policy": "AmazonEKSAdminPolicy",
         "namespaces": ["team-a"]},
        {"principalArn": "arn:aws:iam::123456789012:role/team-a-dev", "policy": "AmazonEKSEditPolicy",
         "namespaces": ["team-a", "team-a-batch"]},
        {"principalArn": "arn:aws:iam::123456789012:role/auditors", "policy": "AmazonEKSViewPolicy"},
    ]  # fmt: skip
    run, _ = build(spec({"admins": admins}))
    scopes = {
        a.inputs["principalArn"].rsplit("/", 1)[-1]: (a.inputs["policyArn"].rsplit("/", 1)[-1], a.inputs["accessScope"])
        for a in run.of_type("aws:eks/accessPolicyAssociation:AccessPolicyAssociation")
    }
    assert scopes["team-a-admins"] == ("AmazonEKSAdminPolicy", {"type": "namespace", "namespaces": ["team-a"]})
    assert scopes["team-a-dev"] == (
        "AmazonEKSEditPolicy",
        {"type": "namespace", "namespaces": ["team-a", "team-a-batch"]},
    )
    assert scopes["auditors"] == ("AmazonEKSViewPolicy", {"type": "cluster"})
