"""Namespaces, Pod Security labels, NetworkPolicies and GPU quotas: planned once (components.planning.namespaces,
network_policies, gpu_quotas), registered by components.namespaces before anything is installed into them, and
refused by validation where a quota no pool can hold is asked for."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from blueprint.verify.context import Options
from blueprint.verify.expectations import expectations, load_spec
from blueprint.verify.pods import PodSession
from blueprint.verify.storage import probe_pod
from components.config import NetworkConfig
from components.errors import ConfigError
from components.planning.namespaces import plan_namespaces
from components.planning.stack_plan import plan_stack
from components.planning.subnets import pod_address_ranges
from tests.builders import (
    INFERENCE_POOL,
    SYSTEM_POOL,
    TRAINING_POOL,
    file_plan,
    pool,
    shipped_plan,
    stack_config,
)
from tests.charts.rendering import level_violations

CORPUS = Path(__file__).parent / "corpus"
NAMESPACE = "kubernetes:core/v1:Namespace"
NAMESPACE_PATCH = "kubernetes:core/v1:NamespacePatch"
NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
QUOTA = "kubernetes:core/v1:ResourceQuota"
RELEASE = "kubernetes:helm.sh/v3:Release"


def _of(plan: dict[str, Any], type_token: str) -> list[dict[str, Any]]:
    return [r for r in plan["resources"] if r["type"] == type_token]


def _namespaces(plan: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["inputs"]["metadata"]["name"]: r for r in _of(plan, NAMESPACE) + _of(plan, NAMESPACE_PATCH)}


def _labels(level: str, audit: str = "restricted") -> dict[str, str]:
    return {
        "app.kubernetes.io/managed-by": "gpu-clusters",
        "pod-security.kubernetes.io/enforce": level,
        "pod-security.kubernetes.io/enforce-version": "v1.35",
        "pod-security.kubernetes.io/audit": audit,
        "pod-security.kubernetes.io/audit-version": "v1.35",
        "pod-security.kubernetes.io/warn": level,
        "pod-security.kubernetes.io/warn-version": "v1.35",
    }


# ------------------------------------------------------------------------------------------------ Pod Security
@pytest.mark.program
@pytest.mark.parametrize(
    ("stack", "levels"),
    [
        # every shipped stack has gated GPU pools, so the health loop's namespace (its DCGM check adds SYS_ADMIN)
        (
            "training",
            {
                "training": "restricted",
                "kueue-system": "restricted",
                "jobset-system": "restricted",
                "monitoring": "privileged",
                "node-health": "privileged",
            },
        ),
        ("smoke", {"smoke": "restricted", "kueue-system": "restricted", "node-health": "privileged"}),
        (
            "inference",
            {
                "inference": "restricted",
                "keda": "restricted",
                "envoy-gateway-system": "restricted",
                "kueue-system": "restricted",
                "monitoring": "privileged",
                "node-health": "privileged",
            },
        ),
        (
            "hybrid",
            {
                "inference": "restricted",
                "training": "restricted",
                "keda": "restricted",
                "envoy-gateway-system": "restricted",
                "kueue-system": "restricted",
                "jobset-system": "restricted",
                "monitoring": "privileged",
                "node-health": "privileged",
            },
        ),
    ],
)
def test_every_namespace_the_stack_creates_carries_its_pod_security_labels(stack: str, levels: dict[str, str]) -> None:
    namespaces = _namespaces(shipped_plan(stack))
    assert {name: r["inputs"]["metadata"]["labels"] for name, r in namespaces.items()} == {
        name: _labels(level) for name, level in levels.items()
    }


@pytest.mark.program
@pytest.mark.parametrize("stack", ["training", "inference", "hybrid", "smoke"])
def test_releases_install_into_namespaces_the_stack_made_first(stack: str) -> None:
    """No release creates its namespace (Helm would create it without labels); each waits for the stack's own
    Namespace, except kube-system, which Kubernetes owns."""
    plan = shipped_plan(stack)
    namespaces = {name: r["urn"] for name, r in _namespaces(plan).items()}
    for release in _of(plan, RELEASE):
        inputs = release["inputs"]
        assert not inputs.get("createNamespace"), release["name"]
        if inputs["namespace"] == "kube-system":
            continue
        assert namespaces[inputs["namespace"]] in release["options"]["dependsOn"], release["name"]


@pytest.mark.program
def test_every_namespace_an_object_lands_in_is_planned() -> None:
    """Whatever the stack registers in a namespace, that namespace is in the plan's list (with its level)."""
    for stack in ("training", "inference", "hybrid", "smoke"):
        plan = shipped_plan(stack)
        used = {r["inputs"]["namespace"] for r in _of(plan, RELEASE)}
        used |= {
            (r["inputs"].get("metadata") or {}).get("namespace")
            for r in plan["resources"]
            if r["type"].startswith("kubernetes:") and r["type"] not in (NAMESPACE, NAMESPACE_PATCH)
        } - {None}
        assert used <= set(_namespaces(plan)) | {"kube-system"}, stack


