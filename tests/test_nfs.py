"""An existing NFS server through csi-driver-nfs: the pinned chart, tolerations, StorageClass parameters, claim."""

from __future__ import annotations

import json
from typing import Any

import pytest

from blueprint.plan.runner import ProgramRun
from components import tags
from components.catalog import versions
from components.config import StackConfig
from components.planning.pools import plan_pools
from components.storage.nfs import ExistingNfsStorage, storage_class_parameters
from tests.builders import ShippedStack, once_per_config, run_with_context, stack_config

RELEASE = "kubernetes:helm.sh/v3:Release"
PVC = "kubernetes:core/v1:PersistentVolumeClaim"
SC = "kubernetes:storage.k8s.io/v1:StorageClass"
GPU_TAINT = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


HYBRID_POOLS: list[dict[str, Any]] = [
    {"name": "system", "role": "system", "instanceType": "m7i.xlarge"},
    {
        "name": "a40",
        "kind": "hybrid",
        "role": "inference",
        "gpuModel": "A40",
        "gpusPerNode": 4,
        "nodes": 4,
        "taints": [
            {"key": "site", "value": "lab", "effect": "NoExecute"},
            {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"},
        ],
        "network": {"remoteNodeCidrs": ["192.168.100.0/24"], "remotePodCidrs": ["192.168.128.0/18"]},
    },
    {"name": "burst", "role": "inference", "instanceType": "g6e.12xlarge", "scaling": {"max": 2}},
]
EXISTING_SERVER = {
    "kind": "existing",
    "server": "nfs.lab.example.internal",
    "share": "/exports/models",
    "pools": ["a40"],
}


def hybrid_spec(nfs: dict[str, Any] | None = None) -> StackConfig:
    return stack_config(*HYBRID_POOLS, name="hybrid", storage={"nfs": {**EXISTING_SERVER, **(nfs or {})}})


@once_per_config
def build(spec: StackConfig) -> ProgramRun:
    nfs = spec.storage.nfs
    assert nfs is not None
    return run_with_context(spec, lambda ctx: ExistingNfsStorage("models", ctx, nfs, plan_pools(spec)))


def test_chart_is_the_catalog_pin() -> None:
    release = build(hybrid_spec()).one(RELEASE).inputs
    pin = versions.chart("csi-driver-nfs")
    assert release["chart"] == pin.chart
    assert release["version"] == pin.version
    assert release["repositoryOpts"] == {"repo": pin.repository}
    assert release["namespace"] == "kube-system"


def test_node_plugin_tolerates_gpu_and_hybrid_taints_and_controller_prefers_the_mounting_pools() -> None:
    values = build(hybrid_spec()).one(RELEASE).inputs["values"]
    node = values["node"]["tolerations"]
    assert GPU_TAINT in node
    assert {"key": "site", "operator": "Exists", "effect": "NoExecute"} in node
    controller = values["controller"]
    assert GPU_TAINT in controller["tolerations"]
    assert {"key": "CriticalAddonsOnly", "operator": "Exists", "effect": "NoSchedule"} in controller["tolerations"]
    preferred = controller["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert preferred[0]["preference"]["matchExpressions"] == [{"key": tags.POOL, "operator": "In", "values": ["a40"]}]


def test_the_chart_renders_the_controller_affinity() -> None:
    """csi-driver-nfs 4.13.4 renders `controller.affinity` only when its text contains `nodeSelectorTerms`
    (templates/csi-nfs-controller.yaml); a preference alone is silently dropped. The required term adds nothing
    the template's own `kubernetes.io/os: linux` selector does not already ask."""
    affinity = build(hybrid_spec()).one(RELEASE).inputs["values"]["controller"]["affinity"]
    assert "nodeSelectorTerms" in json.dumps(affinity)
    required = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert required == [{"matchExpressions": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]}]


def test_storage_class_parameters_mount_options_and_retain() -> None:
    run = build(hybrid_spec({"mountOptions": ["nfsvers=4.1", "hard"]}))
    sc = run.one(SC)
    assert sc.inputs["metadata"]["name"] == "models-nfs"
    assert sc.inputs["provisioner"] == "nfs.csi.k8s.io"
    assert sc.inputs["parameters"] == {"server": "nfs.lab.example.internal", "share": "/exports/models"}
    assert sc.inputs["mountOptions"] == ["nfsvers=4.1", "hard"]
    assert sc.inputs["reclaimPolicy"] == "Retain"
    assert sc.inputs["volumeBindingMode"] == "Immediate"
    assert run.one(RELEASE).urn in sc.depends_on


def test_default_mount_options_are_nfs_4_1() -> None:
    assert build(hybrid_spec()).one(SC).inputs["mountOptions"] == ["nfsvers=4.1"]


def test_claim_fields() -> None:
    run = build(hybrid_spec({"capacityGib": 2048, "kubernetes": {"namespace": "inference", "claimName": "weights"}}))
    pvc = run.one(PVC)
    assert pvc.inputs["metadata"]["name"] == "weights"
    assert pvc.inputs["metadata"]["namespace"] == "inference"
    assert pvc.inputs["spec"] == {
        "accessModes": ["ReadWriteMany"],
        "storageClassName": "models-nfs",
        "resources": {"requests": {"storage": "2048Gi"}},
    }
    assert run.one(SC).urn in pvc.depends_on


def test_a_server_without_a_share_is_refused() -> None:
    spec = hybrid_spec({"share": None})
    assert spec.storage.nfs is not None
    with pytest.raises(ValueError, match="needs `server` and `share`"):
        storage_class_parameters(spec.storage.nfs)


def test_hybrid_stack_uses_the_existing_server_through_csi_driver_nfs(hybrid_stack: ShippedStack) -> None:
    """The shipped hybrid stack, through the whole program."""
    run = hybrid_stack.run
    assert run.one(RELEASE, "hybrid-models-csi-driver-nfs").inputs["chart"] == "csi-driver-nfs"
    sc = run.one(SC, "hybrid-models-sc").inputs
    assert sc["provisioner"] == "nfs.csi.k8s.io"
    assert sc["parameters"]["share"] == "/exports/models"
    assert run.of_type("aws:efs/fileSystem:FileSystem") == []
