"""cluster-autoscaler: chart per Kubernetes minor, discovery values, and a role limited to this cluster's ASGs."""

from __future__ import annotations

import pytest

from components.catalog import versions
from components.planning.autoscaler_tags import discovery_tags
from tests.builders import (
    HELM_RELEASE,
    IAM_ROLE,
    INFERENCE_POOL,
    SYSTEM_POOL,
    TRAINING_POOL,
    addon_stack,
    policy_document,
    pool,
    releases,
    run_addons,
)

pytestmark = pytest.mark.program


@pytest.mark.parametrize("kubernetes", ["1.34", "1.35"])
def test_chart_and_image_follow_the_kubernetes_minor(kubernetes):
    release = releases(run_addons(addon_stack(SYSTEM_POOL, TRAINING_POOL, kubernetes=kubernetes)))["cluster-autoscaler"]
    pin = versions.cluster_autoscaler_chart(kubernetes)
    assert release["chart"] == "cluster-autoscaler"
    assert release["version"] == pin.version
    assert release["repositoryOpts"] == {"repo": "https://kubernetes.github.io/autoscaler"}
    assert release["namespace"] == "kube-system"
    assert release["values"]["image"]["tag"] == pin.image_tag
    assert release["values"]["image"]["tag"].startswith(f"v{kubernetes}.")


def test_values_discover_this_cluster_and_run_on_the_system_pool():
    spec = addon_stack(
        SYSTEM_POOL,
        TRAINING_POOL,
        name="train",
        addons={"clusterAutoscaler": {"expander": "least-waste", "scaleDownUtilizationThreshold": 0.3}},
    )
    values = releases(run_addons(spec))["cluster-autoscaler"]["values"]
    assert values["awsRegion"] == "us-east-1"
    assert values["autoDiscovery"]["clusterName"] == "train"
    assert values["autoDiscovery"]["tags"] == list(discovery_tags("train"))
    assert values["extraArgs"]["expander"] == "least-waste"
    assert values["extraArgs"]["scale-down-utilization-threshold"] == 0.3
    assert values["extraArgs"]["skip-nodes-with-local-storage"] is False
    assert values["nodeSelector"] == {"gpu-clusters/role": "system"}


def test_role_describes_anything_but_scales_only_groups_tagged_for_this_cluster():
    run = run_addons(addon_stack(SYSTEM_POOL, TRAINING_POOL, name="train"))
    statements = {s["Sid"]: s for s in policy_document(run, "cluster-autoscaler")["Statement"]}
    assert statements["Describe"]["Resource"] == "*"
    assert all(":Describe" in a or ":Get" in a for a in statements["Describe"]["Action"])
    scale = statements["ScaleOwnGroups"]
    assert sorted(scale["Action"]) == [
        "autoscaling:SetDesiredCapacity",
        "autoscaling:TerminateInstanceInAutoScalingGroup",
    ]
    assert scale["Condition"] == {
        "StringEquals": {
            "aws:ResourceTag/k8s.io/cluster-autoscaler/train": "owned",
            "aws:ResourceTag/k8s.io/cluster-autoscaler/enabled": "true",
        }
    }
    # eks:DescribeNodegroup takes a node group ARN: this cluster's node groups only, never `*`
    assert statements["DescribeOwnNodegroups"] == {
        "Sid": "DescribeOwnNodegroups",
        "Effect": "Allow",
        "Action": ["eks:DescribeNodegroup"],
        "Resource": "arn:aws:eks:us-east-1:123456789012:nodegroup/train/*/*",
    }
    assert not [a for s in statements.values() if s["Resource"] == "*" for a in s["Action"] if a.startswith("eks:")]
    # the scaling actions appear nowhere without the tag condition
    unconditioned = [a for s in statements.values() if "Condition" not in s for a in s["Action"]]
    assert "autoscaling:SetDesiredCapacity" not in unconditioned


def test_service_account_matches_the_pod_identity_role():
    run = run_addons(addon_stack(SYSTEM_POOL, TRAINING_POOL))
    role = run.one(IAM_ROLE, "cluster-autoscaler")
    values = releases(run)["cluster-autoscaler"]["values"]
    assert role.inputs["tags"] == {"namespace": "kube-system", "service-account": "cluster-autoscaler"}
    assert values["rbac"]["serviceAccount"] == {"create": True, "name": "cluster-autoscaler"}
    release = next(r for r in run.of_type(HELM_RELEASE) if r.inputs["name"] == "cluster-autoscaler")
    assert role.urn in release.depends_on


def test_system_pool_taints_are_tolerated():
    tainted = pool(SYSTEM_POOL, taints=[{"key": "CriticalAddonsOnly", "value": "true", "effect": "NoSchedule"}])
    values = releases(run_addons(addon_stack(tainted, TRAINING_POOL)))["cluster-autoscaler"]["values"]
    assert {"key": "CriticalAddonsOnly", "operator": "Equal", "value": "true", "effect": "NoSchedule"} in values[
        "tolerations"
    ]


@pytest.mark.parametrize(
    "spec",
    [
        addon_stack(SYSTEM_POOL, pool(INFERENCE_POOL, scaling={"min": 2, "max": 2, "mode": "fixed"})),  # none to size
        addon_stack(SYSTEM_POOL, TRAINING_POOL, addons={"clusterAutoscaler": {"enabled": "off"}}),
    ],
)
def test_not_deployed_when_no_pool_needs_it_or_switched_off(spec):
    run = run_addons(spec)
    assert "cluster-autoscaler" not in releases(run)
    assert "cluster-autoscaler" not in [r.name for r in run.of_type(IAM_ROLE)]
    assert run.of_type("gpu-clusters:index:ClusterAutoscaler") == []
