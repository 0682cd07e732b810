"""An existing NFS server bound statically through csi-driver-nfs: the pinned chart's node plugin, a
PersistentVolume on the server's export with the configured mount options, the claim bound to it, and the refusals
of file systems hybrid nodes cannot mount."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from blueprint.plan.runner import ProgramRun
from components.catalog import versions
from components.config import StackConfig
from components.errors import ConfigError
from components.planning.stack_plan import plan_pools
from components.planning.storage import nfs_pools
from components.storage.nfs import ExistingNfsStorage, volume_attributes
from tests.builders import (
    EFS,
    HELM_RELEASE,
    PVC,
    SYSTEM_DEFAULT_SCALING,
    ShippedStack,
    once_per_config,
    run_with_context,
    shipped_stack,
    stack_config,
)

RELEASE = HELM_RELEASE
PV = "kubernetes:core/v1:PersistentVolume"
SC = "kubernetes:storage.k8s.io/v1:StorageClass"
DEFAULT_MOUNT_OPTIONS = [
    "nfsvers=4.1",
    "nconnect=8",
    "rsize=1048576",
    "wsize=1048576",
    "hard",
    "timeo=600",
    "retrans=2",
]
GPU_TAINT = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


HYBRID_POOLS: list[dict[str, Any]] = [
    SYSTEM_DEFAULT_SCALING,
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


def problems(nfs: dict[str, Any], pools: list[dict[str, Any]] | None = None) -> list[str]:
    """The validation problems of the hybrid pools with this `storage.nfs` (empty when it is valid)."""
    try:
        stack_config(*(pools or HYBRID_POOLS), name="hybrid", storage={"nfs": nfs}, validated=True)
    except ConfigError as error:
        return [str(p) for p in error.problems]
    return []


@once_per_config
def build(spec: StackConfig) -> ProgramRun:
    nfs = spec.storage.nfs
    assert nfs is not None
    return run_with_context(spec, lambda ctx: ExistingNfsStorage("models", ctx, nfs, plan_pools(spec)))


@pytest.mark.program
def test_chart_is_the_catalog_pin() -> None:
    release = build(hybrid_spec()).one(RELEASE).inputs
    pin = versions.chart("csi-driver-nfs")
    assert release["chart"] == pin.chart
    assert release["version"] == pin.version
    assert release["repositoryOpts"] == {"repo": pin.repository}
    assert release["namespace"] == "kube-system"


@pytest.mark.program
def test_only_the_node_plugin_runs_and_it_tolerates_gpu_and_hybrid_taints() -> None:
    """A static volume needs no controller (it makes sub-directories for dynamic volumes), so none runs and nothing
    waits for one to reach the server; the node plugin mounts on tainted GPU and hybrid nodes alike."""
    values = build(hybrid_spec()).one(RELEASE).inputs["values"]
    assert values["controller"] == {"replicas": 0}
    node = values["node"]["tolerations"]
    assert GPU_TAINT in node
    assert {"key": "site", "operator": "Exists", "effect": "NoExecute"} in node
    # The node's own resolver knows the site's names; cluster DNS answers from whichever CoreDNS replica it reaches.
    assert values["node"]["dnsPolicy"] == "Default"


@pytest.mark.program
def test_persistent_volume_names_the_server_share_and_mount_options() -> None:
    pv = build(hybrid_spec()).one(PV).inputs
    assert pv["metadata"]["name"] == "default-models"
    spec = pv["spec"]
    assert spec["csi"] == {
        "driver": "nfs.csi.k8s.io",
        "volumeHandle": "nfs.lab.example.internal#/exports/models#",
        "volumeAttributes": {"server": "nfs.lab.example.internal", "share": "/exports/models"},
    }
    assert spec["mountOptions"] == DEFAULT_MOUNT_OPTIONS
    assert spec["persistentVolumeReclaimPolicy"] == "Retain"
    assert spec["storageClassName"] == ""
    assert spec["accessModes"] == ["ReadWriteMany"]
    assert spec["claimRef"] == {"namespace": "default", "name": "models"}


@pytest.mark.program
def test_mount_options_follow_the_config() -> None:
    mount = {"nfsVersion": "4.2", "nconnect": 16, "rsize": 262144, "wsize": 65536, "hard": False}
    run = build(hybrid_spec({"mount": {**mount, "timeo": 150, "retrans": 3}, "mountOptions": ["noatime"]}))
    assert run.one(PV).inputs["spec"]["mountOptions"] == [
        "nfsvers=4.2",
        "nconnect=16",
        "rsize=262144",
        "wsize=65536",
        "soft",
        "timeo=150",
        "retrans=3",
        "noatime",
    ]


@pytest.mark.program
def test_claim_is_bound_to_the_volume_by_name_with_no_storage_class() -> None:
    run = build(hybrid_spec({"capacityGib": 2048, "kubernetes": {"namespace": "inference", "claimName": "weights"}}))
    pv = run.one(PV)
    assert pv.inputs["metadata"]["name"] == "inference-weights"
    assert pv.inputs["spec"]["capacity"] == {"storage": "2048Gi"}
    assert pv.inputs["spec"]["claimRef"] == {"namespace": "inference", "name": "weights"}
    pvc = run.one(PVC)
    assert pvc.inputs["metadata"]["name"] == "weights"
    assert pvc.inputs["metadata"]["namespace"] == "inference"
    assert pvc.inputs["spec"] == {
        "accessModes": ["ReadWriteMany"],
        "storageClassName": "",
        "volumeName": "inference-weights",
        "resources": {"requests": {"storage": "2048Gi"}},
    }
    assert pv.urn in pvc.depends_on


@pytest.mark.program
def test_no_provisioner_is_involved() -> None:
    """No StorageClass, and neither the volume nor the claim waits for the chart: binding a static volume is the
    API server's work, and a claim never waits on a controller that cannot reach the site."""
    run = build(hybrid_spec())
    assert run.of_type(SC) == []
    release = run.one(RELEASE).urn
    assert release not in run.one(PV).depends_on
    assert release not in run.one(PVC).depends_on


