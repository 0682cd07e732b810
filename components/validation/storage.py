"""Rules on the `storage` section: FSx for Lustre sizes and tiers, NFS servers, claims and the pools that mount."""

from __future__ import annotations

import re
from collections.abc import Iterator

from components.config import LustreConfig, NfsConfig
from components.errors import Problem
from components.planning.lustre import (
    EFA_INCREMENTS,
    MAX_DATA_REPOSITORY_ASSOCIATIONS,
    PERSISTENT_2_THROUGHPUTS,
    capacity_increment,
    is_valid_capacity,
    nearest_valid_capacities,
    paths_overlap,
    valid_metadata_iops,
)
from components.planning.pools import pool_zones, wants_efa
from components.planning.storage import (
    NFS_MOUNT_KEYS,
    NFS_PAGE_SIZE,
    is_nfs_transfer_size,
    mount_option_key,
    mounts_lustre,
)
from components.validation.network import not_a_zone
from components.validation.parse import Parsed, shown

#: Kubernetes object names (namespaces, claims): DNS-1123 labels, at most 63 characters (Kubernetes "Object Names").
DNS_1123 = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
LUSTRE = "storage.lustre"
NFS = "storage.nfs"


def _file_systems(p: Parsed) -> list[tuple[str, LustreConfig | NfsConfig]]:
    if p.storage is None:
        return []
    return [(key, fs) for key, fs in (("lustre", p.storage.lustre), ("nfs", p.storage.nfs)) if fs is not None]


def claims_are_kubernetes_names(p: Parsed) -> Iterator[Problem]:
    """Namespaces and claim names are DNS-1123 labels (Kubernetes "Object Names"), and the two file systems differ
    in name and, within one namespace, in claim name."""
    systems = _file_systems(p)
    for key, fs in systems:
        for field_name, value in (("namespace", fs.kubernetes.namespace), ("claimName", fs.kubernetes.claim_name)):
            if value is not None and not DNS_1123.match(value):
                yield Problem(
                    f"storage.{key}.kubernetes.{field_name}",
                    f"{shown(value)} is not a Kubernetes name: at most 63 lowercase letters, digits and hyphens",
                )
    if len(systems) == 2:
        (_, lustre), (_, nfs) = systems
        if lustre.name == nfs.name:
            yield Problem(f"{NFS}.name", f"{nfs.name!r} is also the Lustre file system's name; pick another")
        a, b = lustre.kubernetes, nfs.kubernetes
        if a.namespace == b.namespace and a.claim_name and a.claim_name == b.claim_name:
            yield Problem(f"{NFS}.kubernetes.claimName", "the Lustre claim has the same name in that namespace")


def lustre_tier_settings_fit(p: Parsed) -> Iterator[Problem]:
    """PERSISTENT_2 takes a throughput tier (125, 250, 500, 1000 MB/s/TiB), backups, metadata and EFA; SCRATCH_2
    has none of them (FSx API CreateFileSystemLustreConfiguration)."""
    fs = p.storage.lustre if p.storage else None
    if fs is None:
        return
    persistent = fs.deployment_type == "PERSISTENT_2"
    if persistent and fs.per_unit_storage_throughput not in PERSISTENT_2_THROUGHPUTS:
        yield Problem(
            f"{LUSTRE}.perUnitStorageThroughput",
            f"{fs.per_unit_storage_throughput} MB/s/TiB is not a PERSISTENT_2 tier; valid: "
            f"{', '.join(map(str, PERSISTENT_2_THROUGHPUTS))} (FSx API PerUnitStorageThroughput)",
        )
    if not persistent and "per_unit_storage_throughput" in fs.model_fields_set:
        yield Problem(f"{LUSTRE}.perUnitStorageThroughput", "SCRATCH_2 has a fixed 200 MB/s/TiB; remove this key")
    if fs.efa_enabled and not persistent:
        yield Problem(f"{LUSTRE}.efaEnabled", "EFA-enabled Lustre needs deploymentType PERSISTENT_2 (FSx Lustre guide)")
    if fs.efa_enabled and fs.metadata is None:
        yield Problem(f"{LUSTRE}.metadata", "EFA-enabled Lustre needs a metadata configuration, e.g. {mode: AUTOMATIC}")
    if fs.metadata is not None and not persistent:
        yield Problem(f"{LUSTRE}.metadata", "metadata configuration exists only on PERSISTENT_2 (FSx API)")
    if not persistent and fs.backup_retention_days and "backup_retention_days" in fs.model_fields_set:
        yield Problem(f"{LUSTRE}.backupRetentionDays", "SCRATCH_2 file systems have no automatic backups; set 0")