def test_claims_in_default_label_it_by_patch_and_the_plan_names_every_privileged_namespace() -> None:
    spec = stack_config(
        SYSTEM_POOL,
        TRAINING_POOL,
        pool(TRAINING_POOL, name="mig", devicePlugin={"migDevices": {"1g.10gb": 7}}),
        storage={"lustre": {}},
        addons={"monitoring": {"containerInsights": True}},
    )
    stack_plan = plan_stack(spec)
    by_name = {n.name: n for n in stack_plan.namespaces}
    assert by_name["default"].ownership == "patched" and by_name["default"].level == "restricted"
    privileged = {n.name for n in stack_plan.namespaces if n.level == "privileged"}
    assert privileged == {"kube-system", "amazon-cloudwatch", "nvidia-mig-manager", "node-health"}
    assert all(by_name[name].reason for name in privileged)
    assert not by_name["kube-system"].labelled and not by_name["amazon-cloudwatch"].labelled


# ------------------------------------------------------------------------------------------------ NetworkPolicy
@pytest.mark.program
def test_the_vpc_cni_enforces_network_policies_in_every_stack() -> None:
    for stack in ("training", "inference", "hybrid", "smoke"):
        (vpc_cni,) = [
            r for r in _of(shipped_plan(stack), "aws:eks/addon:Addon") if r["inputs"]["addonName"] == "vpc-cni"
        ]
        assert json.loads(vpc_cni["inputs"]["configurationValues"])["enableNetworkPolicy"] == "true"


@pytest.mark.program
def test_cilium_enforces_them_on_hybrid_nodes() -> None:
    (cilium,) = [r for r in _of(shipped_plan("hybrid"), RELEASE) if r["inputs"]["name"] == "cilium"]
    assert cilium["inputs"]["values"]["policyEnforcementMode"] == "default"


def _policies(plan: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (r["inputs"]["metadata"]["namespace"], r["inputs"]["metadata"]["name"]): r["inputs"]["spec"]
        for r in _of(plan, NETWORK_POLICY)
    }


@pytest.mark.program
def test_workload_namespaces_deny_ingress_but_from_themselves_and_prometheus() -> None:
    policies = _policies(shipped_plan("inference"))
    assert policies["inference", "default-deny-ingress"] == {"podSelector": {}, "policyTypes": ["Ingress"]}
    assert policies["inference", "allow-same-namespace"] == {
        "podSelector": {},
        "policyTypes": ["Ingress"],
        "ingress": [{"from": [{"podSelector": {}}]}],
    }
    assert policies["inference", "allow-prometheus-scrapes"]["ingress"] == [
        {
            "from": [
                {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
                    "podSelector": {
                        "matchLabels": {
                            "app.kubernetes.io/name": "prometheus",
                            "operator.prometheus.io/name": "kube-prometheus-stack-prometheus",
                        }
                    },
                }
            ]
        }
    ]
    # Without Prometheus (smoke: Container Insights) there is nothing to admit from monitoring.
    smoke = _policies(shipped_plan("smoke"))
    assert {key for key in smoke if key[0] in ("smoke", "node-health")} == {
        ("smoke", "default-deny-ingress"),
        ("smoke", "allow-same-namespace"),
        ("node-health", "default-deny-ingress"),
    }
    # The training stack's Prometheus scrapes the reference job's workers in their namespace.
    # (`jobset-system` admits the API server to JobSet's webhook: tests/test_training_job.py)
    assert ("training", "allow-prometheus-scrapes") in _policies(shipped_plan("training"))