def test_a_server_without_a_share_is_refused() -> None:
    spec = hybrid_spec({"share": None})
    assert spec.storage.nfs is not None
    with pytest.raises(ValueError, match="needs `server` and `share`"):
        volume_attributes(spec.storage.nfs)


def test_the_default_mount_is_valid() -> None:
    assert problems(EXISTING_SERVER) == []
    assert problems({**EXISTING_SERVER, "mount": {"rsize": 2048, "wsize": 262144}}) == []


@pytest.mark.parametrize(
    ("nfs", "expected"),
    [
        ({"mount": {"nconnect": 17}}, "storage.nfs.mount.nconnect"),
        ({"mount": {"nconnect": 0}}, "storage.nfs.mount.nconnect"),
        ({"mount": {"rsize": 2097152}}, "storage.nfs.mount.rsize"),
        ({"mount": {"wsize": 65000}}, "storage.nfs.mount.wsize: 65000 bytes would be rounded down"),
        ({"mount": {"rsize": 3072}}, "storage.nfs.mount.rsize: 3072 bytes would be rounded down"),
        ({"mount": {"timeo": 601}}, "storage.nfs.mount.timeo"),
        ({"mount": {"nfsVersion": 4.1}}, "storage.nfs.mount.nfsVersion"),
        ({"mountOptions": ["nconnect=4"]}, "storage.nfs.mountOptions[0]: 'nconnect=4' is set by storage.nfs.mount"),
        ({"mountOptions": ["noatime", "soft"]}, "storage.nfs.mountOptions[1]: 'soft' is set by storage.nfs.mount"),
        ({"mountOptions": ["vers=3"]}, "storage.nfs.mountOptions[0]: 'vers=3' is set by storage.nfs.mount"),
    ],
)
def test_bad_mount_options_are_refused(nfs: dict[str, Any], expected: str) -> None:
    found = problems({**EXISTING_SERVER, **nfs})
    assert any(p.startswith(expected) for p in found), found


def test_mount_settings_on_efs_are_refused() -> None:
    found = problems({"kind": "efs", "mount": {"nconnect": 4}, "pools": ["burst"]})
    assert any(p.startswith("storage.nfs.mount: only for kind: existing") for p in found), found


