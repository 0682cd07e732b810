"""What every check receives: the API, the expectations, the pod session, the options and the node list."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from blueprint.verify.expectations import Expectations, PoolExpectation
from blueprint.verify.kube import KubeApi
from blueprint.verify.model import Result
from blueprint.verify.pods import MANAGED_BY, MANAGED_BY_LABEL, Budget, PodSession
from components import tags
from components.catalog.images import image
from components.planning.compute_types import COMPUTE_TYPE_LABEL

INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
#: `nvidia.com/gpu` and the MIG devices `nvidia.com/mig-<profile>`: what a pod holding GPUs requests.
GPU_RESOURCE_PREFIX = "nvidia.com/"

#: CUDA base image for `nvidia-smi` (the NVIDIA container runtime mounts the driver's nvidia-smi into it).
CUDA_IMAGE = "nvcr.io/nvidia/cuda:12.8.1-base-ubuntu22.04"
#: AWS's EFA-enabled nccl-tests image, tag as awsome-distributed-training's buildspec composes it ([ADTNCCL]).
NCCL_IMAGE = "public.ecr.aws/hpc-cloud/nccl-tests:cuda12.8.1-efa1.43.2-ofiv1.16.3-ncclv2.27.7-1-testsv2.16.9"
#: Python for the storage probe (O_DIRECT reads and writes from several threads, no extra tools).
PROBE_IMAGE = "public.ecr.aws/docker/library/python:3.12-slim"


#: Seconds a test pod may run by default (`--timeout`): `nvidia-smi`, an all-reduce, the storage probe.
RUN_SECONDS = 900.0

#: NVIDIA's DCGM image, a tag NVIDIA's GPU Operator pins (v26.3.x `deployments/gpu-operator/values.yaml`,
#: `dcgm.version`, [GPUOP]): DCGM 4.5.2, the release before the 4.5.3 the pinned exporter embeds, on the same
#: Ubuntu 22.04 base as `CUDA_IMAGE`. `dcgmi diag` runs against the image's own `nv-hostengine` ([DCGMDIAG]).
DCGM_IMAGE = image("dcgm").reference


@dataclass(frozen=True)
class Options:
    dcgm_level: int = 1
    cordon_failed: bool = False
    #: Two-node all-reduce bus bandwidth must reach this fraction of AWS's published figure for the instance
    #: type, else of the pool's EFA fabric bandwidth (GB/s) (`nccl.reference`).
    min_busbw_fraction: float = 0.8
    #: The storage probe must reach this fraction of what one client can get from the file system.
    min_storage_fraction: float = 0.25
    #: Seconds a test pod may run once started; None: the check's own (`RUN_SECONDS`, DCGM's by level).
    timeout_seconds: float | None = None
    #: Seconds a test pod may take to start (scheduled, image pulled), counted apart from its run.
    pull_timeout_seconds: float = 900.0
    cuda_image: str = CUDA_IMAGE
    nccl_image: str = NCCL_IMAGE
    dcgm_image: str = DCGM_IMAGE
    probe_image: str = PROBE_IMAGE
    probe_streams: int = 8
    probe_mib_per_stream: int = 1024


@dataclass
class Context:
    api: KubeApi
    expect: Expectations
    session: PodSession
    options: Options
    _nodes: list[dict[str, Any]] | None = field(default=None, repr=False)

    def budget(self, run_seconds: float = 0.0) -> Budget:
        """The time test pods get: `--pull-timeout` to start, then `--timeout` (else `run_seconds`, else
        `RUN_SECONDS`) to run; each pool's pods get their own."""
        run = self.options.timeout_seconds or run_seconds or RUN_SECONDS
        return Budget(self.options.pull_timeout_seconds, run)

    def nodes(self) -> list[dict[str, Any]]:
        if self._nodes is None:
            self._nodes = sorted(self.api.list_nodes(), key=node_name)
        return self._nodes

    def pool_nodes(self, pool: PoolExpectation, ready_only: bool = False) -> list[dict[str, Any]]:
        return [n for n in self.nodes() if pool_of(n) == pool.name and (is_ready(n) or not ready_only)]

    def gpu_holders(self) -> dict[str, list[str]]:
        """Node name -> the pods (`<namespace>/<name>`) other than this tool's that hold GPUs there now: a serving
        replica, a training job. Read afresh for each check, since an earlier check's pods are gone by then."""
        holders: dict[str, list[str]] = {}
        for pod in self.api.list_pods(None):
            meta, spec = pod.get("metadata", {}), pod.get("spec", {})
            if (meta.get("labels") or {}).get(MANAGED_BY_LABEL) == MANAGED_BY or not spec.get("nodeName"):
                continue
            if pod.get("status", {}).get("phase") in ("Succeeded", "Failed") or not _requests_gpus(spec):
                continue
            holders.setdefault(spec["nodeName"], []).append(f"{meta.get('namespace', '')}/{meta.get('name', '')}")
        return holders