@pytest.mark.program
def test_monitoring_admits_only_its_clients() -> None:
    policies = _policies(shipped_plan("inference"))
    prometheus = policies["monitoring", "prometheus-clients"]
    assert prometheus["podSelector"]["matchLabels"]["app.kubernetes.io/name"] == "prometheus"
    assert prometheus["ingress"] == [
        {"from": [{"podSelector": {}}]},
        {
            "from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "keda"}}}],
            "ports": [{"protocol": "TCP", "port": 9090}],
        },
    ]
    for name in ("alertmanager-clients", "grafana-clients"):
        assert policies["monitoring", name]["ingress"] == [{"from": [{"podSelector": {}}]}]
    assert not any(ns == "keda" for ns, _ in policies), "the API server calls KEDA's metrics server and webhooks"


#: The hybrid stack's EC2 pod addresses: its private subnets (10.0.0.0/16 in two AZs, a /19 each), and its A40
#: servers' node network, the address Cilium masquerades their pods' connections to.
HYBRID_EC2_PODS = [{"ipBlock": {"cidr": "10.0.0.0/19"}}, {"ipBlock": {"cidr": "10.0.32.0/19"}}]
HYBRID_NODES = [{"ipBlock": {"cidr": "192.168.100.0/24"}}]


@pytest.mark.program
def test_a_namespace_on_a_hybrid_pool_admits_the_other_network_by_address() -> None:
    """Cilium cannot match an EC2 pod by selector, nor the VPC CNI a masqueraded hybrid pod: `inference` holds the
    A40 servers' pods, so its own pods and Prometheus are admitted by address too; `training` (p5 only) is not."""
    policies = _policies(shipped_plan("hybrid"))
    same = policies["inference", "allow-same-namespace"]["ingress"]
    assert same == [{"from": [{"podSelector": {}}, *HYBRID_EC2_PODS, *HYBRID_NODES]}]
    scrapes = policies["inference", "allow-prometheus-scrapes"]["ingress"]
    assert scrapes[0]["from"][1:] == HYBRID_EC2_PODS
    for name in ("allow-same-namespace", "allow-prometheus-scrapes"):
        assert not any("ipBlock" in peer for rule in policies["training", name]["ingress"] for peer in rule["from"])
    for (ns, name), spec in policies.items():
        if ns == "monitoring":  # Prometheus, Alertmanager and Grafana run on the system pool
            assert not any("ipBlock" in peer for rule in spec["ingress"] for peer in rule["from"]), name


@pytest.mark.program
@pytest.mark.parametrize("stack", ["training", "inference", "smoke"])
def test_ec2_only_stacks_admit_nothing_by_address(stack: str) -> None:
    for (ns, name), spec in _policies(shipped_plan(stack)).items():
        peers = [peer for rule in spec.get("ingress", []) for peer in rule.get("from", [])]
        assert not any("ipBlock" in peer for peer in peers), (ns, name)


def test_an_existing_vpc_is_admitted_by_its_cidr() -> None:
    """The stack knows an existing VPC's subnets only by id: its pods are anywhere in the VPC CIDR."""
    existing = NetworkConfig.model_validate(
        {
            "vpcCidr": "10.20.0.0/16",
            "existingVpc": {
                "vpcId": "vpc-0123456789abcdef0",
                "privateSubnetIds": {"us-east-1a": "subnet-0000000a", "us-east-1b": "subnet-0000000b"},
            },
        }
    )
    assert pod_address_ranges(existing) == ["10.20.0.0/16"]


