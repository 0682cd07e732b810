"""What a first `pulumi up` waits for: Kubernetes objects start once a system node is Ready (the CoreDNS add-on
ACTIVE), not when the system pool's Auto Scaling group exists, and Helm releases wait long enough for a node boot."""

from __future__ import annotations

import pytest

from blueprint.plan.runner import list_stacks
from components.addons.helm import RELEASE_TIMEOUT_SECONDS
from tests.builders import AUTOSCALING_GROUP, EKS_ADDON, HELM_RELEASE, PVC, shipped_stack

pytestmark = pytest.mark.program

RELEASE = HELM_RELEASE
ADDON = EKS_ADDON
ASG = AUTOSCALING_GROUP
#: Kubernetes objects and EKS add-ons whose pods need a node, which must wait for cluster DNS.
NEEDS_A_NODE = (RELEASE, PVC, "kubernetes:core/v1:PersistentVolume")


@pytest.mark.parametrize("stack", list_stacks())
def test_kubernetes_objects_wait_for_coredns_not_for_the_bare_system_group(stack: str) -> None:
    run = shipped_stack(stack).run
    coredns = next(a for a in run.of_type(ADDON) if a.inputs["addonName"] == "coredns")
    system_groups = {g.urn for g in run.of_type(ASG) if g.name.endswith("-system")}
    waiting = [r for t in NEEDS_A_NODE for r in run.of_type(t)]
    assert waiting and system_groups
    for resource in waiting:
        assert coredns.urn in resource.depends_on, resource.name
        assert not system_groups & set(resource.depends_on), resource.name
    for addon in run.of_type(ADDON):
        if addon.inputs["addonName"].endswith("csi-driver") and addon.inputs["addonName"] != "aws-ebs-csi-driver":
            assert coredns.urn in addon.depends_on, addon.name


@pytest.mark.parametrize("stack", list_stacks())
def test_every_release_waits_long_enough_for_a_node_to_boot(stack: str) -> None:
    releases = shipped_stack(stack).run.of_type(RELEASE)
    assert releases and RELEASE_TIMEOUT_SECONDS >= 600
    assert {r.inputs.get("timeout") for r in releases} == {RELEASE_TIMEOUT_SECONDS}
