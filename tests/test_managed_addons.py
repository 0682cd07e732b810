"""EKS managed add-ons: names, versions (catalog or stack pins), configuration values, the EBS CSI role, ordering."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pulumi_aws as aws
import pytest

from blueprint import plan
from blueprint.plan.mocks import PlanMocks
from blueprint.plan.runner import ProgramRun
from components.catalog import versions
from components.config import StackConfig
from components.context import ClusterContext
from components.errors import ConfigError
from components.identity import PodIdentityRoles
from components.managed_addons import NODE_AGENT_ADDONS, SYSTEM_ADDONS, ManagedAddons
from components.planning.max_pods import VPC_CNI_PREFIX_DELEGATION
from components.planning.stack_plan import plan_pools
from tests.builders import (
    AUTOSCALING_GROUP,
    EKS_ADDON,
    IAM_ROLE,
    ROLE_POLICY,
    ROLE_POLICY_ATTACHMENT,
    SYSTEM_DEFAULT_SCALING,
    run_with_context,
    stack_config,
)
from tests.fakes import KMS_KEY_ARN

pytestmark = pytest.mark.program

SYSTEM_POOL = SYSTEM_DEFAULT_SCALING


def spec(pins: dict[str, str] | None = None, version: str = "1.35") -> StackConfig:
    return stack_config(SYSTEM_POOL, cluster={"kubernetesVersion": version}, addons={"managed": {"pins": pins or {}}})


class RecordingMocks(PlanMocks):
    """PlanMocks that also keep every invoke's arguments."""

    invokes: list[tuple[str, dict[str, Any]]] = []

    def call(self, args: Any) -> Any:
        RecordingMocks.invokes.append((args.token, dict(args.args)))
        return super().call(args)


@pytest.fixture
def invokes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, Any]]]:
    RecordingMocks.invokes = []
    monkeypatch.setattr(plan.runner, "PlanMocks", RecordingMocks)
    return RecordingMocks.invokes


def build(config: StackConfig, addons: tuple[str, ...], with_system_pool: bool = False) -> ProgramRun:
    def program(ctx: ClusterContext) -> None:
        ctx = dataclasses.replace(
            ctx,
            pod_identity_role=PodIdentityRoles(
                ctx.cluster_name, "demo", ctx.partition, ctx.tags, ctx.account_id, ctx.cluster_arn
            ),
        )
        # Stands in for the system pool's Auto Scaling group (a custom resource, as node pools hand over).
        after = [aws.autoscaling.Group("system-pool", max_size=2, min_size=2)] if with_system_pool else []
        ManagedAddons("demo-addons", ctx, addons, after=after)

    return run_with_context(config, program)


def addon(run: ProgramRun, name: str) -> dict[str, Any]:
    return run.one(EKS_ADDON, f"demo-{name}").inputs


def configuration(run: ProgramRun, name: str) -> dict[str, Any]:
    return dict(json.loads(addon(run, name)["configurationValues"]))


def test_node_agents_and_system_addons_by_name() -> None:
    agents = build(spec(), NODE_AGENT_ADDONS)
    assert {a.inputs["addonName"] for a in agents.of_type(EKS_ADDON)} == {
        "vpc-cni",
        "kube-proxy",
        "eks-pod-identity-agent",
    }
    system = build(spec(), SYSTEM_ADDONS)
    assert {a.inputs["addonName"] for a in system.of_type(EKS_ADDON)} == {"coredns", "aws-ebs-csi-driver"}
    for a in [*agents.of_type(EKS_ADDON), *system.of_type(EKS_ADDON)]:
        assert a.inputs["resolveConflictsOnCreate"] == "OVERWRITE"
        assert a.inputs["clusterName"] == "demo"


def test_unpinned_versions_are_the_catalog_pins_for_the_cluster_version(invokes: list[Any]) -> None:
    """EKS is never asked for its default version: it moves when AWS publishes a build, and with OVERWRITE an
    unrelated `pulumi up` would upgrade every add-on."""
    run = build(spec(version="1.34"), (*NODE_AGENT_ADDONS, *SYSTEM_ADDONS))
    for name in (*NODE_AGENT_ADDONS, *SYSTEM_ADDONS):
        assert addon(run, name)["addonVersion"] == versions.managed_addon_version(name, "1.34")
    assert addon(run, "kube-proxy")["addonVersion"] == "v1.34.6-eksbuild.29"
    assert not [token for token, _ in invokes if token.startswith("aws:eks/")]


def test_a_pin_wins(invokes: list[Any]) -> None:
    run = build(spec({"vpc-cni": "v1.20.4-eksbuild.1"}), NODE_AGENT_ADDONS)
    assert addon(run, "vpc-cni")["addonVersion"] == "v1.20.4-eksbuild.1"
    assert addon(run, "kube-proxy")["addonVersion"] == versions.managed_addon_version("kube-proxy", "1.35")
    assert not [token for token, _ in invokes if token.startswith("aws:eks/")]


