"""FSx for Lustre sizing rules: valid capacities, throughput tiers, and the throughput a size buys.

Facts from docs/sources.md: aws-gpu-facts.md §3 ([BC] botocore fsx 2018-03-01 CreateFileSystem text, and the FSx
Lustre guide "increase-storage-capacity" for EFA-enabled file systems).
"""

from __future__ import annotations

from components.config import LustreConfig

#: PERSISTENT_2 SSD per-unit storage throughput, MB/s per TiB ([BC] `PerUnitStorageThroughput`).
PERSISTENT_2_THROUGHPUTS = (125, 250, 500, 1000)
#: SCRATCH_2 has a fixed 200 MB/s per TiB baseline and takes no per-unit setting (FSx Lustre guide, performance).
SCRATCH_2_THROUGHPUT = 200
#: SCRATCH_2 / PERSISTENT_2 SSD: 1200, 2400, then increments of 2400 GiB ([BC] CreateFileSystem StorageCapacity).
SSD_FIRST_STEPS = (1200, 2400)
SSD_INCREMENT = 2400
#: EFA-enabled file systems grow in larger steps that depend on the throughput tier (FSx Lustre guide,
#: increase-storage-capacity): GiB increment per MB/s/TiB tier. That these are also the creation minimums is
#: consistent with AWS's ">10 GB/s" EFA recommendation but not confirmed; we apply them as multiples.
EFA_INCREMENTS = {125: 38400, 250: 19200, 500: 9600, 1000: 4800}
#: USER_PROVISIONED metadata IOPS on SSD: 1500, 3000, 6000, 12000, then multiples of 12000 up to 192000 ([BC]).
METADATA_IOPS_STEPS = (1500, 3000, 6000)
METADATA_IOPS_INCREMENT = 12000
METADATA_IOPS_MAX = 192000
MAX_DATA_REPOSITORY_ASSOCIATIONS = 8


def capacity_increment(config: LustreConfig) -> int:
    if config.efa_enabled and config.per_unit_storage_throughput in EFA_INCREMENTS:
        return EFA_INCREMENTS[config.per_unit_storage_throughput]
    return SSD_INCREMENT


def is_valid_capacity(config: LustreConfig) -> bool:
    size, step = config.storage_capacity_gib, capacity_increment(config)
    if config.efa_enabled:
        return size > 0 and size % step == 0
    return size in SSD_FIRST_STEPS or (size > 0 and size % step == 0)


def nearest_valid_capacities(config: LustreConfig) -> tuple[int, int]:
    """The valid sizes just below and just above the asked one (below is 0 when there is none)."""
    size, step = config.storage_capacity_gib, capacity_increment(config)
    valid = [] if config.efa_enabled else list(SSD_FIRST_STEPS)
    below = max([v for v in valid if v < size] + [size // step * step])
    above = min([v for v in valid if v > size] + [(size // step + 1) * step])
    return below, above


def per_unit_throughput(config: LustreConfig) -> int:
    if config.deployment_type == "SCRATCH_2":
        return SCRATCH_2_THROUGHPUT
    return config.per_unit_storage_throughput or 0


def throughput_mbps(config: LustreConfig) -> float:
    """Aggregate baseline throughput: capacity in TiB x per-unit throughput ([BC]: 2.4 TiB x 50 = 120 MB/s)."""
    return config.storage_capacity_gib / 1024 * per_unit_throughput(config)


def valid_metadata_iops(iops: int) -> bool:
    if iops in METADATA_IOPS_STEPS:
        return True
    return iops % METADATA_IOPS_INCREMENT == 0 and 0 < iops <= METADATA_IOPS_MAX


def paths_overlap(a: str, b: str) -> bool:
    """Two file system paths overlap when one is the other or contains it (`/data` and `/data/raw`)."""
    pa, pb = a.rstrip("/") + "/", b.rstrip("/") + "/"
    return pa.startswith(pb) or pb.startswith(pa)


def automatic_backup_retention_days(config: LustreConfig) -> int:
    """Days of automatic backups the file system is created with: the configured days on an unlinked PERSISTENT_2
    file system, else 0.

    FSx backs up neither scratch file systems nor file systems linked to S3: "File system backups aren't supported
    on file systems that are linked to an Amazon S3 data repository"
    (https://docs.aws.amazon.com/fsx/latest/LustreGuide/fsx-data-repositories.html), and `CreateBackup` accepts
    only persistent file systems that "are not linked to a data repository" ([BC] fsx CreateBackup). A linked file
    system keeps its durable copy in S3. Validation refuses an explicit `backupRetentionDays` above 0 on either.
    """
    if config.deployment_type != "PERSISTENT_2" or config.data_repositories:
        return 0
    return config.backup_retention_days
