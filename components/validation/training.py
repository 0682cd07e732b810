"""Rules on `workloads.training`, the reference training job (docs/training.md#the-reference-job): it runs on a GPU
pool that mounts the Lustre file system and can hold all its workers at once, in the namespace of the Lustre
claim, whose directory its non-root user writes its checkpoints to."""

from __future__ import annotations

from collections.abc import Iterator

from components.config import NodePool, TrainingWorkload
from components.errors import Problem
from components.planning.storage import mounts_lustre
from components.validation.parse import Parsed

PATH = "workloads.training"


def _training(p: Parsed) -> TrainingWorkload | None:
    return p.workloads.training if p.workloads is not None else None


def _pool(p: Parsed, name: str) -> tuple[int, NodePool] | None:
    return next(((index, pool) for index, pool in p.pools if pool.name == name), None)


def training_job_runs_on_a_whole_gpu_pool(p: Parsed) -> Iterator[Problem]:
    """The job names a pool of the stack with NVIDIA GPUs, not partitioned (MIG) or shared (time-slicing): each
    worker takes every whole GPU of its node (`nvidia.com/gpu`), which NCCL and torchrun count on."""
    job = _training(p)
    if job is None or not p.pools_complete:
        return
    found = _pool(p, job.pool)
    if found is None:
        names = ", ".join(pool.name for _, pool in p.pools if pool.role != "system") or "none"
        yield Problem(f"{PATH}.pool", f"no node pool {job.pool}; GPU pools: {names}")
        return
    index, pool = found
    gpus = pool.gpus_per_node if pool.kind == "hybrid" else getattr(p.instances.get(index), "gpu_count", None)
    if gpus == 0:
        yield Problem(f"{PATH}.pool", f"{pool.name} has no GPUs; name a GPU pool")
    elif pool.device_plugin.mig_devices or pool.device_plugin.time_slicing_replicas > 1:
        yield Problem(
            f"{PATH}.pool",
            f"{pool.name} partitions or shares its GPUs (devicePlugin); the job takes whole GPUs: name a pool without "
            "migDevices or timeSlicingReplicas",
        )


def training_job_fits_the_pool(p: Parsed) -> Iterator[Problem]:
    """`nodes` is at most the pool's `scaling.max` (its `nodes` on a hybrid pool): the workers start together
    or not at all, one per node, so a job larger than the pool never starts."""
    job = _training(p)
    found = _pool(p, job.pool) if job is not None else None
    if job is None or found is None:
        return
    _, pool = found
    most = pool.scaling.max if pool.kind == "aws" else (pool.nodes or 0)
    if job.nodes > most:
        yield Problem(
            f"{PATH}.nodes",
            f"{job.nodes} workers, one per node, but pool {pool.name} has at most {most} nodes: at most {most}, or "
            f"raise the pool's {'scaling.max' if pool.kind == 'aws' else 'nodes'}",
        )


def training_job_mounts_lustre(p: Parsed) -> Iterator[Problem]:
    """The job writes its checkpoints to the Lustre claim (`storage.lustre`): the file system exists, its pool
    mounts it, the job runs in the claim's namespace, and the claim's namespace directory is created (its
    `workloadDirectories`), the only place a `restricted` pod may write."""
    job = _training(p)
    if job is None or "storage" in p.damaged:
        return
    lustre = p.storage.lustre if p.storage is not None else None
    if lustre is None:
        yield Problem(PATH, "the job writes its checkpoints to FSx for Lustre: add storage.lustre")
        return
    claim_namespace = lustre.kubernetes.namespace
    if job.namespace is not None and job.namespace != claim_namespace:
        yield Problem(
            f"{PATH}.namespace",
            f"{job.namespace} does not mount the Lustre claim, which is in {claim_namespace}: use {claim_namespace} "
            "or leave the key out",
        )
    if not lustre.workload_directories.enabled:
        yield Problem(
            f"{PATH}.namespace",
            "the job runs as a non-root user and needs the namespace's directory on Lustre: set "
            "storage.lustre.workloadDirectories.enabled to true",
        )
    found = _pool(p, job.pool)
    if found is not None and not mounts_lustre(lustre, found[1]):
        yield Problem(
            f"{PATH}.pool",
            f"{job.pool} does not mount the Lustre file system: add it to storage.lustre.pools, or name a pool "
            "that mounts it",
        )


def training_job_checkpoints(p: Parsed) -> Iterator[Problem]:
    """A checkpoint interval no longer than the run, so the job checkpoints at least once before its end."""
    job = _training(p)
    if job is not None and job.checkpoint_interval > job.steps:
        yield Problem(
            f"{PATH}.checkpointInterval",
            f"{job.checkpoint_interval} steps between checkpoints, more than the {job.steps} steps of the run: at "
            f"most {job.steps}",
        )


RULES = (
    training_job_runs_on_a_whole_gpu_pool,
    training_job_fits_the_pool,
    training_job_mounts_lustre,
    training_job_checkpoints,
)
