"""The pure storage planning: who mounts what, where Lustre goes, names and paths, and the plan summary figures."""

from __future__ import annotations

from typing import Any

import pytest

from components.config import DataRepository, StackConfig
from components.planning.pools import STARTUP_TAINT
from components.planning.stack_plan import plan_pools
from components.planning.storage import (
    bucket_prefix,
    data_repository_path,
    lustre_availability_zone,
    lustre_pools,
    lustre_security_rules,
    nfs_pools,
    path_slug,
    storage_summary,
)
from components.planning.tolerations import key_tolerations
from tests.builders import A40, P5, SYSTEM, TWO_ZONES, stack_config

L40S = {"name": "l40s", "role": "inference", "instanceType": "g6e.12xlarge", "scaling": {"min": 1, "max": 8}}


def spec(pools: list[dict[str, Any]], storage: dict[str, Any], zones: list[str] | None = None) -> StackConfig:
    return stack_config(*pools, zones=zones or TWO_ZONES, storage=storage)


def summary(s: StackConfig) -> dict[str, dict[str, Any]]:
    return {entry["kind"]: entry for entry in storage_summary(s.storage, s.network.zones, plan_pools(s))}


def test_lustre_4800_gib_at_250_shared_by_four_p5_nodes() -> None:
    lustre = summary(spec([SYSTEM, P5], {"lustre": {"storageCapacityGib": 4800, "perUnitStorageThroughput": 250}}))[
        "lustre"
    ]
    # 4800 GiB = 4.6875 TiB x 250 MB/s/TiB ([BC]: capacity in TiB x per-unit throughput).
    assert lustre["throughputMBps"] == 1171.875
    assert lustre["capacityGiB"] == 4800
    assert lustre["mountedBy"] == ["h100"]
    # 4 nodes x 8 H100 = 32 GPUs at max.
    assert lustre["gpus"] == 32
    assert lustre["throughputPerGpuMBps"] == pytest.approx(1171.875 / 32)
    assert lustre["availabilityZone"] == "us-east-1a"
    assert lustre["claim"] == "default/lustre"
    assert lustre["efaEnabled"] is False


def test_lustre_tiers_and_scratch() -> None:
    big = summary(spec([SYSTEM, P5], {"lustre": {"storageCapacityGib": 9600, "perUnitStorageThroughput": 1000}}))
    assert big["lustre"]["throughputMBps"] == 9375.0
    scratch = summary(spec([SYSTEM, P5], {"lustre": {"deploymentType": "SCRATCH_2", "storageCapacityGib": 2400}}))
    # SCRATCH_2 has a fixed 200 MB/s/TiB baseline.
    assert scratch["lustre"]["throughputMBps"] == 468.75
    assert scratch["lustre"]["perUnitThroughputMBpsPerTiB"] == 200


def test_lustre_without_mounting_pools_has_no_per_gpu_figure() -> None:
    lustre = summary(spec([SYSTEM], {"lustre": {}}))["lustre"]
    assert lustre["gpus"] == 0
    assert lustre["mountedBy"] == []
    assert lustre["throughputPerGpuMBps"] is None


def test_efs_elastic_floor_split_over_gpus_and_capped_per_client() -> None:
    efs = summary(spec([SYSTEM, L40S], {"nfs": {"kind": "efs"}}))["efs"]
    # Elastic reads: 3 GiBps floor of the 3-20 GiBps Regional range = 3221.225472 MB/s.
    assert efs["throughputMBps"] == pytest.approx(3221.225472)
    assert efs["gpus"] == 32
    assert efs["throughputPerGpuMBps"] == pytest.approx(3221.225472 / 32)
    one_node = dict(L40S, scaling={"min": 1, "max": 1})
    capped = summary(spec([SYSTEM, one_node], {"nfs": {"kind": "efs"}}))["efs"]
    # 3221 / 4 GPUs would be 805 MB/s, but one client (node) reads at most 1500 MiBps = 1572.864 MB/s.
    assert capped["throughputPerGpuMBps"] == pytest.approx(1572.864 / 4)


def test_efs_provisioned_and_bursting() -> None:
    provisioned = summary(
        spec(
            [SYSTEM, L40S], {"nfs": {"kind": "efs", "throughputMode": "provisioned", "provisionedThroughputMibps": 100}}
        )
    )["efs"]
    assert provisioned["throughputMBps"] == pytest.approx(104.8576)
    bursting = summary(spec([SYSTEM, L40S], {"nfs": {"kind": "efs", "throughputMode": "bursting"}}))["efs"]
    assert bursting["throughputMBps"] is None
    assert bursting["throughputPerGpuMBps"] is None


def test_existing_nfs_server_by_its_bandwidth() -> None:
    nfs = {"kind": "existing", "server": "nfs.lab", "share": "/models", "bandwidthGbps": 10, "pools": ["a40"]}
    entry = summary(spec([SYSTEM, P5, A40, L40S], {"nfs": nfs}))["nfs"]
    assert entry["throughputMBps"] == 1250.0
    assert entry["mountedBy"] == ["a40"]
    assert entry["gpus"] == 16
    assert entry["throughputPerGpuMBps"] == pytest.approx(78.125)
    assert entry["server"] == "nfs.lab:/models"
    unknown = summary(spec([SYSTEM, A40], {"nfs": {k: v for k, v in nfs.items() if k != "bandwidthGbps"}}))["nfs"]
    assert unknown["throughputMBps"] is None