def lustre_metadata_iops_fit(p: Parsed) -> Iterator[Problem]:
    """USER_PROVISIONED metadata names its IOPS: 1500, 3000, 6000, 12000 or a multiple of 12000 up to 192000;
    AUTOMATIC sizes its own (FSx API MetadataConfiguration)."""
    fs = p.storage.lustre if p.storage else None
    if fs is None or fs.metadata is None:
        return
    meta = fs.metadata
    if meta.mode == "USER_PROVISIONED" and meta.iops is None:
        yield Problem(f"{LUSTRE}.metadata.iops", "USER_PROVISIONED metadata needs iops (1500, 3000, 6000, 12000, ...)")
    if meta.mode == "AUTOMATIC" and meta.iops is not None:
        yield Problem(f"{LUSTRE}.metadata.iops", "AUTOMATIC metadata sizes its own IOPS; remove iops")
    if meta.iops is not None and not valid_metadata_iops(meta.iops):
        yield Problem(
            f"{LUSTRE}.metadata.iops",
            f"{meta.iops} is not valid: 1500, 3000, 6000, 12000 or a multiple of 12000 up to 192000 (FSx API)",
        )


def lustre_capacity_is_a_valid_size(p: Parsed) -> Iterator[Problem]:
    """Lustre sizes come in steps: 1200, 2400, then multiples of 2400 GiB, or the EFA increments of the throughput
    tier (FSx CreateFileSystem StorageCapacity); the message names the nearest valid sizes."""
    fs = p.storage.lustre if p.storage else None
    if fs is None:
        return
    persistent = fs.deployment_type == "PERSISTENT_2"
    sizable = not fs.efa_enabled or (persistent and fs.per_unit_storage_throughput in EFA_INCREMENTS)
    if sizable and not is_valid_capacity(fs):
        below, above = nearest_valid_capacities(fs)
        steps = (
            f"multiples of {capacity_increment(fs)} GiB for EFA at {fs.per_unit_storage_throughput} MB/s/TiB"
            if fs.efa_enabled
            else "1200, 2400, then multiples of 2400 GiB"
        )
        nearest = f"{below} or {above}" if below else f"{above}"
        yield Problem(
            f"{LUSTRE}.storageCapacityGib",
            f"{fs.storage_capacity_gib} GiB is not a valid size ({steps}, FSx CreateFileSystem); "
            f"nearest valid: {nearest}",
        )


def lustre_repositories_are_distinct(p: Parsed) -> Iterator[Problem]:
    """At most 8 data repository associations, on distinct, non-nested paths (`/` only alone), each with an S3
    path or the stack's bucket (FSx data repository associations)."""
    fs = p.storage.lustre if p.storage else None
    if fs is None:
        return
    dras = fs.data_repositories
    if len(dras) > MAX_DATA_REPOSITORY_ASSOCIATIONS:
        yield Problem(
            f"{LUSTRE}.dataRepositories",
            f"{len(dras)} associations; FSx allows at most {MAX_DATA_REPOSITORY_ASSOCIATIONS}",
        )
    for j, dra in enumerate(dras):
        where = f"{LUSTRE}.dataRepositories[{j}]"
        for k in range(j):
            if paths_overlap(dra.file_system_path, dras[k].file_system_path):
                yield Problem(
                    f"{where}.fileSystemPath",
                    f"{dra.file_system_path} overlaps {dras[k].file_system_path} (dataRepositories[{k}]); "
                    "FSx needs distinct, non-nested paths",
                )
        if dra.file_system_path == "/" and len(dras) > 1:
            yield Problem(f"{where}.fileSystemPath", "`/` is allowed only for a single association")
        if dra.data_repository_path is None and not fs.create_bucket:
            yield Problem(f"{where}.dataRepositoryPath", "give s3://bucket/prefix/ or set createBucket: true")


