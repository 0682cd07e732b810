"""Check `topology`: one pod per GPU pool runs `nvidia-smi topo -m` on a Ready node; the matrix must show the
pool's GPU count and the interconnect the catalog gives (`expectations.interconnect`): NVLink `NV<links>` between
every pair on NVSwitch types (NV18 on p5), PCIe paths (PIX/PXB/PHB/NODE/SYS) on PCIe GPUs, where NVLink bridges
between pairs are allowed. The pod requests every `nvidia.com/gpu` slot of the node (all time-slicing replicas),
so it sees every physical GPU; the matrix counts physical GPUs. A MIG pool is skipped: its pods get MIG devices,
which have no NVLink or peer-to-peer paths between them ([MIGLIMITS]), so the whole-GPU
matrix says nothing about what they get.
"""

from __future__ import annotations

from blueprint.verify.context import Context, node_name, whole_gpu_pools
from blueprint.verify.expectations import Interconnect
from blueprint.verify.model import PodsStopped, Result
from blueprint.verify.parsers import PCIE_LINKS, ParseError, Topology, nvlink_count, parse_topology
from blueprint.verify.pods import DEFAULT_RUN_AS, NODE_NAME_LABEL
from components.planning.check_pods import gpu_resources, pod_spec

CHECK = "topology"


def judge(topology: Topology, gpus: int, expected: Interconnect | None) -> tuple[bool, str]:
    """Whether a parsed matrix is what the pool promises, and why not."""
    if len(topology.gpus) != gpus:
        return False, f"{len(topology.gpus)} GPUs in the matrix, expected {gpus}"
    codes = sorted({code for _, _, code in topology.pairs()})
    if expected is None:
        return True, f"links {', '.join(codes) or '-'} (the catalog gives no interconnect to compare)"
    if expected.nvlink:
        want = f"NV{expected.links}" if expected.links else "NV<n>"
        bad = [
            f"{a}-{b} {code}"
            for a, b, code in topology.pairs()
            if nvlink_count(code) is None or (expected.links is not None and nvlink_count(code) != expected.links)
        ]
        if bad:
            return False, f"expected {want} between every GPU pair; got {', '.join(bad[:4])}" + (
                " ..." if len(bad) > 4 else ""
            )
        return True, f"{want} between all {len(topology.gpus)} GPUs"
    unknown = [c for c in codes if c not in PCIE_LINKS and nvlink_count(c) is None]
    if unknown:
        return False, f"unexpected link codes {', '.join(unknown)}"
    return True, f"PCIe paths {', '.join(codes)} between {len(topology.gpus)} GPUs"


def check(ctx: Context) -> list[Result]:
    results: list[Result] = []
    mig_reason = "its pods get MIG devices, with no NVLink or peer-to-peer path between them"
    for pool, ready in whole_gpu_pools(ctx, CHECK, mig_reason, results):
        node = node_name(ready[0])
        body = pod_spec(
            ctx.session.name(CHECK, pool.name),
            ctx.session.labels(CHECK),
            ctx.options.cuda_image,
            ["nvidia-smi", "topo", "-m"],
            {NODE_NAME_LABEL: node},
            pool.tolerations,
            gpu_resources(pool.gpus_per_node),
            run_as=DEFAULT_RUN_AS,
            runtime_class=pool.runtime_class,
        )
        try:
            outcome = ctx.session.run(body, ctx.budget())
        except PodsStopped as error:  # this pool only: the other pools still run
            results.append(Result(CHECK, f"{pool.name}/{node}", "error", str(error), nodes=(node,)))
            continue
        finally:
            ctx.session.cleanup()
        if outcome.phase != "Succeeded":
            results.append(Result(CHECK, f"{pool.name}/{node}", "error", f"pod {outcome.phase}: {outcome.log[-400:]}"))
            continue
        try:
            topology = parse_topology(outcome.log)
        except ParseError as error:
            results.append(Result(CHECK, f"{pool.name}/{node}", "error", str(error)))
            continue
        ok, detail = judge(topology, pool.physical_gpus, pool.interconnect)
        expected = pool.interconnect.description if pool.interconnect else None
        results.append(
            Result(
                CHECK,
                f"{pool.name}/{node}",
                "pass" if ok else "fail",
                detail,
                len(topology.gpus),
                expected,
                () if ok else (node,),
            )
        )
    return results
