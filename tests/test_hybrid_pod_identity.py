"""Pod Identity in the shipped hybrid stack: every workload with a Pod Identity role either runs on the cloud system
pool or, on hybrid nodes, is served by the agent's hybrid DaemonSet (EKS user guide, hybrid-nodes-add-ons.html)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from components.planning import compute_types
from components.planning.addons.placement import SYSTEM_NODE_SELECTOR
from tests.builders import EKS_ADDON, HELM_RELEASE, shipped_plan

pytestmark = pytest.mark.program

ADDON = EKS_ADDON
RELEASE = HELM_RELEASE
ASSOCIATION = "aws:eks/podIdentityAssociation:PodIdentityAssociation"


def addon_configuration(name: str) -> Any:
    resources = shipped_plan("hybrid")["resources"]
    (addon,) = [r for r in resources if r["type"] == ADDON and r["inputs"]["addonName"] == name]
    values = addon["inputs"].get("configurationValues")
    return json.loads(values) if values else None


def release_values(chart_suffix: str) -> dict[str, Any]:
    (release,) = [
        r
        for r in shipped_plan("hybrid")["resources"]
        if r["type"] == RELEASE and r["inputs"]["chart"].endswith(chart_suffix)
    ]
    values: dict[str, Any] = release["inputs"]["values"]
    return values


def test_the_pod_identity_agent_runs_its_hybrid_daemonset() -> None:
    assert addon_configuration("eks-pod-identity-agent") == {"daemonsets": {"hybrid": {"create": True}}}


def test_controllers_with_a_pod_identity_role_run_on_the_cloud_system_pool() -> None:
    """Their credentials then come from the agent's default DaemonSet, on EC2 nodes with IMDS."""
    associations = {
        r["inputs"]["serviceAccount"] for r in shipped_plan("hybrid")["resources"] if r["type"] == ASSOCIATION
    }
    controllers = {
        "cluster-autoscaler": release_values("cluster-autoscaler")["nodeSelector"],
        "aws-node-termination-handler": release_values("aws-node-termination-handler")["nodeSelector"],
        "ebs-csi-controller-sa": addon_configuration("aws-ebs-csi-driver")["controller"]["nodeSelector"],
    }
    assert set(controllers) <= associations
    for selector in controllers.values():
        assert selector == dict(SYSTEM_NODE_SELECTOR)


def test_add_ons_that_do_not_support_hybrid_nodes_stay_off_them() -> None:
    for affinity in (
        addon_configuration("vpc-cni")["affinity"],
        addon_configuration("aws-fsx-csi-driver")["node"]["affinity"],
    ):
        (term,) = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        assert compute_types.in_vpc_only() in term["matchExpressions"]
