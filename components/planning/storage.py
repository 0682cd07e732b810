"""Shared storage, planned: which pools mount which file system, where it lives, and what throughput it gives.

The storage components (`components.storage`), the plan summary and the config rules all ask the same questions
("which pools mount Lustre?", "which AZ does it go to?", "how many MB/s does each GPU get?"). They are answered
here, once, from the validated config and the pool plans, with no Pulumi imports.

Units: throughput in MB/s (10^6 bytes per second), as FSx quotes Lustre throughput (MB/s per TiB of storage). EFS
quotes MiB/s and GiB/s; those figures are converted with the constants below, never rounded in between.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from components import tags
from components.config import (
    DataRepository,
    KubernetesVolume,
    LustreConfig,
    NfsConfig,
    NfsMount,
    NodePool,
    StorageConfig,
)
from components.planning.lustre import per_unit_throughput, throughput_mbps
from components.planning.pools import PoolPlan

#: Byte-unit conversions to MB/s (decimal megabytes).
MB_PER_MIB = 1.048576
MB_PER_GIB = 1073.741824
MB_PER_GBIT = 125.0

#: EFS Regional file systems in General Purpose mode with Elastic throughput (Amazon EFS User Guide, "Amazon EFS
#: performance specifications", https://docs.aws.amazon.com/efs/latest/ug/performance.html): per-file-system reads
#: 3-20 GiBps depending on the Region, so the plan counts the floor of that range; per client 1,500 MiBps.
EFS_ELASTIC_READ_GIBPS_MIN = 3
EFS_PER_CLIENT_MIBPS = 1500
#: The FSx for Lustre CSI driver's provisioner and static volume driver name (kubernetes-sigs/aws-fsx-csi-driver).
LUSTRE_CSI_DRIVER = "fsx.csi.aws.com"
EFS_CSI_DRIVER = "efs.csi.aws.com"
#: csi-driver-nfs driver name (aws-gpu-facts.md §4, [NFS]).
NFS_CSI_DRIVER = "nfs.csi.k8s.io"
#: The Linux NFS client's read and write sizes are "a positive integral multiple of system's page size or a power of
#: two if it is less than system's page size"; other values are rounded down (nfs(5), `rsize`, `wsize`). The page
#: size of x86_64 servers, such as the hybrid A40 servers.
NFS_PAGE_SIZE = 4096
#: The mount options `NfsMount` sets, by name; `soft` is the other side of `hard`, `vers` another name of `nfsvers`.
NFS_MOUNT_KEYS = frozenset({"nfsvers", "vers", "nconnect", "rsize", "wsize", "hard", "soft", "timeo", "retrans"})
#: Lustre LNET: "allow inbound traffic on ports 988 and 1018-1023" (FSx Lustre guide, cannot-create-fs.html;
#: aws-gpu-facts.md §3d).
LUSTRE_TCP_PORTS: tuple[tuple[int, int], ...] = ((988, 988), (1018, 1023))
#: NFS (EFS mount targets and NFS servers) listen on TCP 2049 (aws-gpu-facts.md §4).
NFS_TCP_PORT = 2049
#: S3 bucket names are 3-63 characters; `bucket_prefix` leaves 26 for the provider's unique suffix
#: (S3 user guide, bucket naming rules; pulumi-aws `bucket_prefix`: "Must be lowercase and less than or equal to
#: 37 characters in length").
BUCKET_PREFIX_MAX = 37


# ------------------------------------------------------------------------------------------------ who mounts what
def mounts_lustre(config: LustreConfig, pool: NodePool) -> bool:
    """Whether the pool mounts Lustre: it is listed under `pools`, or, without a list, it is a training pool.

    Hybrid pools never do: the FSx for Lustre CSI driver "isn't supported on Fargate or Amazon EKS Hybrid Nodes"
    (Amazon EKS User Guide, https://docs.aws.amazon.com/eks/latest/userguide/fsx-csi-create.html). The config rules
    ask this same question (`components.validation.storage`).
    """
    if pool.kind != "aws":
        return False
    return pool.name in config.pools if config.pools is not None else pool.role == "training"


def lustre_pools(config: LustreConfig, pool_plans: Sequence[PoolPlan]) -> list[PoolPlan]:
    """The pools that mount Lustre (`mounts_lustre`), in config order."""
    return [p for p in pool_plans if mounts_lustre(config, p.pool)]


def nfs_pools(config: NfsConfig, pool_plans: Sequence[PoolPlan]) -> list[PoolPlan]:
    """The pools that mount the shared NFS volume: those listed under `pools`, else every inference pool.

    An existing server is mounted by any pool. EFS never is by hybrid pools: the EFS CSI driver is not among the
    add-ons AWS validated for EKS Hybrid Nodes (Amazon EKS User Guide,
    https://docs.aws.amazon.com/eks/latest/userguide/hybrid-nodes-add-ons.html).
    """
    listed = [p for p in pool_plans if (p.name in config.pools if config.pools is not None else p.role == "inference")]
    return [p for p in listed if p.kind == "aws"] if config.kind == "efs" else listed


def nfs_node_label(volume: str) -> str:
    """The node label (`gpu-clusters/nfs-<volume>`, value "true") the nodes of every pool mounting an existing NFS
    volume carry, and the volume's node affinity selects."""
    return f"{tags.PREFIX}/nfs-{volume}"


def with_nfs_labels(plans: Sequence[PoolPlan], config: NfsConfig | None) -> list[PoolPlan]:
    """The plans, each pool that mounts an existing NFS server (`nfs_pools`) with the volume's node label added."""
    if config is None or config.kind != "existing":
        return list(plans)
    mounting = {p.name for p in nfs_pools(config, plans)}
    label = nfs_node_label(config.name)
    return [dataclasses.replace(p, labels={**p.labels, label: "true"}) if p.name in mounting else p for p in plans]


def nfs_node_affinity(volume: str) -> dict[str, Any]:
    """A PersistentVolume's `nodeAffinity` to the nodes labelled `nfs_node_label(volume)=true`.

    The scheduler places a pod that uses such a volume only on nodes the affinity selects ([K8SEVICT]: Kubernetes
    docs, "Persistent Volumes", Node Affinity; the VolumeBinding plugin), so a pod of another pool that claims the
    existing NFS share stays Pending with a scheduling event instead of starting on a node that cannot reach the
    server and failing to mount. The term names a label, not the pools: the API server refuses any change to a
    volume's node affinity once set (mutable only behind the alpha `MutablePVNodeAffinity` gate, [K8SPVAFFINITY]),
    so a change to `storage.nfs.pools` changes node labels, never the volume. Shaped as the Kubernetes API's
    `VolumeNodeAffinity`.
    """
    term = {"matchExpressions": [{"key": nfs_node_label(volume), "operator": "In", "values": ["true"]}]}
    return {"required": {"nodeSelectorTerms": [term]}}


def mounting_zones(pools: Iterable[PoolPlan]) -> list[str]:
    """The AZs the given pools run in, in the order the pools list them (hybrid pools have none)."""
    return list(dict.fromkeys(zone for pool in pools for zone in pool.availability_zones))


def lustre_availability_zone(config: LustreConfig, pools: Sequence[PoolPlan], network_zones: Sequence[str]) -> str:
    """The one AZ of the file system: as configured, else where its pools run, else the network's first AZ.

    FSx for Lustre takes exactly one subnet ([BC] `SubnetIds`, aws-gpu-facts.md §3a), and EFA traffic does not
    cross AZs (§2), so it belongs next to the training pools. `components.validation` rejects an AZ without a
    training pool and pools spread over several AZs.
    """
    if config.availability_zone:
        return config.availability_zone
    zones = mounting_zones(pools) or list(network_zones)
    if not zones:
        raise ValueError("storage.lustre: no availability zone to place the file system in")
    return zones[0]


# ------------------------------------------------------------------------------------------------ security groups
@dataclass(frozen=True)
class SecurityRule:
    """One security-group rule: on the file system's group or the nodes' group, towards the other or itself."""

    on: Literal["filesystem", "nodes"]
    direction: Literal["ingress", "egress"]
    peer: Literal["self", "filesystem", "nodes"]
    protocol: Literal["tcp", "-1"]
    from_port: int | None
    to_port: int | None
    description: str

    @property
    def name(self) -> str:
        """A stable resource-name suffix, e.g. `fs-in-nodes-tcp-988` or `nodes-out-filesystem-all`."""
        ports = (
            "all"
            if self.protocol == "-1"
            else f"tcp-{self.from_port}" + (f"-{self.to_port}" if self.to_port != self.from_port else "")
        )
        side = "fs" if self.on == "filesystem" else "nodes"
        return f"{side}-{'in' if self.direction == 'ingress' else 'out'}-{self.peer}-{ports}"


def lustre_security_rules(efa_enabled: bool) -> list[SecurityRule]:
    """The rules between a Lustre file system's security group and the nodes' security group.

    LNET ports 988 and 1018-1023 between the file servers themselves and between servers and clients, both ways
    (§3d). An EFA-enabled file system also needs all traffic to and from its own group "and the security group of
    the clients if clients reside in a different security group" (FSx Lustre guide, cannot-create-fs.html; §3c),
    on both groups: EFA's SRD traffic is authorized by group membership, not by CIDR (§2).
    """
    rules: list[SecurityRule] = []
    for low, high in LUSTRE_TCP_PORTS:
        rules += _between_servers_and_clients(
            "tcp", low, high, f"Lustre LNET TCP {low}" + (f"-{high}" if high != low else "")
        )
    if efa_enabled:
        rules += _between_servers_and_clients("-1", None, None, "EFA-enabled Lustre: all traffic")
    return rules


def _between_servers_and_clients(
    protocol: Literal["tcp", "-1"], low: int | None, high: int | None, what: str
) -> list[SecurityRule]:
    """The same traffic allowed both ways among the file servers, and between them and the client nodes."""
    return [
        SecurityRule("filesystem", "ingress", "self", protocol, low, high, f"{what} between file servers"),
        SecurityRule("filesystem", "egress", "self", protocol, low, high, f"{what} between file servers"),
        SecurityRule("filesystem", "ingress", "nodes", protocol, low, high, f"{what} from Lustre clients"),
        SecurityRule("filesystem", "egress", "nodes", protocol, low, high, f"{what} to Lustre clients"),
        SecurityRule("nodes", "ingress", "filesystem", protocol, low, high, f"{what} from the file servers"),
        SecurityRule("nodes", "egress", "filesystem", protocol, low, high, f"{what} to the file servers"),
    ]


# ---------------------------------------------------------------------------------------------- data repositories
def bucket_prefix(cluster_name: str, file_system_name: str) -> str:
    """The data bucket's name prefix: cluster and file system names, lowercased to S3's alphabet, <= 37 chars."""
    raw = re.sub(r"[^a-z0-9-]+", "-", f"{cluster_name}-{file_system_name}-data".lower()).strip("-")
    return raw[: BUCKET_PREFIX_MAX - 1].rstrip("-") + "-"


def needs_stack_bucket(config: LustreConfig) -> bool:
    """Whether some association has no `dataRepositoryPath` and so uses the bucket the stack creates."""
    return config.create_bucket and any(r.data_repository_path is None for r in config.data_repositories)


def data_repository_path(repository: DataRepository, stack_bucket: str | None) -> str:
    """`s3://bucket/prefix/` of an association: the configured path, or the stack's bucket at `prefix`."""
    if repository.data_repository_path is not None:
        return repository.data_repository_path
    if stack_bucket is None:
        raise ValueError(f"{repository.file_system_path}: no dataRepositoryPath and no bucket created by the stack")
    prefix = repository.prefix.strip("/")
    return f"s3://{stack_bucket}/{prefix}/" if prefix else f"s3://{stack_bucket}/"


def path_slug(file_system_path: str) -> str:
    """A resource-name-safe slug of a file system path (`/datasets/raw` -> `datasets-raw`, `/` -> `root`).

    Associations are named by path, not by list position, so reordering the list replaces nothing.
    """
    slug = re.sub(r"[^a-z0-9]+", "-", file_system_path.lower()).strip("-")
    return slug or "root"


# ---------------------------------------------------------------------------------------------- Kubernetes side
def claim_name(volume: KubernetesVolume, file_system_name: str) -> str:
    """The PersistentVolumeClaim pods mount: as configured, else the file system's config name."""
    return volume.claim_name or file_system_name


def nfs_mount_options(mount: NfsMount, extra: Sequence[str] = ()) -> list[str]:
    """The mount options of an existing NFS server's volume, in nfs(5) spelling, then the extra ones as given.

    csi-driver-nfs passes a PersistentVolume's `mountOptions` to `mount -t nfs` on the node (pkg/nfs/nodeserver.go,
    `NodePublishVolume`: the volume capability's mount flags).
    """
    return [
        f"nfsvers={mount.nfs_version}",
        f"nconnect={mount.nconnect}",
        f"rsize={mount.rsize}",
        f"wsize={mount.wsize}",
        "hard" if mount.hard else "soft",
        f"timeo={mount.timeo}",
        f"retrans={mount.retrans}",
        *extra,
    ]


def is_nfs_transfer_size(size: int) -> bool:
    """Whether the Linux NFS client uses `size` as given for `rsize`/`wsize` rather than rounding it down."""
    if size < NFS_PAGE_SIZE:
        return size & (size - 1) == 0
    return size % NFS_PAGE_SIZE == 0


def mount_option_key(option: str) -> str:
    """The name of a mount option: `rsize=65536` -> `rsize`, `hard` -> `hard`."""
    return option.split("=", 1)[0].strip().lower()


def nfs_volume_handle(server: str, share: str) -> str:
    """The static PersistentVolume's `volumeHandle`: csi-driver-nfs's `{server}#{share}#{subdir}` with no sub-directory
    (docs/driver-parameters.md, "PV/PVC usage (static provisioning)": unique for every share in the cluster)."""
    return f"{server}#{share}#"


def claim_namespaces(storage: StorageConfig) -> list[str]:
    """The workload namespaces: those of the file systems' claims, sorted, without repeats."""
    return sorted({fs.kubernetes.namespace for fs in (storage.lustre, storage.nfs) if fs is not None})


# --------------------------------------------------------------------------------------------------- throughput
def efs_throughput_mbps(config: NfsConfig) -> float | None:
    """Aggregate EFS read throughput the plan counts on: the provisioned figure, or the Elastic floor.

    Bursting throughput depends on the data stored and the burst credit balance, so it has no figure at plan time.
    """
    if config.throughput_mode == "provisioned" and config.provisioned_throughput_mibps is not None:
        return config.provisioned_throughput_mibps * MB_PER_MIB
    if config.throughput_mode == "elastic":
        return EFS_ELASTIC_READ_GIBPS_MIN * MB_PER_GIB
    return None


def nfs_throughput_mbps(config: NfsConfig) -> float | None:
    """Throughput of the shared NFS volume: EFS by its throughput mode, an existing server by its bandwidth."""
    if config.kind == "efs":
        return efs_throughput_mbps(config)
    return config.bandwidth_gbps * MB_PER_GBIT if config.bandwidth_gbps is not None else None


def max_gpus(pools: Iterable[PoolPlan]) -> int:
    """GPUs of the pools at their maximum size: the most readers that share the file system at once."""
    return sum(p.max_nodes * p.gpus_per_node for p in pools)


def per_gpu_mbps(
    throughput_mbps: float | None, pools: Sequence[PoolPlan], per_client_mbps: float | None = None
) -> float | None:
    """What each GPU gets when every GPU of the mounting pools reads at once: the aggregate split evenly, and no
    more than its node's share of the per-client limit where the service has one (EFS)."""
    gpus = max_gpus(pools)
    if throughput_mbps is None or gpus == 0:
        return None
    share = throughput_mbps / gpus
    if per_client_mbps is not None:
        busiest = max(p.gpus_per_node for p in pools if p.gpus_per_node > 0 and p.max_nodes > 0)
        share = min(share, per_client_mbps / busiest)
    return share


def storage_summary(
    storage: StorageConfig, network_zones: Sequence[str], pool_plans: Sequence[PoolPlan]
) -> list[dict[str, Any]]:
    """The plan summary's `storage` list (docs/architecture.md#the-plan-json-contract): one entry per file system."""
    out: list[dict[str, Any]] = []
    lustre = storage.lustre
    if lustre is not None:
        pools = lustre_pools(lustre, pool_plans)
        throughput = throughput_mbps(lustre)
        out.append(
            {
                "name": lustre.name,
                "kind": "lustre",
                "capacityGiB": lustre.storage_capacity_gib,
                "throughputMBps": throughput,
                "mountedBy": [p.name for p in pools],
                "gpus": max_gpus(pools),
                "throughputPerGpuMBps": per_gpu_mbps(throughput, pools),
                "deploymentType": lustre.deployment_type,
                "perUnitThroughputMBpsPerTiB": per_unit_throughput(lustre),
                "efaEnabled": lustre.efa_enabled,
                "availabilityZone": lustre_availability_zone(lustre, pools, network_zones),
                "claim": f"{lustre.kubernetes.namespace}/{claim_name(lustre.kubernetes, lustre.name)}",
            }
        )
    nfs = storage.nfs
    if nfs is not None:
        pools = nfs_pools(nfs, pool_plans)
        nfs_mbps = nfs_throughput_mbps(nfs)
        per_client = EFS_PER_CLIENT_MIBPS * MB_PER_MIB if nfs.kind == "efs" else None
        entry: dict[str, Any] = {
            "name": nfs.name,
            "kind": "efs" if nfs.kind == "efs" else "nfs",
            "capacityGiB": nfs.capacity_gib,
            "throughputMBps": nfs_mbps,
            "mountedBy": [p.name for p in pools],
            "gpus": max_gpus(pools),
            "throughputPerGpuMBps": per_gpu_mbps(nfs_mbps, pools, per_client),
            "claim": f"{nfs.kubernetes.namespace}/{claim_name(nfs.kubernetes, nfs.name)}",
        }
        if nfs.kind == "efs":
            entry["throughputMode"] = nfs.throughput_mode
        else:
            entry["server"] = f"{nfs.server}:{nfs.share}"
            entry["mountOptions"] = nfs_mount_options(nfs.mount, nfs.mount_options)
        out.append(entry)
    return out
