"""Pool identity: each pool's node role, and the admission policy that holds a node's pool label to that role."""

from __future__ import annotations

import json
from typing import Any

import pytest

from components import tags
from components.planning.pool_identity import (
    NODE_USER_PREFIX,
    POLICY_NAME,
    ROLE_EXTRA_KEY,
    UNVERIFIED_ANNOTATION,
    pool_identity_policy,
    pool_roles_literal,
)
from tests.builders import ACCESS_ENTRY, IAM_ROLE, shipped_stack

POLICY = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
BINDING = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"
TRAIN_ROLE = "arn:aws:iam::123456789012:role/demo-train-node-1a2b3c4"
INFER_ROLE = "arn:aws:iam::123456789012:role/demo-infer-node-5d6e7f8"


def planned() -> dict[str, Any]:
    return pool_identity_policy({"train": [TRAIN_ROLE], "infer": [INFER_ROLE]}).policy


def variables(policy: dict[str, Any]) -> dict[str, str]:
    return {v["name"]: v["expression"] for v in policy["spec"]["variables"]}


def test_the_policy_judges_node_creates_and_updates_by_node_identities_only() -> None:
    spec = planned()["spec"]
    (rule,) = spec["matchConstraints"]["resourceRules"]
    assert rule == {
        "apiGroups": [""],
        "apiVersions": ["v1"],
        "operations": ["CREATE", "UPDATE"],
        "resources": ["nodes", "nodes/status"],
    }
    (condition,) = spec["matchConditions"]
    assert condition["expression"] == f'request.userInfo.username.startsWith("{NODE_USER_PREFIX}")'
    assert spec["failurePolicy"] == "Ignore"  # a broken expression must not stop every node


def test_the_policy_maps_each_pool_to_its_roles_and_reads_the_role_from_the_user_extra() -> None:
    found = variables(planned())
    assert found["allowed"] == f'{{"infer": ["{INFER_ROLE}"], "train": ["{TRAIN_ROLE}"]}}'
    assert f'object.metadata.labels["{tags.POOL}"]' in found["pool"]
    assert f'request.userInfo.extra["{ROLE_EXTRA_KEY}"]' in found["roles"]
    assert ROLE_EXTRA_KEY == "canonicalArn"


def test_the_validation_admits_only_a_role_of_the_labelled_pool() -> None:
    (validation,) = planned()["spec"]["validations"]
    assert validation["expression"] == (
        "variables.pool == '' || size(variables.roles) == 0 || "
        "(variables.pool in variables.allowed && variables.roles.exists(r, r in variables.allowed[variables.pool]))"
    )
    assert validation["reason"] == "Forbidden"


def test_a_node_without_a_role_in_its_user_info_is_recorded_in_the_audit_log() -> None:
    (annotation,) = planned()["spec"]["auditAnnotations"]
    assert annotation["key"] == UNVERIFIED_ANNOTATION
    assert annotation["valueExpression"].startswith("variables.pool != '' && size(variables.roles) == 0 ?")
    assert annotation["valueExpression"].endswith(": null")


def test_the_binding_denies_and_audits() -> None:
    binding = pool_identity_policy({"train": [TRAIN_ROLE]}).binding
    assert binding["spec"] == {"policyName": POLICY_NAME, "validationActions": ["Deny", "Audit"]}


def test_the_role_map_is_sorted_deduplicated_and_a_valid_cel_literal() -> None:
    literal = pool_roles_literal({"b": ["arn:y", "arn:x", "arn:y"], "a": ["arn:z"]})
    assert literal == '{"a": ["arn:z"], "b": ["arn:x", "arn:y"]}'
    assert json.loads(literal) == {"a": ["arn:z"], "b": ["arn:x", "arn:y"]}


@pytest.mark.parametrize("roles", [{}, {"train": []}])
def test_every_pool_needs_a_role(roles: dict[str, list[str]]) -> None:
    with pytest.raises(ValueError, match="at least one node role"):
        pool_identity_policy(roles)


@pytest.mark.program
def test_the_hybrid_stack_gives_every_pool_its_own_role_and_binds_it_in_the_policy() -> None:
    run = shipped_stack("hybrid").run
    policy = run.one(POLICY, "hybrid-pool-identity")
    assert policy.inputs["metadata"]["name"] == POLICY_NAME
    allowed = json.loads(variables({"spec": policy.inputs["spec"]})["allowed"])
    pools = {"system", "h100", "burst", "a40"}
    assert set(allowed) == pools
    # One role per pool, none shared.
    arns = [arn for roles in allowed.values() for arn in roles]
    assert len(arns) == len(set(arns)) == len(pools)
    # Self-managed EC2 pools: each role has its EC2_LINUX access entry; the hybrid pool's role its HYBRID_LINUX
    # entry. The managed burst pool's node group names its role, and EKS creates that role's entry itself.
    entries = {e.inputs["principalArn"]: e.inputs["type"] for e in run.of_type(ACCESS_ENTRY)}
    assert {pool: entries.get(roles[0]) for pool, roles in allowed.items()} == {
        "system": "EC2_LINUX",
        "h100": "EC2_LINUX",
        "burst": None,
        "a40": "HYBRID_LINUX",
    }
    assert run.one("aws:eks/nodeGroup:NodeGroup", "hybrid-burst").inputs["nodeRoleArn"] == allowed["burst"][0]
    node_roles = {r.name for r in run.of_type(IAM_ROLE) if r.name.endswith("-node")}
    assert node_roles == {
        "hybrid-system-node",
        "hybrid-h100-node",
        "hybrid-burst-managed-node",
        "hybrid-a40-hybrid-node",
    }
    binding = run.one(BINDING, "hybrid-pool-identity")
    assert binding.inputs["spec"] == {"policyName": POLICY_NAME, "validationActions": ["Deny", "Audit"]}


@pytest.mark.program
def test_each_launch_template_boots_with_its_own_pools_instance_profile() -> None:
    run = shipped_stack("hybrid").run
    templates = run.of_type("aws:ec2/launchTemplate:LaunchTemplate")
    # The managed burst pool's template names no profile: EKS refuses one there and uses the node group's role.
    assert [t.name for t in templates if "iamInstanceProfile" not in t.inputs] == ["hybrid-burst"]
    profiles = {t.name: t.inputs["iamInstanceProfile"]["arn"] for t in templates if "iamInstanceProfile" in t.inputs}
    assert len(set(profiles.values())) == len(profiles) == 2
    for name, arn in profiles.items():
        pool = name.rsplit("-", 1)[-1]
        assert f"instance-profile/hybrid-{pool}-node" in arn, (name, arn)