@pytest.mark.program
def test_policies_wait_for_their_namespace() -> None:
    plan = shipped_plan("inference")
    namespaces = {name: r["urn"] for name, r in _namespaces(plan).items()}
    for policy in _of(plan, NETWORK_POLICY) + _of(plan, QUOTA):
        assert namespaces[policy["inputs"]["metadata"]["namespace"]] in policy["options"]["dependsOn"]


# --------------------------------------------------------------------------------------------------- GPU quotas
@pytest.mark.program
@pytest.mark.parametrize(
    ("stack", "hard"),
    [
        # 4 x p5.48xlarge: 32 GPUs, 32 EFA devices each
        ("training", {"training": {"requests.nvidia.com/gpu": "32", "requests.vpc.amazonaws.com/efa": "128"}}),
        # 8 x g6e.12xlarge: 4 GPUs each, no EFA wired
        ("inference", {"inference": {"requests.nvidia.com/gpu": "32"}}),
        # Lustre's clients: 2 x p5; the NFS claim and the serving workload: 4 A40 servers x 4
        (
            "hybrid",
            {
                "training": {"requests.nvidia.com/gpu": "16", "requests.vpc.amazonaws.com/efa": "64"},
                "inference": {"requests.nvidia.com/gpu": "16"},
            },
        ),
    ],
)
def test_each_workload_namespace_gets_a_gpu_quota_of_what_its_pools_hold(
    stack: str, hard: dict[str, dict[str, str]]
) -> None:
    quotas = {r["inputs"]["metadata"]["namespace"]: r["inputs"] for r in _of(shipped_plan(stack), QUOTA)}
    assert {ns: q["spec"]["hard"] for ns, q in quotas.items()} == hard
    assert {q["metadata"]["name"] for q in quotas.values()} == {"gpus"}


def _quota_stack(quotas: dict[str, Any], **storage: Any) -> Any:
    return stack_config(
        SYSTEM_POOL,
        TRAINING_POOL,
        INFERENCE_POOL,
        validated=True,
        storage=storage
        or {
            "lustre": {"kubernetes": {"namespace": "training"}},
            "nfs": {"kind": "efs", "kubernetes": {"namespace": "inference"}},
        },
        addons={"monitoring": {"containerInsights": False, "dcgmPrometheus": True}},
        workloads={
            "serving": [{"name": "chat", "pool": "l40s", "model": "m", "replicas": {"min": 3}}],
            "quotas": quotas,
        },
    )


def test_a_configured_quota_lowers_the_default() -> None:
    spec = _quota_stack({"training": {"gpus": 8, "efaDevices": 32}, "inference": {"gpus": 3}})
    quotas = {n.name: n.quota for n in plan_stack(spec).namespaces if n.quota is not None}
    assert quotas["training"] is not None and quotas["training"].hard == {
        "requests.nvidia.com/gpu": "8",
        "requests.vpc.amazonaws.com/efa": "32",
    }
    assert quotas["inference"] is not None and quotas["inference"].hard == {"requests.nvidia.com/gpu": "3"}


def _problems(build: Any) -> dict[str, str]:
    with pytest.raises(ConfigError) as caught:
        build()
    return {p.path: p.message for p in caught.value.problems}


def test_validation_refuses_a_quota_no_pool_can_hold() -> None:
    problems = _problems(
        lambda: _quota_stack(
            {
                "training": {"gpus": 33, "efaDevices": 129},
                "inference": {"gpus": 2, "efaDevices": 1},
                "research": {"gpus": 1},
            }
        )
    )
    assert "no pool can hold that quota: at most 32" in problems["workloads.quotas.training.gpus"]
    assert "at most 128" in problems["workloads.quotas.training.efaDevices"]
    assert "need at their minimum replicas: at least 3" in problems["workloads.quotas.inference.gpus"]
    assert "none of them wires EFA" in problems["workloads.quotas.inference.efaDevices"]
    assert "not a workload namespace" in problems["workloads.quotas.research"]


