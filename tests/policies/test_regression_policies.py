"""The rules that catch the regressions a threat-model review listed: world-open networks written as several CIDRs,
IAM escalation on every resource, cross-account trust without an external id, resource policies open to everyone,
a bucket without its TLS-only statement, exposed Services, pods with host access and namespaces without Pod
Security. Each with a failing and a passing fixture."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from blueprint.plan.check import check as plan_check
from tests.builders import EKS_CLUSTER, IAM_ROLE, KMS_KEY, ROLE_POLICY, SECURITY_GROUP, SG_INGRESS_RULE, file_plan
from tests.policies import resource_args, validate, validate_stack
from tests.policies.stacks import ACCOUNT, Record, find, good_stack, policy_json, record, without

QUEUE_POLICY = "aws:sqs/queuePolicy:QueuePolicy"
NAMESPACE = "kubernetes:core/v1:Namespace"
NAMESPACE_PATCH = "kubernetes:core/v1:NamespacePatch"
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
SERVICE = "kubernetes:core/v1:Service"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"


def check(policy: str, type_: str, props: dict[str, Any], name: str = "r") -> list[str]:
    return validate(policy, resource_args(type_, props, name=name))


def changed(change: Any) -> list[Record]:
    records = good_stack()
    change(records)
    return records


# ------------------------------------------------------------------------------------------ CIDRs as a union
def halves(records: list[Record], port: int = 443, protocol: str = "tcp") -> None:
    """Two ingress rules on the EFA group whose sources together are the whole IPv4 internet."""
    group = find(records, "good-efa")
    for cidr in ("0.0.0.0/1", "128.0.0.0/1"):
        records.append(
            record(
                SG_INGRESS_RULE,
                f"half-{cidr[:3]}",
                {"securityGroupId": "sg-efa", "ipProtocol": protocol, "fromPort": port, "toPort": port,
                 "cidrIpv4": cidr},
                refs={"securityGroupId": [group]},
            )
        )  # fmt: skip


def test_ingress_rules_whose_sources_cover_the_internet_together_are_world_open() -> None:
    assert validate_stack("no-public-ingress-combined", good_stack()) == []
    assert validate_stack("no-public-ingress-combined", changed(halves)) == [
        (
            "good-efa",
            "security group 'good-efa' admits tcp 443-443 from 0.0.0.0/1, 128.0.0.0/1, which together cover "
            "0.0.0.0/0: name the networks that need access",
        )
    ]


def test_halves_on_different_ports_are_not_combined() -> None:
    def apart(records: list[Record]) -> None:
        halves(records)
        find(records, "half-128")["inputs"] |= {"fromPort": 22, "toPort": 22}

    assert validate_stack("no-public-ingress-combined", changed(apart)) == []


def test_an_all_traffic_rule_counts_for_every_port() -> None:
    def mixed(records: list[Record]) -> None:
        halves(records)
        find(records, "half-128")["inputs"] = {
            "securityGroupId": "sg-efa",
            "ipProtocol": "-1",
            "cidrIpv4": "128.0.0.0/1",
        }

    [(where, message)] = validate_stack("no-public-ingress-combined", changed(mixed))
    assert where == "good-efa" and "tcp 443-443 from 0.0.0.0/1, 128.0.0.0/1" in message


def test_one_group_inline_rule_with_halves_is_world_open() -> None:
    rule = {"protocol": "tcp", "fromPort": 22, "toPort": 22, "cidrBlocks": ["0.0.0.0/1", "128.0.0.0/1"]}
    assert check("no-public-ingress", SECURITY_GROUP, {"ingress": [rule]}, name="sg") == [
        "security group 'sg' accepts ingress from 0.0.0.0/1, 128.0.0.0/1 on tcp 22-22, which together cover 0.0.0.0/0"
    ]
    assert check("no-world-admin-ports", SECURITY_GROUP, {"ingress": [rule]}, name="sg") == [
        "'sg' admits port 22 from 0.0.0.0/1, 128.0.0.0/1 (tcp 22-22)"
    ]
    private = rule | {"cidrBlocks": ["10.0.0.0/9", "10.128.0.0/9"]}
    assert check("no-public-ingress", SECURITY_GROUP, {"ingress": [private]}) == []
    assert check("no-world-admin-ports", SECURITY_GROUP, {"ingress": [private]}) == []


def test_a_public_endpoint_allow_list_that_covers_the_internet_is_refused() -> None:
    cluster = copy.deepcopy(find(good_stack(), "good")["inputs"])
    cluster["vpcConfig"] |= {"endpointPublicAccess": True, "publicAccessCidrs": ["::/1", "8000::/1", "0.0.0.0/1"]}
    assert check("eks-endpoint-private", EKS_CLUSTER, cluster, name="c") == [
        "EKS cluster 'c' opens its public API endpoint to ::/1, 8000::/1, 0.0.0.0/1, which together cover ::/0"
    ]
    cluster["vpcConfig"]["publicAccessCidrs"] = ["203.0.113.0/24"]
    assert check("eks-endpoint-private", EKS_CLUSTER, cluster) == []


# ------------------------------------------------------------------------------------------ IAM escalation
@pytest.mark.parametrize(
    "action",
    [
        "iam:PassRole",
        "iam:PutRolePolicy",
        "iam:AttachRolePolicy",
        "iam:UpdateAssumeRolePolicy",
        "sts:AssumeRole",
        "ssm:SendCommand",
        "kms:Decrypt",
        "s3:GetObject",
        "IAM:passrole",
    ],
)
def test_escalation_actions_on_every_resource_are_refused(action: str) -> None:
    def grant(records: list[Record]) -> None:
        find(records, "good-cluster-autoscaler")  # the role the policy belongs to
        policy = next(r for r in records if r["type"] == ROLE_POLICY)
        policy["inputs"]["policy"] = policy_json(
            {"Effect": "Allow", "Action": [action], "Resource": "*", "Condition": {"StringEquals": {"x": "y"}}}
        )

    assert validate_stack("iam-no-escalation-on-any-resource", good_stack()) == []
    [(where, message)] = validate_stack("iam-no-escalation-on-any-resource", changed(grant))
    assert where == "good-cluster-autoscaler"
    assert f"allows {action.split(':')[0].lower()}" in message.lower() and 'on every resource ("*")' in message


@pytest.mark.parametrize(
    ("statement", "found"),
    [
        ({"Action": "iam:*", "Resource": "*"}, "iam:PassRole, iam:PutRolePolicy"),
        ({"Action": "*", "Resource": "*"}, "iam:PassRole"),
        ({"NotAction": "iam:*", "Resource": "*"}, "sts:AssumeRole, ssm:SendCommand, kms:Decrypt, s3:GetObject"),
        ({"Action": "s3:Get*", "NotResource": "arn:aws:s3:::x/*"}, "s3:GetObject"),
    ],
)
def test_wildcards_and_not_action_count(statement: dict[str, Any], found: str) -> None:
    from policies.rules.iam import escalations

    assert ", ".join(escalations(policy_json({"Effect": "Allow", **statement}))).startswith(found)


def test_escalation_actions_on_named_resources_pass() -> None:
    from policies.rules.iam import escalations

    named = {"Effect": "Allow", "Action": ["iam:PassRole", "kms:Decrypt"], "Resource": f"arn:aws:iam::{ACCOUNT}:role/x"}
    denied = {"Effect": "Deny", "Action": "iam:PassRole", "Resource": "*"}
    assert escalations(policy_json(named, denied)) == []


# ------------------------------------------------------------------------------------------ cross-account trust
def partner_role(condition: dict[str, Any] | None) -> Record:
    statement: dict[str, Any] = {
        "Effect": "Allow",
        "Principal": {"AWS": "arn:aws:iam::999999999999:role/vendor"},
        "Action": "sts:AssumeRole",
    }
    if condition is not None:
        statement["Condition"] = condition
    return record(IAM_ROLE, "partner", {"assumeRolePolicy": policy_json(statement)})


def test_a_trust_of_another_account_needs_an_external_id() -> None:
    records = [*good_stack(), partner_role({"StringEquals": {"aws:PrincipalAccount": "999999999999"}})]
    assert validate_stack("iam-cross-account-external-id", records) == [
        ("partner", "role 'partner' trusts account 999999999999 without an sts:ExternalId condition")
    ]
    with_id = [*good_stack(), partner_role({"StringEquals": {"sts:ExternalId": "c0ffee"}})]
    assert validate_stack("iam-cross-account-external-id", with_id) == []


def test_a_trust_of_the_stacks_own_account_needs_none() -> None:
    own = record(
        IAM_ROLE,
        "ops",
        {
            "assumeRolePolicy": policy_json(
                {
                    "Effect": "Allow",
                    "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:role/ops"},
                    "Action": "sts:AssumeRole",
                }
            )
        },
    )
    assert any(r["type"] == KMS_KEY for r in good_stack())  # whose key policy names the stack's account
    assert validate_stack("iam-cross-account-external-id", [*good_stack(), own]) == []


# ------------------------------------------------------------------------------------------ resource policies
OPEN = {"Effect": "Allow", "Principal": "*", "Action": "sqs:SendMessage", "Resource": "*"}


@pytest.mark.parametrize("principal", ["*", {"AWS": "*"}, {"AWS": ["*"]}])
def test_a_queue_policy_open_to_everyone_is_refused(principal: Any) -> None:
    statement = OPEN | {"Principal": principal}
    assert check("resource-policy-no-open-principal", QUEUE_POLICY, {"policy": policy_json(statement)}) == [
        '\'r\' allows sqs:SendMessage to everyone ("Principal": "*") with no condition'
    ]


def test_a_key_policy_open_to_everyone_is_refused_and_a_condition_narrows_it() -> None:
    key = copy.deepcopy(find(good_stack(), "good-key")["inputs"])
    assert check("resource-policy-no-open-principal", KMS_KEY, key) == []
    key["policy"] = policy_json({"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "kms:*", "Resource": "*"})
    assert check("resource-policy-no-open-principal", KMS_KEY, key) == [
        '\'r\' allows kms:* to everyone ("Principal": "*") with no condition'
    ]
    narrowed = OPEN | {"Condition": {"ArnEquals": {"aws:SourceArn": "arn:aws:events:us-east-1:1:rule/x"}}}
    assert check("resource-policy-no-open-principal", QUEUE_POLICY, {"policy": policy_json(narrowed)}) == []


def test_shipped_queue_and_bucket_policies_pass(each_shipped_plan: dict[str, Any]) -> None:
    for policy in ("resource-policy-no-open-principal", "s3-tls-only", "iam-no-escalation-on-any-resource"):
        assert [v["message"] for v in each_shipped_plan["violations"] if v["policy"] == policy] == []


# ------------------------------------------------------------------------------------------ S3 TLS only
def test_a_bucket_without_its_tls_only_statement_is_refused() -> None:
    assert validate_stack("s3-tls-only", good_stack()) == []
    [(where, message)] = validate_stack("s3-tls-only", without(good_stack(), "good-checkpoints-policy"))
    assert where == "good-checkpoints" and message.startswith("bucket 'good-checkpoints' does not deny requests")


def test_a_tls_statement_that_allows_or_checks_true_does_not_count() -> None:
    def weakened(records: list[Record]) -> None:
        policy = find(records, "good-checkpoints-policy")
        document = json.loads(policy["inputs"]["policy"])
        document["Statement"][0]["Condition"] = {"Bool": {"aws:SecureTransport": "true"}}
        policy["inputs"]["policy"] = json.dumps(document)

    assert [w for w, _ in validate_stack("s3-tls-only", changed(weakened))] == ["good-checkpoints"]


# ------------------------------------------------------------------------------------------ Kubernetes objects
def test_a_load_balancer_service_needs_an_allow_list() -> None:
    service: dict[str, Any] = {"metadata": {"name": "chat"}, "spec": {"type": "LoadBalancer"}}
    assert check("k8s-service-exposure", SERVICE, service) == [
        "Service 'chat' is of type LoadBalancer without loadBalancerSourceRanges, so it admits 0.0.0.0/0"
    ]
    service["spec"]["loadBalancerSourceRanges"] = ["0.0.0.0/1", "128.0.0.0/1"]
    assert check("k8s-service-exposure", SERVICE, service) == [
        "Service 'chat' is of type LoadBalancer with source ranges 0.0.0.0/1, 128.0.0.0/1, which admit the whole "
        "internet"
    ]
    service["spec"]["loadBalancerSourceRanges"] = ["10.20.0.0/16"]
    assert check("k8s-service-exposure", SERVICE, service) == []


def test_a_node_port_service_is_refused_and_cluster_ip_passes() -> None:
    assert check("k8s-service-exposure", SERVICE, {"metadata": {"name": "x"}, "spec": {"type": "NodePort"}}) == [
        "Service 'x' is of type NodePort, which opens its port on every node with no allow-list"
    ]
    assert check("k8s-service-exposure", SERVICE, {"metadata": {"name": "x"}, "spec": {"type": "ClusterIP"}}) == []


def deployment(**pod: Any) -> dict[str, Any]:
    containers = [{"name": "app", "image": "app@sha256:" + "0" * 64}]
    return {"metadata": {"name": "app"}, "spec": {"template": {"spec": {"containers": containers, **pod}}}}


@pytest.mark.parametrize(
    ("pod", "found"),
    [
        ({"hostNetwork": True}, "hostNetwork"),
        ({"hostPID": True}, "hostPID"),
        ({"volumes": [{"name": "root", "hostPath": {"path": "/"}}]}, "hostPath volume 'root' (/)"),
        (
            {"containers": [{"name": "app", "securityContext": {"privileged": True}}]},
            "privileged container 'app'",
        ),
    ],
)
def test_a_pod_with_host_access_is_refused(pod: dict[str, Any], found: str) -> None:
    assert check("k8s-pod-host-access", DEPLOYMENT, deployment(**pod)) == [f"Deployment 'app' uses {found}"]


def test_a_restricted_pod_passes() -> None:
    restricted = {"containers": [{"name": "app", "securityContext": {"privileged": False}}], "hostNetwork": False}
    assert check("k8s-pod-host-access", DEPLOYMENT, deployment(**restricted)) == []


@pytest.mark.parametrize(
    ("labels", "message"),
    [
        ({}, "namespace 'team-a' has no pod-security.kubernetes.io/enforce label: set restricted, or baseline where "
             "a component needs it"),
        ({"pod-security.kubernetes.io/enforce": "privileged"},
         "namespace 'team-a' enforces the privileged level: any pod in it may take its node"),
        ({"pod-security.kubernetes.io/enforce": "strict"},
         "namespace 'team-a' sets pod-security.kubernetes.io/enforce=strict, which is not one of privileged, "
         "baseline, restricted"),
    ],
)  # fmt: skip
def test_a_namespace_without_a_pod_security_level_or_privileged_is_refused(
    labels: dict[str, str], message: str
) -> None:
    assert check("k8s-namespace-pod-security", NAMESPACE, {"metadata": {"name": "team-a", "labels": labels}}) == [
        message
    ]


@pytest.mark.parametrize("level", ["baseline", "restricted"])
def test_a_namespace_with_baseline_or_restricted_passes(level: str) -> None:
    labels = {"pod-security.kubernetes.io/enforce": level}
    assert check("k8s-namespace-pod-security", NAMESPACE, {"metadata": {"name": "a", "labels": labels}}) == []


@pytest.mark.parametrize(
    ("labels", "message"),
    [
        ({"app.kubernetes.io/managed-by": "gpu-clusters"},
         "namespace 'default' has no pod-security.kubernetes.io/enforce label: set restricted, or baseline where a "
         "component needs it"),
        ({"pod-security.kubernetes.io/enforce": "privileged"},
         "namespace 'default' enforces the privileged level: any pod in it may take its node"),
    ],
)  # fmt: skip
def test_a_namespace_patch_without_a_pod_security_level_or_privileged_is_refused(
    labels: dict[str, str], message: str
) -> None:
    patch = {"metadata": {"name": "default", "labels": labels}}
    assert check("k8s-namespace-pod-security", NAMESPACE_PATCH, patch) == [message]


def test_a_namespace_patch_to_restricted_passes() -> None:
    labels = {"pod-security.kubernetes.io/enforce": "restricted"}
    patch = {"metadata": {"name": "default", "labels": labels}}
    assert check("k8s-namespace-pod-security", NAMESPACE_PATCH, patch) == []


def helm_release(**inputs: Any) -> dict[str, Any]:
    return {"name": "tools", "chart": "tools", "version": "1.2.3", "namespace": "tools"} | inputs


def test_a_helm_release_that_creates_its_namespace_is_refused() -> None:
    assert check("k8s-namespace-pod-security", HELM_RELEASE, helm_release(createNamespace=True)) == [
        "Helm release 'tools' creates namespace 'tools' (createNamespace) without a pod-security.kubernetes.io/enforce "
        "label, so it is privileged: create the namespace with its labels and set createNamespace false"
    ]


@pytest.mark.parametrize("inputs", [{"createNamespace": False}, {}])
def test_a_helm_release_into_a_namespace_of_the_stack_passes(inputs: dict[str, Any]) -> None:
    assert check("k8s-namespace-pod-security", HELM_RELEASE, helm_release(**inputs)) == []


def test_a_privileged_namespace_passes_with_an_approval(monkeypatch: pytest.MonkeyPatch) -> None:
    from policies import pack
    from policies.rules.exceptions import Approval

    privileged = {"metadata": {"name": "node-agents", "labels": {"pod-security.kubernetes.io/enforce": "privileged"}}}
    tagged = privileged | {"tags": {"policy-exception/k8s-namespace-pod-security": "device plugins"}}
    assert len(check("k8s-namespace-pod-security", NAMESPACE, tagged, name="ns")) == 1
    monkeypatch.setattr(pack, "APPROVALS", [Approval("k8s-namespace-pod-security", "ns", "device plugins")])
    assert check("k8s-namespace-pod-security", NAMESPACE, privileged, name="ns") == []


@pytest.mark.program
def test_a_stack_with_a_claim_in_default_labels_it_by_patch_and_passes(tmp_path: Path) -> None:
    """A claim in `default` makes the stack patch Kubernetes' own namespace with its labels; the pack judges the
    patch and finds the level restricted."""
    stack = tmp_path / "Pulumi.claim-in-default.yaml"
    stack.write_text(CLAIM_IN_DEFAULT)
    resources = file_plan(stack)["resources"]
    [patch] = [r for r in resources if r["type"] == NAMESPACE_PATCH]
    assert patch["inputs"]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert [v for v in plan_check(resources) if v["policy"] == "k8s-namespace-pod-security"] == []


CLAIM_IN_DEFAULT = """\
config:
  aws:region: us-east-1
  gpu-clusters:cluster: {name: claims, endpoint: {privateAccessCidrs: [192.168.10.0/24]}}
  gpu-clusters:network:
    availabilityZones: [us-east-1a, us-east-1b]
    siteConnection: {transitGatewayId: tgw-0f3a9c1e27d84b5a6}
  gpu-clusters:nodePools:
    - {name: system, role: system, instanceType: m7i.xlarge, scaling: {min: 2, max: 3}}
    - name: train
      role: training
      instanceType: p5.48xlarge
      placement: {availabilityZones: [us-east-1a]}
      scaling: {max: 2}
  gpu-clusters:storage:
    lustre: {kubernetes: {namespace: default, claimName: scratch}}
"""