def test_efs_on_a_hybrid_pool_is_refused_with_the_reason() -> None:
    found = problems({"kind": "efs", "pools": ["a40"]})
    assert any(
        p.startswith("storage.nfs.pools[0]: a40 is a hybrid pool; the EFS CSI driver is not among the add-ons AWS")
        and "hybrid-nodes-add-ons" in p
        for p in found
    ), found


def test_lustre_on_a_hybrid_pool_is_refused_with_the_reason() -> None:
    try:
        stack_config(*HYBRID_POOLS, name="hybrid", storage={"lustre": {"pools": ["a40"]}}, validated=True)
    except ConfigError as error:
        found = [str(p) for p in error.problems]
    else:
        found = []
    assert any(
        p.startswith("storage.lustre.pools[0]: a40 is a hybrid pool; the FSx CSI driver does not run on EKS Hybrid")
        for p in found
    ), found


def test_efs_by_default_is_mounted_by_cloud_inference_pools_only() -> None:
    spec = stack_config(*HYBRID_POOLS, name="hybrid", storage={"nfs": {"kind": "efs"}})
    assert spec.storage.nfs is not None
    assert [p.name for p in nfs_pools(spec.storage.nfs, plan_pools(spec))] == ["burst"]


def test_hybrid_stack_binds_the_existing_share_statically(hybrid_stack: ShippedStack) -> None:
    """The shipped hybrid stack, through the whole program."""
    run = hybrid_stack.run
    assert run.one(RELEASE, "hybrid-models-csi-driver-nfs").inputs["chart"] == "csi-driver-nfs"
    pv = run.one(PV, "hybrid-models-pv").inputs["spec"]
    assert pv["csi"]["volumeAttributes"] == {"server": "nfs.site.example.internal", "share": "/exports/models"}
    assert pv["mountOptions"] == DEFAULT_MOUNT_OPTIONS
    pvc = run.one(PVC, "hybrid-models-pvc").inputs["spec"]
    assert (pvc["storageClassName"], pvc["volumeName"]) == ("", "inference-model-weights")
    assert [sc for sc in run.of_type(SC) if sc.inputs["provisioner"] == "nfs.csi.k8s.io"] == []
    assert run.of_type(EFS) == []


@pytest.mark.program
def test_volume_is_pinned_to_the_nodes_of_the_pools_that_mount_it() -> None:
    """A pod of a pool that cannot reach the server, claiming the share, must stay Pending (the scheduler filters
    nodes by the volume's node affinity) instead of starting and failing to mount. The affinity names the volume's
    node label, which exactly the mounting pools' nodes carry."""
    spec = hybrid_spec()
    volume = build(spec).one(PV).inputs
    assert volume["spec"]["nodeAffinity"] == {
        "required": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "gpu-clusters/nfs-models", "operator": "In", "values": ["true"]}]}
            ]
        }
    }
    labelled = {p.name for p in plan_pools(spec) if p.labels.get("gpu-clusters/nfs-models") == "true"}
    assert labelled == {"a40"}


@pytest.mark.program
def test_the_servers_register_with_the_volume_label() -> None:
    """The hybrid servers get it from their NodeConfig's kubelet flags, as cloud nodes from their launch template."""
    document = yaml.safe_load(shipped_stack("hybrid").exports["hybridNodeConfig-a40"])
    [labels] = [f for f in document["spec"]["kubelet"]["flags"] if f.startswith("--node-labels=")]
    assert "gpu-clusters/nfs-models=true" in labels.removeprefix("--node-labels=").split(",")


@pytest.mark.program
def test_adding_a_mounting_pool_changes_node_labels_not_the_volume() -> None:
    """The API server refuses a change to a volume's node affinity once set: a pool added to `storage.nfs.pools`
    must leave the PersistentVolume as it was."""
    before, after = hybrid_spec({"pools": ["a40"]}), hybrid_spec({"pools": ["burst", "a40"]})
    assert build(before).one(PV).inputs == build(after).one(PV).inputs
    burst = {p.name: p.labels for p in plan_pools(after)}["burst"]
    assert burst["gpu-clusters/nfs-models"] == "true"
    assert "gpu-clusters/nfs-models" not in {p.name: p.labels for p in plan_pools(before)}["burst"]