#: Why a file system the stack creates in AWS cannot be mounted by hybrid nodes, by config key.
HYBRID_REFUSALS = {
    "lustre": "the FSx CSI driver does not run on EKS Hybrid Nodes (EKS user guide, fsx-csi-create); serve on-prem "
    "pools from storage.nfs with kind: existing",
    "efs": "the EFS CSI driver is not among the add-ons AWS validated for EKS Hybrid Nodes (EKS user guide, "
    "hybrid-nodes-add-ons: only the add-ons listed there are compatible); serve on-prem pools from storage.nfs with "
    "kind: existing",
}


def mounting_pools_exist(p: Parsed) -> Iterator[Problem]:
    """`pools` name node pools of the stack; Lustre and EFS mount only on aws pools, because their CSI drivers do
    not run on EKS Hybrid Nodes (`HYBRID_REFUSALS`); an existing NFS server mounts on any pool."""
    if not p.pools_complete:
        return
    kinds = {pool.name: pool.kind for _, pool in p.pools}
    for key, fs in _file_systems(p):
        if p.damaged_at(f"storage.{key}.kind"):
            continue  # whether hybrid pools may mount it depends on the kind the user meant
        kind = "efs" if isinstance(fs, NfsConfig) and fs.kind == "efs" else key
        for j, name in enumerate(fs.pools or []):
            where = f"storage.{key}.pools[{j}]"
            if name not in kinds:
                yield Problem(where, f"no node pool named {shown(name)}; pools: {', '.join(sorted(kinds))}")
            elif kinds[name] != "aws" and kind in HYBRID_REFUSALS:
                yield Problem(where, f"{name} is a hybrid pool; {HYBRID_REFUSALS[kind]}")


def lustre_sits_with_its_clients(p: Parsed) -> Iterator[Problem]:
    """Lustre lives in one subnet: it needs a pool to mount it (`components.planning.storage.mounts_lustre`, as the
    build decides), and sits in that pool's AZ."""
    fs = p.storage.lustre if p.storage else None
    if fs is None:
        return
    training = [(index, pool) for index, pool in p.pools if mounts_lustre(fs, pool)]
    clients = "training pool" if fs.pools is None else "mounting pool"
    if not training and fs.pools is None and p.pools_complete:
        yield Problem(LUSTRE, "no training pool to mount Lustre; add one or list the pools under storage.lustre.pools")
    if p.network is None or not training:
        return
    zones = {z for i, pool in training for z in pool_zones(pool, p.network, wants_efa(pool, p.instances.get(i)))}
    if fs.availability_zone is not None and (why := not_a_zone(p.region, fs.availability_zone)) is not None:
        yield Problem(f"{LUSTRE}.availabilityZone", why)
    elif fs.availability_zone is not None and fs.availability_zone not in zones:
        yield Problem(
            f"{LUSTRE}.availabilityZone",
            f"{shown(fs.availability_zone)} has no {clients} (they run in {', '.join(sorted(zones))}); Lustre "
            "lives in one subnet, so put it where its clients are",
        )
    elif fs.availability_zone is None and len(zones) > 1:
        yield Problem(
            f"{LUSTRE}.availabilityZone",
            f"its {clients}s span {', '.join(sorted(zones))}; pick the AZ (Lustre takes exactly one subnet)",
        )


def nfs_settings_fit_the_kind(p: Parsed) -> Iterator[Problem]:
    """An existing NFS server gives its address and an absolute export path; EFS (created by the stack) takes
    neither, nor the server's mount options and bandwidth (the EFS CSI driver mounts with its own options, and EFS
    throughput follows `throughputMode`); provisioned throughput names its MiB/s (EFS, 1-3414)."""
    fs = p.storage.nfs if p.storage else None
    if fs is None or p.damaged_at(f"{NFS}.kind"):
        return  # which settings fit depends on the kind the user meant
    if fs.kind == "existing":
        if not fs.server and not p.damaged_at(f"{NFS}.server"):
            yield Problem(f"{NFS}.server", "an existing NFS server needs its address (e.g. nfs.lab.example.com)")
        if not fs.share:
            if not p.damaged_at(f"{NFS}.share"):
                yield Problem(f"{NFS}.share", "an existing NFS server needs the exported path (e.g. /exports/models)")
        elif not fs.share.startswith("/"):
            yield Problem(f"{NFS}.share", f"{shown(fs.share)} must be an absolute export path like /exports/models")
        for field, key in (
            ("throughput_mode", "throughputMode"),
            ("provisioned_throughput_mibps", "provisionedThroughputMibps"),
            ("transition_to_ia", "transitionToIa"),
        ):
            if field in fs.model_fields_set:
                yield Problem(f"{NFS}.{key}", "an EFS setting; an existing NFS server does not read it")
        return
    for field, key in (("server", "server"), ("share", "share"), ("mount", "mount"), ("mount_options", "mountOptions")):
        if field in fs.model_fields_set:
            yield Problem(f"{NFS}.{key}", "only for kind: existing; EFS is created by the stack")
    if "bandwidth_gbps" in fs.model_fields_set:
        yield Problem(f"{NFS}.bandwidthGbps", "only for kind: existing; EFS throughput follows throughputMode")
    if fs.throughput_mode == "provisioned" and fs.provisioned_throughput_mibps is None:
        yield Problem(f"{NFS}.provisionedThroughputMibps", "provisioned throughput needs a MiB/s figure (1-3414)")
    if fs.throughput_mode != "provisioned" and fs.provisioned_throughput_mibps is not None:
        yield Problem(f"{NFS}.provisionedThroughputMibps", "only read with throughputMode: provisioned")