def test_default_mounting_pools() -> None:
    s = spec([SYSTEM, P5, A40, L40S], {"lustre": {}, "nfs": {"kind": "efs"}})
    plans = plan_pools(s)
    assert s.storage.lustre is not None and s.storage.nfs is not None
    assert [p.name for p in lustre_pools(s.storage.lustre, plans)] == ["h100"]
    # EFS is never mounted by hybrid pools: its CSI driver is not validated for EKS Hybrid Nodes.
    assert [p.name for p in nfs_pools(s.storage.nfs, plans)] == ["l40s"]


def test_lustre_never_mounted_by_hybrid_pools() -> None:
    s = spec([SYSTEM, P5, A40], {"lustre": {"pools": ["h100", "a40"]}})
    assert s.storage.lustre is not None
    assert [p.name for p in lustre_pools(s.storage.lustre, plan_pools(s))] == ["h100"]


def test_lustre_zone_follows_pools_then_config_then_network() -> None:
    pinned = dict(P5, placement={"availabilityZones": ["us-east-1b"]})
    s = spec([SYSTEM, pinned], {"lustre": {}})
    assert s.storage.lustre is not None
    pools = lustre_pools(s.storage.lustre, plan_pools(s))
    assert lustre_availability_zone(s.storage.lustre, pools, s.network.zones) == "us-east-1b"
    s = spec([SYSTEM, pinned], {"lustre": {"availabilityZone": "us-east-1a"}})
    assert s.storage.lustre is not None
    assert lustre_availability_zone(s.storage.lustre, pools, s.network.zones) == "us-east-1a"
    s = spec([SYSTEM], {"lustre": {}}, zones=["us-east-1c", "us-east-1d"])
    assert s.storage.lustre is not None
    assert lustre_availability_zone(s.storage.lustre, [], s.network.zones) == "us-east-1c"


def test_security_rules_lnet_ports_and_efa_all_traffic() -> None:
    plain = lustre_security_rules(efa_enabled=False)
    assert {(r.protocol, r.from_port, r.to_port) for r in plain} == {("tcp", 988, 988), ("tcp", 1018, 1023)}
    ingress_to_fs = {(r.peer, r.from_port) for r in plain if r.on == "filesystem" and r.direction == "ingress"}
    assert ingress_to_fs == {("self", 988), ("self", 1018), ("nodes", 988), ("nodes", 1018)}
    efa = lustre_security_rules(efa_enabled=True)
    all_traffic = {(r.on, r.direction, r.peer) for r in efa if r.protocol == "-1"}
    assert all_traffic == {
        ("filesystem", "ingress", "self"),
        ("filesystem", "egress", "self"),
        ("filesystem", "ingress", "nodes"),
        ("filesystem", "egress", "nodes"),
        ("nodes", "ingress", "filesystem"),
        ("nodes", "egress", "filesystem"),
    }
    assert all(r.from_port is None and r.to_port is None for r in efa if r.protocol == "-1")
    assert len({r.name for r in efa}) == len(efa)


def test_data_repository_paths_slugs_and_bucket_prefix() -> None:
    assert data_repository_path(DataRepository(file_system_path="/d", prefix="datasets/"), "b") == "s3://b/datasets/"
    assert data_repository_path(DataRepository(file_system_path="/d"), "b") == "s3://b/"
    given = DataRepository(file_system_path="/d", data_repository_path="s3://other/x/")
    assert data_repository_path(given, "b") == "s3://other/x/"
    with pytest.raises(ValueError, match="no dataRepositoryPath"):
        data_repository_path(DataRepository(file_system_path="/d"), None)
    assert path_slug("/datasets/raw_v2") == "datasets-raw-v2"
    assert path_slug("/") == "root"
    prefix = bucket_prefix("My_Cluster-with-a-very-long-name-indeed", "lustre")
    assert len(prefix) <= 37 and prefix.endswith("-") and prefix == prefix.lower() and "_" not in prefix


def test_tolerations() -> None:
    s = spec(
        [SYSTEM, P5, dict(L40S, taints=[{"key": "dedicated", "value": "serve", "effect": "NoExecute"}])],
        {"lustre": {"kubernetes": {"namespace": "ml"}}, "nfs": {"kind": "efs", "kubernetes": {"namespace": "ml"}}},
    )
    assert key_tolerations(plan_pools(s)) == [
        {"key": "CriticalAddonsOnly", "operator": "Exists", "effect": "NoSchedule"},  # the system pool's taint
        {"key": "dedicated", "operator": "Exists", "effect": "NoExecute"},
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        # the GPU pools' health gate: a claim's pod on a held node is not what needs it, the check's agents are
        {"key": STARTUP_TAINT.key, "operator": "Exists", "effect": "NoSchedule"},
    ]


def test_no_storage_no_summary() -> None:
    assert storage_summary(spec([SYSTEM], {}).storage, TWO_ZONES, []) == []
