"""Data rules: file systems and buckets encrypted, stateful resources protected, Lustre sizes on the FSx API's
steps (shared with the storage planner, `components.planning.lustre`), buckets versioned and private.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from components.planning.lustre import EFA_INCREMENTS, PERSISTENT_2_THROUGHPUTS, SSD_FIRST_STEPS, SSD_INCREMENT
from components.planning.stateful import STATEFUL_KINDS, StatefulKind
from components.tags import STATEFUL
from policies.resources import (
    BUCKET_ENCRYPTION,
    BUCKET_PUBLIC_ACCESS_BLOCK,
    BUCKET_VERSIONING,
    BUCKETS,
    EFS,
    KMS_KEY,
    LUSTRE,
    Resource,
    Stack,
    get,
    items,
    truthy,
)
from policies.rules.signatures import Config, StackViolations


def storage_encrypted(fs: Resource, config: Config) -> Iterator[str]:
    """File systems are encrypted at rest, with the cluster's KMS key when `requireKmsKey`.

    EFS encrypts only when asked (`encrypted` defaults to false, [BC] efs CreateFileSystem). FSx for Lustre always
    encrypts at rest, but only PERSISTENT deployment types take a customer-managed key; SCRATCH types use an
    FSx-managed key (https://docs.aws.amazon.com/fsx/latest/LustreGuide/encryption-at-rest.html).
    """
    require_kms = bool(config.get("requireKmsKey", False))
    if fs.type == EFS:
        if not truthy(fs.get("encrypted", default=False)):
            yield f"EFS file system '{fs.name}' is not encrypted at rest (encrypted: true)"
        elif require_kms and not fs.get("kmsKeyId"):
            yield f"EFS file system '{fs.name}' is encrypted without a KMS key (kmsKeyId)"
    elif fs.type == LUSTRE and require_kms:
        deployment = str(fs.get("deploymentType", default=LUSTRE_API_DEFAULT_DEPLOYMENT))
        if deployment.startswith("SCRATCH"):
            yield (
                f"Lustre file system '{fs.name}' is {deployment}, which cannot use a KMS key of yours; "
                "use PERSISTENT_2 with kmsKeyId"
            )
        elif not fs.get("kmsKeyId"):
            yield f"Lustre file system '{fs.name}' is encrypted only with the FSx-managed key; set kmsKeyId"


#: Types whose loss loses data, by the stateful kinds the components protect (`components.planning.stateful`):
#: file systems, buckets and the KMS keys that decrypt them.
STATEFUL_TYPES_BY_KIND: Mapping[StatefulKind, frozenset[str]] = {
    "file-system": frozenset({LUSTRE, EFS}),
    "bucket": frozenset(BUCKETS),
    "kms-key": frozenset({KMS_KEY}),
}
STATEFUL_TYPES = frozenset(t for kind in STATEFUL_KINDS for t in STATEFUL_TYPES_BY_KIND[kind])


def stateful_protected(r: Resource, config: Config) -> Iterator[str]:
    """Stateful resources carry Pulumi's `protect` option, so no `destroy` or replacement deletes them by accident.

    Stateful means a file system, a bucket, a KMS key, or any resource tagged `gpu-clusters/stateful=true`
    (https://www.pulumi.com/docs/iac/concepts/options/protect/).
    """
    stateful = r.type in STATEFUL_TYPES or r.tags().get(STATEFUL) == "true"
    if stateful and not r.protect:
        yield f"{r.type.split(':')[-1]} '{r.name}' holds state but is not protected (ResourceOptions(protect=True))"


#: FSx for Lustre API default deployment type when none is given ([BC] `LustreDeploymentType`).
LUSTRE_API_DEFAULT_DEPLOYMENT = "SCRATCH_1"


#: SCRATCH_1: 1200, 2400, then increments of 3600 GiB ([BC] CreateFileSystem `StorageCapacity`).
SCRATCH_1_FIRST_STEPS = (1200, 2400)


SCRATCH_1_INCREMENT = 3600


#: PERSISTENT_1: SSD takes 50/100/200 MB/s/TiB on the SSD steps; HDD takes 12 or 40 MB/s/TiB and grows in
#: 6000 or 1800 GiB steps ([BC] `PerUnitStorageThroughput`, `StorageCapacity`).
PERSISTENT_1_SSD_THROUGHPUTS = (50, 100, 200)


PERSISTENT_1_HDD_INCREMENTS = {12: 6000, 40: 1800}


def lustre_valid_size(fs: Resource, config: Config) -> Iterator[str]:
    """Lustre storage capacity and per-unit throughput are on the steps the FSx API accepts.

    The API rejects other values at create time, after the rest of the stack is half built; the steps are the
    planner's (`components.planning.lustre`, [BC] and the FSx guide) plus the deployment types the blueprint does
    not create itself (SCRATCH_1, PERSISTENT_1). EFA needs PERSISTENT_2 with a metadata configuration ([3c]).
    """
    deployment = str(fs.get("deploymentType", default=LUSTRE_API_DEFAULT_DEPLOYMENT))
    capacity = int(fs.get("storageCapacity", default=0))
    throughput = fs.get("perUnitStorageThroughput")
    storage_type = str(fs.get("storageType", default="SSD"))
    efa = truthy(fs.get("efaEnabled", default=False))
    where = f"Lustre file system '{fs.name}' ({deployment}, {capacity} GiB)"

    def on_steps(first: tuple[int, ...], step: int) -> bool:
        return capacity in first or (capacity > 0 and capacity % step == 0)

    if efa:
        if deployment != "PERSISTENT_2":
            yield f"{where}: EFA needs PERSISTENT_2"
        if fs.get("metadataConfiguration") is None:
            yield f"{where}: EFA needs a metadataConfiguration"
    if deployment == "PERSISTENT_2":
        if throughput not in PERSISTENT_2_THROUGHPUTS:
            valid = list(PERSISTENT_2_THROUGHPUTS)
            yield f"{where}: perUnitStorageThroughput {throughput} is not one of {valid}"
        elif efa:
            step = EFA_INCREMENTS[int(throughput)]
            if capacity <= 0 or capacity % step:
                yield f"{where}: an EFA-enabled file system at {throughput} MB/s/TiB grows in steps of {step} GiB"
        elif not on_steps(SSD_FIRST_STEPS, SSD_INCREMENT):
            yield f"{where}: capacity must be 1200, 2400 or a multiple of {SSD_INCREMENT} GiB"
    elif deployment == "SCRATCH_2" or deployment == "SCRATCH_1":
        if throughput is not None:
            yield f"{where}: SCRATCH file systems take no perUnitStorageThroughput"
        first, step = (
            (SSD_FIRST_STEPS, SSD_INCREMENT)
            if deployment == "SCRATCH_2"
            else (SCRATCH_1_FIRST_STEPS, SCRATCH_1_INCREMENT)
        )
        if not on_steps(first, step):
            yield f"{where}: capacity must be {first[0]}, {first[1]} or a multiple of {step} GiB"
    elif deployment == "PERSISTENT_1":
        if storage_type == "HDD":
            if throughput not in PERSISTENT_1_HDD_INCREMENTS:
                yield f"{where}: HDD perUnitStorageThroughput must be 12 or 40, not {throughput}"
            elif capacity <= 0 or capacity % (step := PERSISTENT_1_HDD_INCREMENTS[int(throughput)]):
                yield f"{where}: HDD at {throughput} MB/s/TiB grows in steps of {step} GiB"
        else:
            if throughput not in PERSISTENT_1_SSD_THROUGHPUTS:
                valid = list(PERSISTENT_1_SSD_THROUGHPUTS)
                yield f"{where}: SSD perUnitStorageThroughput must be one of {valid}, not {throughput}"
            if not on_steps(SSD_FIRST_STEPS, SSD_INCREMENT):
                yield f"{where}: capacity must be 1200, 2400 or a multiple of {SSD_INCREMENT} GiB"
    else:
        yield f"{where}: unknown deployment type"


def s3_bucket_hardened(stack: Stack, config: Config) -> StackViolations:
    """Buckets (checkpoints, datasets) keep versions, block every kind of public access, and use SSE-KMS when
    `requireKmsKey`.

    Versioning lets a bad checkpoint write be rolled back; the four public access block settings stop a policy or
    ACL from exposing data (https://docs.aws.amazon.com/AmazonS3/latest/userguide/access-control-block-public-access.html).
    S3 already encrypts every new object with SSE-S3 (since 2023-01-05,
    https://docs.aws.amazon.com/AmazonS3/latest/userguide/default-encryption-faq.html), so only a KMS requirement
    needs an explicit configuration.
    """
    require_kms = bool(config.get("requireKmsKey", False))
    settings = ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")

    def covering(types: Any, bucket: Resource) -> list[Resource]:
        found = []
        for r in stack.of_type(types):
            value = r.get("bucket") if "bucket" not in r.property_dependencies else None
            if bucket in stack.referenced(r, "bucket", [value] if isinstance(value, str) else [], BUCKETS):
                found.append(r)
        return found

    for bucket in stack.of_type(BUCKETS):
        versioned = truthy(bucket.get("versioning", "enabled", default=False)) or any(
            v.get("versioningConfiguration", "status") == "Enabled" for v in covering(BUCKET_VERSIONING, bucket)
        )
        if not versioned:
            yield (f"bucket '{bucket.name}' is not versioned", bucket.urn)
        blocks = covering(BUCKET_PUBLIC_ACCESS_BLOCK, bucket)
        if not any(all(truthy(b.get(s, default=False)) for s in settings) for b in blocks):
            yield (f"bucket '{bucket.name}' does not block public access ({', '.join(settings)})", bucket.urn)
        if require_kms:
            rules = [bucket.get("serverSideEncryptionConfiguration", "rule")] + [
                rule for c in covering(BUCKET_ENCRYPTION, bucket) for rule in items(c.get("rules"))
            ]
            algorithms = {get(r, "applyServerSideEncryptionByDefault", "sseAlgorithm") for r in rules}
            if not algorithms & {"aws:kms", "aws:kms:dsse"}:
                yield (f"bucket '{bucket.name}' does not encrypt with a KMS key (SSE-KMS)", bucket.urn)
