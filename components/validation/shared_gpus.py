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


def _share(workload: ServingWorkload) -> float:
    """The share of a GPU's memory one replica takes at start."""
    share = workload.gpu_memory_utilization
    return share if share is not None else VLLM_DEFAULT_MEMORY_SHARE


def _worst_gpu(
    workloads: list[tuple[str, ServingWorkload]], slots: int, sharing: int
) -> list[tuple[str, ServingWorkload]]:
    """The replicas one GPU can hold, largest share first (each workload up to its `replicas.max`): the fullest GPU
    the scheduler can make."""
    replicas = [(path, w) for path, w in workloads for _ in range(min(w.replicas.max or slots, slots))]
    return sorted(replicas, key=lambda r: -_share(r[1]))[:sharing]


def serving_memory_share_is_a_field(p: Parsed) -> Iterator[Problem]:
    """vLLM's memory share is given as `gpuMemoryUtilization`, which the plan passes as `--gpu-memory-utilization`
    and validation checks against the GPUs' sharing, not in `extraArgs`, which validation does not read."""
    for path, workload, _ in _on_pools(p):
        if any(arg == FLAG or arg.startswith(f"{FLAG}=") for arg in workload.extra_args):
            yield Problem(
                f"{path}.extraArgs",
                f"{FLAG} is set by gpuMemoryUtilization, which validation checks against the GPUs' sharing; "
                "remove it from extraArgs and set gpuMemoryUtilization",
            )


def serving_replicas_fit_a_shared_gpu(p: Parsed) -> Iterator[Problem]:
    """On a time-sliced pool the replicas that share one GPU must fit its memory together. vLLM takes
    `--gpu-memory-utilization` of the whole GPU's memory at start, 0.9 by default, and refuses to start when less
    than that is free ([VLLMMEM] vllm/v1/worker/gpu_worker.py: "Free memory on device ... is less than desired GPU
    memory utilization"), so a second replica on the same GPU fails. With `n` replicas able to share a GPU (the
    largest shares first, each workload up to its `replicas.max`), their shares must sum to at most 0.9, the
    default's share: 0.9 / n each when they are equal."""
    on_pool: dict[str, list[tuple[str, ServingWorkload]]] = {}
    pools: dict[str, NodePool] = {}
    for path, workload, pool in _on_pools(p):
        on_pool.setdefault(pool.name, []).append((path, workload))
        pools[pool.name] = pool
    for name, workloads in on_pool.items():
        pool = pools[name]
        sharing = _sharing(p, pool)
        if sharing < 2:
            continue
        slots = pool.device_plugin.time_slicing_replicas
        worst = _worst_gpu(workloads, slots, sharing)
        total = sum(_share(w) for _, w in worst)
        if total <= SHARED_MEMORY_BUDGET + 1e-9:
            continue
        fair = int(SHARED_MEMORY_BUDGET / sharing * 100) / 100
        for path, workload in workloads:
            if not any(path == named for named, _ in worst):
                continue
            share = workload.gpu_memory_utilization
            taken = f"{share:g} of" if share is not None else f"vLLM's default {VLLM_DEFAULT_MEMORY_SHARE:g} of"
            yield Problem(
                f"{path}.gpuMemoryUtilization",
                f"{sharing} replicas can share one GPU of {pool.name} (timeSlicingReplicas {slots}), and each takes "
                f"{taken} its memory at start, {round(total, 3):g} together on one GPU (more than "
                f"{SHARED_MEMORY_BUDGET:g}), so not all of them start; set gpuMemoryUtilization so the replicas on "
                f"one GPU sum to at most {SHARED_MEMORY_BUDGET:g}, e.g. at most {fair:g} "
                f"({SHARED_MEMORY_BUDGET:g} / {sharing}) each, or set replicas.max to 1 per GPU",
            )


def serving_replicas_use_one_shared_gpu(p: Parsed) -> Iterator[Problem]:
    """A replica on a time-sliced pool asks for one `nvidia.com/gpu`: the device plugin hands out replicas of GPUs
    without regard to which GPU they come from, so a request for two may be two slices of the same GPU ([NVDP]
    README "With CUDA Time-Slicing": it "creates ... references to each GPU and indiscriminately hands them out"),
    and vLLM's tensor parallelism would then put two ranks on one GPU."""
    for path, workload, pool in _on_pools(p):
        if pool.device_plugin.time_slicing_replicas > 1 and workload.gpus_per_replica > 1:
            yield Problem(
                f"{path}.gpusPerReplica",
                f"{pool.name} time-slices its GPUs (timeSlicingReplicas "
                f"{pool.device_plugin.time_slicing_replicas}), so {workload.gpus_per_replica} GPUs per replica may "
                "be slices of one GPU; set gpusPerReplica: 1 or use a pool of whole GPUs",
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


RULES = (
    serving_memory_share_is_a_field,
    serving_replicas_fit_a_shared_gpu,
    serving_replicas_use_one_shared_gpu,
    serving_replicas_use_one_mig_device,
)