def mig_skip(check: str, pool: PoolExpectation, why: str) -> Result | None:
    """`skip` for a check that needs whole GPUs on a MIG pool (None on whole GPUs): `skipped: MIG pool (<layout>);
    <why>`. A DRA pool is skipped too: the check's pods ask for `nvidia.com/gpu`, which no device plugin advertises
    there (the health gate checks those nodes through a claim)."""
    if pool.dra:
        return Result(check, pool.name, "skip", f"skipped: DRA pool; {DRA_SKIP}")
    if not pool.mig_layout:
        return None
    return Result(check, pool.name, "skip", f"skipped: MIG pool ({pool.mig_layout}); {why}")


#: Why the pod-based checks skip a DRA pool.
DRA_SKIP = "its GPUs come through resource claims, and the check's pods ask for nvidia.com/gpu"


def _requests_gpus(spec: dict[str, Any]) -> bool:
    for container in [*spec.get("containers", []), *spec.get("initContainers", [])]:
        resources = container.get("resources") or {}
        for amounts in (resources.get("requests") or {}, resources.get("limits") or {}):
            if any(name.startswith(GPU_RESOURCE_PREFIX) and str(n) not in ("0", "") for name, n in amounts.items()):
                return True
    return False


def free_nodes(
    ctx: Context, check: str, pool: PoolExpectation, ready: list[dict[str, Any]], results: list[Result]
) -> list[dict[str, Any]]:
    """The Ready nodes no other pod holds GPUs on. A whole-GPU test pod on a busy node would wait out its timeout
    (its node is fixed, so no autoscaler helps) and report a healthy node as failed; such nodes are reported as
    skipped, naming the pods (pause a serving workload with KEDA's `autoscaling.keda.sh/paused-replicas: "0"`
    annotation on its ScaledObject to test its nodes)."""
    holders = ctx.gpu_holders()
    free = []
    for node in ready:
        held = holders.get(node_name(node), [])
        if held:
            shown = ", ".join(held[:3]) + (f" and {len(held) - 3} more" if len(held) > 3 else "")
            results.append(Result(check, f"{pool.name}/{node_name(node)}", "skip", f"GPUs in use by {shown}"))
        else:
            free.append(node)
    return free


def whole_gpu_pools(
    ctx: Context, check: str, mig_reason: str, results: list[Result]
) -> Iterator[tuple[PoolExpectation, list[dict[str, Any]]]]:
    """The GPU pools a whole-GPU check runs on, each with its Ready nodes that no other pod holds GPUs on
    (`free_nodes`); a MIG pool (`mig_skip`, with `mig_reason`) and a pool with no such node are reported in
    `results` as skipped instead."""
    for pool in ctx.expect.pools:
        if not pool.is_gpu:
            continue
        skipped = mig_skip(check, pool, mig_reason)
        if skipped:
            results.append(skipped)
            continue
        ready = ctx.pool_nodes(pool, ready_only=True)
        if not ready:
            results.append(Result(check, pool.name, "skip", "no Ready node in the pool"))
            continue
        free = free_nodes(ctx, check, pool, ready, results)
        if free:
            yield pool, free


def node_name(node: dict[str, Any]) -> str:
    return str(node.get("metadata", {}).get("name", ""))


def labels(node: dict[str, Any]) -> dict[str, str]:
    return dict(node.get("metadata", {}).get("labels") or {})


def pool_of(node: dict[str, Any]) -> str | None:
    return labels(node).get(tags.POOL)


def instance_type(node: dict[str, Any]) -> str | None:
    return labels(node).get(INSTANCE_TYPE_LABEL)


def compute_type(node: dict[str, Any]) -> str | None:
    return labels(node).get(COMPUTE_TYPE_LABEL)


def is_ready(node: dict[str, Any]) -> bool:
    conditions = node.get("status", {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def allocatable(node: dict[str, Any], resource: str) -> int:
    """An extended resource's allocatable count (absent = 0)."""
    value = (node.get("status", {}).get("allocatable") or {}).get(resource, "0")
    try:
        return int(str(value))
    except ValueError:
        return 0