def test_validation_refuses_a_claim_in_a_system_or_add_on_namespace() -> None:
    problems = _problems(
        lambda: _quota_stack(
            {},
            lustre={"kubernetes": {"namespace": "kube-system"}},
            nfs={"kind": "efs", "kubernetes": {"namespace": "monitoring"}},
        )
    )
    assert "not a workload namespace" in problems["storage.lustre.kubernetes.namespace"]
    assert "not a workload namespace" in problems["storage.nfs.kubernetes.namespace"]


def test_the_plan_is_derived_once_from_the_stack_plan() -> None:
    spec = _quota_stack({})
    stack_plan = plan_stack(spec)
    assert stack_plan.namespaces == plan_namespaces(spec, stack_plan.pools, stack_plan.addons)


# ------------------------------------------------------------------------- the chart tests' Pod Security checks
RESTRICTED_POD: dict[str, Any] = {
    "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
    "containers": [
        {
            "name": "app",
            "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        }
    ],
    "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "weights"}}],
}


def test_the_restricted_check_passes_a_restricted_pod_and_names_what_is_not() -> None:
    assert level_violations(RESTRICTED_POD, "restricted") == []
    loose = {
        "containers": [{"name": "app", "securityContext": {"runAsUser": 0, "capabilities": {"add": ["NET_ADMIN"]}}}],
        "volumes": [{"name": "host", "hostPath": {"path": "/"}}],
    }
    found = level_violations(loose, "restricted")
    assert "hostPath volume host" in found  # baseline already refuses it
    assert "container app adds ['NET_ADMIN']" in found
    assert "container app may escalate privileges" in found
    assert "container app runs as UID 0" in found
    assert "container app has seccomp profile None" in found
    assert "container app does not drop ALL capabilities" in found
    assert level_violations(loose, "privileged") == []


@pytest.mark.program
@pytest.mark.parametrize("stack", ["training", "inference", "hybrid", "smoke"])
def test_the_stacks_own_pods_meet_their_namespaces_level(stack: str) -> None:
    plan = shipped_plan(stack)
    levels = {
        name: r["inputs"]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"]
        for name, r in _namespaces(plan).items()
    }
    refused = set()
    for resource in plan["resources"]:
        if resource["type"] not in ("kubernetes:apps/v1:Deployment", "kubernetes:apps/v1:DaemonSet"):
            continue
        meta = resource["inputs"]["metadata"]
        spec = resource["inputs"]["spec"]["template"]["spec"]
        if level_violations(spec, levels.get(meta["namespace"], "privileged")):
            refused.add((stack, meta["namespace"], resource["type"].rsplit(":", 1)[1], meta["name"]))
    # and `blueprint verify`'s storage probe, which runs in each claim's namespace
    expect = expectations(load_spec(stack, None))
    session = PodSession(api=None, run_id="r1", namespace="default")  # type: ignore[arg-type]  # builds, never calls
    for fs in expect.storage:
        for mounting in (p for p in expect.pools if p.name in fs.pools):
            for read_only in (False, True):
                body = probe_pod(session, Options(), fs, mounting, read_only)
                if level_violations(body["spec"], levels.get(fs.namespace, "privileged")):
                    refused.add((stack, fs.namespace, "blueprint verify storage probe", mounting.name))
    assert refused == set()


# ----------------------------------------------------------------------------------------------- team namespaces
TEAMS = CORPUS / "good" / "team-namespaces.yaml"
ACCESS_SCOPE = "aws:eks/accessPolicyAssociation:AccessPolicyAssociation"


@pytest.mark.program
def test_a_team_namespace_is_created_restricted_with_its_policies_and_quota() -> None:
    """`workloads.namespaces` gives a second team what a claim namespace has: the restricted labels, default-deny
    with the same-namespace and Prometheus allows, and a GPU quota over the pools it names, lowered as configured."""
    plan = file_plan(TEAMS)
    namespaces = _namespaces(plan)
    assert namespaces["research"]["inputs"]["metadata"]["labels"] == _labels("restricted")
    policies = _policies(plan)
    assert {name for ns, name in policies if ns == "research"} == {
        "default-deny-ingress",
        "allow-same-namespace",
        "allow-prometheus-scrapes",
    }
    assert policies["research", "default-deny-ingress"] == {"podSelector": {}, "policyTypes": ["Ingress"]}
    quotas = {r["inputs"]["metadata"]["namespace"]: r for r in _of(plan, QUOTA)}
    # 8 configured of the 16 GPUs 4 x g6e.12xlarge hold; no EFA on that pool, so no EFA quota
    assert quotas["research"]["inputs"]["spec"]["hard"] == {"requests.nvidia.com/gpu": "8"}
    assert namespaces["research"]["urn"] in quotas["research"]["options"]["dependsOn"]
    # The claim namespace keeps its own quota: 2 x p5.48xlarge
    assert quotas["training"]["inputs"]["spec"]["hard"] == {
        "requests.nvidia.com/gpu": "16",
        "requests.vpc.amazonaws.com/efa": "64",
    }


@pytest.mark.program
def test_a_team_namespace_takes_a_namespace_scoped_access_entry() -> None:
    (association,) = [
        r for r in _of(file_plan(TEAMS), ACCESS_SCOPE) if r["inputs"]["principalArn"].endswith(":role/research-dev")
    ]
    assert association["inputs"]["accessScope"] == {"type": "namespace", "namespaces": ["research"]}


def test_a_team_namespace_without_pools_counts_every_gpu_pool() -> None:
    spec = stack_config(
        SYSTEM_POOL,
        TRAINING_POOL,
        pool(INFERENCE_POOL, scaling={"min": 0, "max": 8, "mode": "cluster-autoscaler"}),
        validated=True,
        workloads={"namespaces": [{"name": "research"}]},
    )
    quotas = {n.name: n.quota for n in plan_stack(spec).namespaces if n.quota is not None}
    research = quotas["research"]
    assert research is not None and research.pools == ("h100", "l40s")
    # 4 x p5.48xlarge (8 GPUs, 32 EFA devices) + 8 x g6e.12xlarge (4 GPUs)
    assert research.hard == {"requests.nvidia.com/gpu": "64", "requests.vpc.amazonaws.com/efa": "128"}


def test_validation_lets_admins_and_quotas_name_team_namespaces_and_nothing_else() -> None:
    problems = _problems(
        lambda: stack_config(
            SYSTEM_POOL,
            TRAINING_POOL,
            validated=True,
            cluster={
                "admins": [
                    {
                        "principalArn": "arn:aws:iam::123456789012:role/research",
                        "policy": "AmazonEKSEditPolicy",
                        "namespaces": ["research", "reserch-b"],
                    }
                ]
            },
            workloads={
                "namespaces": [{"name": "research"}, {"name": "research-b", "pools": ["h100"]}],
                "quotas": {"research": {"gpus": 8}, "research-b": {"gpus": 33}, "reserch": {"gpus": 1}},
            },
        )
    )
    assert set(problems) == {
        "cluster.admins[0].namespaces[1]",
        "workloads.quotas.research-b.gpus",
        "workloads.quotas.reserch",
    }
    assert "(did you mean research-b?)" in problems["cluster.admins[0].namespaces[1]"]
    assert "at most 32" in problems["workloads.quotas.research-b.gpus"]
    assert "(did you mean research?)" in problems["workloads.quotas.reserch"]


def test_a_team_naming_an_unknown_pool_is_reported_once_not_again_as_its_quota() -> None:
    problems = _problems(
        lambda: stack_config(
            SYSTEM_POOL,
            TRAINING_POOL,
            validated=True,
            workloads={"namespaces": [{"name": "research", "pools": ["h10"]}], "quotas": {"research": {"gpus": 8}}},
        )
    )
    assert set(problems) == {"workloads.namespaces[0].pools[0]"}
    assert "did you mean h100?" in problems["workloads.namespaces[0].pools[0]"]
