"""Rules on serving workloads whose pool shares or partitions its GPUs (`devicePlugin.timeSlicingReplicas`,
`devicePlugin.migDevices`): layouts the scheduler would place but vLLM could not start.
docs/gpu-sharing.md#serving-on-shared-gpus explains both; the sources are in docs/sources.md ([VLLMMEM], [MIGCUDA])."""

from __future__ import annotations

from collections.abc import Iterator

from components.config import NodePool, ServingWorkload
from components.errors import Problem
from components.validation.parse import Parsed

#: vLLM's `--gpu-memory-utilization` default: the share of the whole GPU's memory one server takes at start
#: ([VLLMMEM] vllm/config/cache.py `gpu_memory_utilization`).
VLLM_DEFAULT_MEMORY_SHARE = 0.9
#: What the replicas sharing one GPU may take together: the share vLLM's default gives one server, so the memory it
#: leaves by default for the driver's and each process's CUDA context stays free.
SHARED_MEMORY_BUDGET = VLLM_DEFAULT_MEMORY_SHARE
FLAG = "--gpu-memory-utilization"


def _on_pools(p: Parsed) -> Iterator[tuple[str, ServingWorkload, NodePool]]:
    pools = {pool.name: pool for _, pool in p.pools}
    for index, workload in enumerate(p.workloads.serving if p.workloads is not None else []):
        pool = pools.get(workload.pool)
        if pool is not None:  # an unknown pool: serving_workloads_run_on_gpu_inference_pools says so
            yield f"workloads.serving[{index}]", workload, pool


def _sharing(p: Parsed, pool: NodePool) -> int:
    """How many serving replicas can land on one GPU (or MIG device) of the pool: its time-slicing replicas, or
    fewer when the workloads on it cannot have that many replicas in all (`replicas.max` unset: as many as fit)."""
    slots = pool.device_plugin.time_slicing_replicas
    replicas = 0
    for _, workload, other in _on_pools(p):
        if other.name == pool.name:
            replicas += workload.replicas.max if workload.replicas.max is not None else slots
    return min(slots, replicas)


def serving_replicas_fit_a_shared_gpu(p: Parsed) -> Iterator[Problem]:
    """On a time-sliced pool the replicas that share one GPU must fit its memory together. vLLM takes
    `--gpu-memory-utilization` of the whole GPU's memory at start, 0.9 by default, and refuses to start when less
    than that is free ([VLLMMEM] vllm/v1/worker/gpu_worker.py: "Free memory on device ... is less than desired GPU
    memory utilization"), so a second replica on the same GPU fails. With `n` replicas able to share a GPU, each
    workload on the pool sets `gpuMemoryUtilization` to at most 0.9 / n (the default's share, split). The share is
    given as `gpuMemoryUtilization`, which the plan passes as `--gpu-memory-utilization`, not in `extraArgs`."""
    for path, workload, pool in _on_pools(p):
        if any(arg == FLAG or arg.startswith(f"{FLAG}=") for arg in workload.extra_args):
            yield Problem(
                f"{path}.extraArgs",
                f"{FLAG} is set by gpuMemoryUtilization, which validation checks against the GPUs' sharing; "
                "remove it from extraArgs and set gpuMemoryUtilization",
            )
        sharing = _sharing(p, pool)
        if sharing < 2:
            continue
        share = workload.gpu_memory_utilization
        most = SHARED_MEMORY_BUDGET / sharing
        if (share if share is not None else VLLM_DEFAULT_MEMORY_SHARE) <= most + 1e-9:
            continue
        taken = f"{share:g} of" if share is not None else f"vLLM's default {VLLM_DEFAULT_MEMORY_SHARE:g} of"
        yield Problem(
            f"{path}.gpuMemoryUtilization",
            f"{sharing} replicas can share one GPU of {pool.name} (timeSlicingReplicas "
            f"{pool.device_plugin.time_slicing_replicas}), and each takes {taken} its memory at start, so the "
            f"second does not start; set gpuMemoryUtilization to at most {int(most * 100) / 100:g} "
            f"({SHARED_MEMORY_BUDGET:g} / {sharing}), or set replicas.max to 1 per GPU",
        )


def serving_replicas_use_one_mig_device(p: Parsed) -> Iterator[Problem]:
    """A replica on a MIG pool gets one MIG device: a CUDA process enumerates a single MIG device however many the
    container is given ([MIGCUDA] NVIDIA MIG user guide, "CUDA Device Enumeration"), so vLLM's tensor parallelism
    (`gpusPerReplica`) cannot span MIG devices."""
    for path, workload, pool in _on_pools(p):
        if pool.device_plugin.mig_devices and workload.gpus_per_replica > 1:
            yield Problem(
                f"{path}.gpusPerReplica",
                f"{pool.name} partitions its GPUs into MIG devices and a process sees only one of them, so "
                f"{workload.gpus_per_replica} GPUs per replica cannot start; set gpusPerReplica: 1 (a larger MIG "
                "profile for a larger model) or use a pool of whole GPUs",
            )


RULES = (serving_replicas_fit_a_shared_gpu, serving_replicas_use_one_mig_device)