def nfs_mount_options_fit(p: Parsed) -> Iterator[Problem]:
    """Read and write sizes are 1024, 2048 or a multiple of the 4096-byte page (nfs(5): other values are rounded
    down, so the mount would not use the figure written); `mountOptions` adds options and never repeats one `mount`
    sets, so each option has one place."""
    fs = p.storage.nfs if p.storage else None
    if fs is None or fs.kind != "existing":
        return
    for key in ("rsize", "wsize"):
        size = getattr(fs.mount, key)
        if not is_nfs_transfer_size(size):
            rounded = size - size % NFS_PAGE_SIZE if size > NFS_PAGE_SIZE else 1 << (size.bit_length() - 1)
            yield Problem(
                f"{NFS}.mount.{key}",
                f"{size} bytes would be rounded down to {rounded}: give 1024, 2048 or a multiple of {NFS_PAGE_SIZE} "
                "(nfs(5))",
            )
    for j, option in enumerate(fs.mount_options):
        name = mount_option_key(option)
        if not name:
            yield Problem(f"{NFS}.mountOptions[{j}]", "an empty mount option")
        elif name in NFS_MOUNT_KEYS:
            yield Problem(
                f"{NFS}.mountOptions[{j}]",
                f"{shown(option)} is set by storage.nfs.mount ({', '.join(sorted(NFS_MOUNT_KEYS))}); change it there",
            )


def repository_prefix_is_in_the_stack_bucket(p: Parsed) -> Iterator[Problem]:
    """`prefix` places an association in the bucket the stack creates; an association with its own
    `dataRepositoryPath` reads only that path (components.planning.storage.data_repository_path)."""
    fs = p.storage.lustre if p.storage else None
    for i, repository in enumerate(fs.data_repositories if fs else ()):
        if repository.data_repository_path is not None and "prefix" in repository.model_fields_set:
            yield Problem(
                f"{LUSTRE}.dataRepositories[{i}].prefix",
                "only read without dataRepositoryPath (a prefix in the stack's bucket); put it in that path instead",
            )


def storage_class_is_lustre_only(p: Parsed) -> Iterator[Problem]:
    """`kubernetes.storageClass` asks for a StorageClass that provisions more Lustre file systems; EFS always has its
    own StorageClass (`<name>-efs`) and an existing server's share is bound statically, so nothing reads the key
    there."""
    fs = p.storage.nfs if p.storage else None
    if fs is not None and "storage_class" in fs.kubernetes.model_fields_set:
        own = (
            f"EFS always has its own StorageClass, {fs.name}-efs"
            if fs.kind == "efs"
            else "an existing server's share is bound statically, with no StorageClass"
        )
        yield Problem(f"{NFS}.kubernetes.storageClass", f"only Lustre reads it; {own}")


RULES = (
    claims_are_kubernetes_names,
    lustre_tier_settings_fit,
    lustre_metadata_iops_fit,
    lustre_capacity_is_a_valid_size,
    lustre_repositories_are_distinct,
    mounting_pools_exist,
    lustre_sits_with_its_clients,
    nfs_settings_fit_the_kind,
    nfs_mount_options_fit,
    repository_prefix_is_in_the_stack_bucket,
    storage_class_is_lustre_only,
)