def test_a_vpc_cni_pin_below_the_efa_only_minimum_is_refused() -> None:
    with pytest.raises(ConfigError) as raised:
        build(spec({"vpc-cni": "v1.18.4-eksbuild.1"}), NODE_AGENT_ADDONS)
    (problem,) = raised.value.problems
    assert problem.path == "addons.managed.pins.vpc-cni"
    assert "v1.18.5" in problem.message


def test_vpc_cni_prefix_delegation_is_the_one_max_pods_assumes() -> None:
    """Every node's maxPods is computed for the CNI's addressing mode, so the add-on states it rather than
    inheriting a default that someone may have changed on the cluster."""
    config = configuration(build(spec(), NODE_AGENT_ADDONS), "vpc-cni")
    assert config["env"] == {"ENABLE_PREFIX_DELEGATION": str(VPC_CNI_PREFIX_DELEGATION).lower()}


def test_vpc_cni_stays_off_hybrid_and_fargate_nodes() -> None:
    config = configuration(build(spec(), NODE_AGENT_ADDONS), "vpc-cni")
    terms = config["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    (term,) = terms
    exclusion = next(e for e in term["matchExpressions"] if e["key"] == "eks.amazonaws.com/compute-type")
    assert exclusion["operator"] == "NotIn"
    assert set(exclusion["values"]) == {"hybrid", "fargate"}
    assert "configurationValues" not in addon(build(spec(), NODE_AGENT_ADDONS), "kube-proxy")


def test_coredns_runs_two_replicas_on_the_system_pool() -> None:
    config = configuration(build(spec(), SYSTEM_ADDONS), "coredns")
    assert config["replicaCount"] == 2
    system_labels = next(p for p in plan_pools(spec()) if p.role == "system").labels
    # The selector matches the labels the system pool's nodes register with, and nothing a GPU pool adds.
    assert config["nodeSelector"].items() <= system_labels.items()
    assert {"key": "CriticalAddonsOnly", "operator": "Exists"} in config["tolerations"]


def test_ebs_csi_controller_on_the_system_pool() -> None:
    config = configuration(build(spec(), SYSTEM_ADDONS), "aws-ebs-csi-driver")
    system_labels = next(p for p in plan_pools(spec()) if p.role == "system").labels
    assert config["controller"]["nodeSelector"].items() <= system_labels.items()
    assert "node" not in config  # the node DaemonSet keeps tolerating every taint (GPU pods mount EBS too)


def test_ebs_csi_gets_its_pod_identity_role_with_the_managed_policy_and_the_cluster_key() -> None:
    run = build(spec(), SYSTEM_ADDONS)
    association = run.one("aws:eks/podIdentityAssociation:PodIdentityAssociation", "demo-ebs-csi")
    assert (association.inputs["namespace"], association.inputs["serviceAccount"]) == (
        "kube-system",
        "ebs-csi-controller-sa",
    )
    attachment = run.one(ROLE_POLICY_ATTACHMENT)
    assert attachment.inputs["policyArn"] == "arn:aws:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy"
    inline = json.loads(run.one(ROLE_POLICY, "demo-ebs-csi").inputs["policy"])
    assert {s["Resource"] for s in inline["Statement"]} == {KMS_KEY_ARN}
    # The add-on starts its controller only once the association exists, so the pods get credentials.
    assert association.urn in run.one(EKS_ADDON, "demo-aws-ebs-csi-driver").depends_on


def test_vpc_cni_gets_the_cni_policy_through_pod_identity_on_aws_node() -> None:
    run = build(spec(), NODE_AGENT_ADDONS)
    association = run.one("aws:eks/podIdentityAssociation:PodIdentityAssociation", "demo-vpc-cni")
    assert (association.inputs["namespace"], association.inputs["serviceAccount"]) == ("kube-system", "aws-node")
    role = run.one(IAM_ROLE, "demo-vpc-cni")
    assert association.property_dependencies["roleArn"] == [role.urn]
    (statement,) = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
    assert statement["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert sorted(statement["Action"]) == ["sts:AssumeRole", "sts:TagSession"]
    conditions = statement["Condition"]["StringEquals"]
    assert conditions["aws:SourceAccount"] == "123456789012"
    assert conditions["aws:RequestTag/kubernetes-namespace"] == "kube-system"
    assert conditions["aws:RequestTag/kubernetes-service-account"] == "aws-node"
    (attachment,) = run.of_type(ROLE_POLICY_ATTACHMENT)
    assert attachment.inputs["policyArn"] == "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy"
    # The first aws-node pods are admitted with Pod Identity credentials: the add-on waits for the association.
    assert association.urn in run.one(EKS_ADDON, "demo-vpc-cni").depends_on
    # The other node agents have no role.
    assert {a.name for a in run.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")} == {"demo-vpc-cni"}


def test_system_addons_wait_for_what_they_are_given() -> None:
    run = build(spec(), SYSTEM_ADDONS, with_system_pool=True)
    pool = run.one(AUTOSCALING_GROUP, "system-pool").urn
    for name in SYSTEM_ADDONS:
        assert pool in run.one(EKS_ADDON, f"demo-{name}").depends_on
    agents = build(spec(), NODE_AGENT_ADDONS)
    # No node agent waits for a node; the VPC CNI waits only for its own Pod Identity role and association.
    identity = {r.urn for r in agents.of_type(IAM_ROLE)} | {
        r.urn for r in agents.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")
    }
    assert {a.name: set(a.depends_on) for a in agents.of_type(EKS_ADDON)} == {
        "demo-vpc-cni": identity,
        "demo-kube-proxy": set(),
        "demo-eks-pod-identity-agent": set(),
    }


def test_unknown_addon_names_are_refused() -> None:
    with pytest.raises(KeyError, match="vpc-cin"):
        build(spec(), ("vpc-cin",))


#: The EKS add-ons whose node DaemonSet every node needs before the health gate's check pod can run (aws-node gives
#: it an IP; kube-proxy its Service routes; the Pod Identity agent, the CSI node plugins its volumes), and where
#: their defaults tolerate every taint, the startup taint included: aws-node's `tolerations: [{operator: Exists}]`
#: (aws/eks-charts stable/aws-vpc-cni templates/daemonset.yaml), the Pod Identity agent's values
#: `tolerations: [{operator: Exists}]` (stable/eks-pod-identity-agent/values.yaml), the EBS CSI node's
#: `node.tolerateAllTaints: true` (kubernetes-sigs/aws-ebs-csi-driver chart values). kube-proxy's and the EFS node
#: plugin's defaults are EKS's manifests, not read offline. The stack must not replace them, or, where it does (the
#: FSx node plugin lists the pools' taint keys, components/storage/lustre.py), must tolerate every registration taint.
NODE_DAEMONSET_TOLERATIONS = {
    "vpc-cni": ("tolerations",),
    "kube-proxy": ("tolerations",),
    "eks-pod-identity-agent": ("tolerations", "daemonsets.cloud.tolerations", "daemonsets.hybrid.tolerations"),
    "aws-ebs-csi-driver": ("node.tolerations", "node.tolerateAllTaints"),
    "aws-efs-csi-driver": ("node.tolerations", "node.tolerateAllTaints"),
    "aws-fsx-csi-driver": ("node.tolerations", "node.tolerateAllTaints"),
}


def _lookup(values: dict[str, Any], path: str) -> Any:
    for key in path.split("."):
        if not isinstance(values, dict) or key not in values:
            return None
        values = values[key]
    return values


@pytest.mark.parametrize("stack", ["training", "inference", "hybrid", "smoke"])
def test_no_node_agent_add_on_loses_its_tolerate_every_taint_default(stack: str) -> None:
    from components.config import Taint
    from components.planning.pools import STARTUP_TAINT
    from components.planning.tolerations import tolerates
    from tests.builders import shipped_stack

    shipped = shipped_stack(stack)
    run = shipped.run
    # every taint a cloud node registers with: its pool's taints and, on a gated GPU pool, the startup taint
    taints = [STARTUP_TAINT]
    for pool in shipped.plan["summary"]["nodePools"]:
        for text in pool.get("taints") or [] if pool["kind"] == "aws" else []:
            key_value, effect = text.rsplit(":", 1)
            key, _, value = key_value.partition("=")
            taints.append(Taint(key=key, value=value, effect=effect))
    addons = {a.inputs["addonName"]: a.inputs.get("configurationValues") for a in run.of_type("aws:eks/addon:Addon")}
    assert "vpc-cni" in addons and "kube-proxy" in addons and "eks-pod-identity-agent" in addons
    for name, paths in NODE_DAEMONSET_TOLERATIONS.items():
        if name not in addons:
            continue
        values = json.loads(str(addons[name])) if addons[name] else {}
        overridden = [p for p in paths if _lookup(values, p) is not None]
        if not overridden:
            continue
        # an add-on whose tolerations the stack sets (the FSx node plugin: the pools' taint keys) must tolerate
        # every taint a cloud node registers with, the startup taint included
        (listed,) = [_lookup(values, p) for p in overridden if p.endswith(".tolerations") or p == "tolerations"]
        for taint in taints:
            assert tolerates(listed, taint), f"{stack}: {name} does not tolerate {taint}"
