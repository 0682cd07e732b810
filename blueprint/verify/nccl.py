"""Check `nccl`: an all-reduce (nccl-tests `all_reduce_perf`) on every free Ready GPU node (NVLink or PCIe inside
it), and on an EFA pool across pairs that cover every node, a failed pair's nodes then run again with a node that
passed, so the bad node is named.

Invariants: the log must show aws-ofi-nccl selecting EFA ([OFINCCL]); bus bandwidth is held to a fraction of AWS's
published two-node figure for the instance type ([ADTNCCL]), and reported unjudged (`skip`, "no reference") where
none is published; pods take every GPU slot of their node; MIG pools are skipped. How and sources:
docs/design-notes.md#verify-nccl; the user view: docs/operations.md#verifying-a-deploy.
"""

from __future__ import annotations

import base64
from collections.abc import Collection
from dataclasses import dataclass, replace
from math import floor, log2
from typing import Any

from blueprint.verify.context import Context, free_nodes, mig_skip, node_name
from blueprint.verify.expectations import PoolExpectation
from blueprint.verify.model import PodsStopped, Result, Status
from blueprint.verify.parsers import NcclRun, ParseError, parse_nccl
from blueprint.verify.pods import NODE_NAME_LABEL
from components import catalog
from components.planning.autoscaler_tags import EFA_RESOURCE
from components.planning.check_pods import gpu_resources, pod_spec
from components.planning.hugepages import HUGEPAGES_RESOURCE
from components.planning.nccl_environment import NCCL_SIZES

CHECK = "nccl"
#: What AWS's EFA NCCL test workers request besides GPUs and EFA devices ([ADTNCCL] kubernetes/nccl-tests.yaml).
WORKER_HUGEPAGES = "5120Mi"
WORKER_MEMORY = "32000Mi"
SSH_DIR = "/etc/blueprint-verify-ssh"
#: The library directories AWS's manifest puts before the image's own `LD_LIBRARY_PATH`, the aws-ofi-nccl plugin
#: at the `--prefix=/opt/aws-ofi-nccl/install` its Dockerfile builds it with ([ADTNCCL] kubernetes/nccl-tests.yaml and
#: nccl-tests.Dockerfile at the commit that built the pinned tag).
OFI_NCCL_LIB = "/opt/aws-ofi-nccl/install/lib"
LD_LIBRARY_PATH = (
    f"/opt/amazon/openmpi/lib:/opt/nccl/build/lib:/opt/amazon/efa/lib:{OFI_NCCL_LIB}:/usr/local/nvidia/lib"
)
#: Prepends the manifest's directories to the image's value (bash expands `$LD_LIBRARY_PATH` in the container).
EXPORT_LD_LIBRARY_PATH = f"export LD_LIBRARY_PATH={LD_LIBRARY_PATH}:$LD_LIBRARY_PATH"
#: The NCCL tuning of AWS's published run ([ADTNCCL] kubernetes/nccl-tests.yaml): the same buffer and chunk sizes
#: and aws-ofi-nccl's tuner plugin.
NCCL_TUNING = (
    *(f"{name}={value}" for name, value in NCCL_SIZES.items()),
    f"NCCL_TUNER_PLUGIN={OFI_NCCL_LIB}/libnccl-ofi-tuner.so",
)
SSH_PORT = 22
PATH = "/opt/amazon/openmpi/bin:/opt/amazon/efa/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
ALL_REDUCE = "/opt/nccl-tests/build/all_reduce_perf"
#: Open MPI starts its daemons on the workers over SSH, whose sessions do not get the image's PATH: `--prefix` (and
#: an absolute `mpirun`, as AWS's manifest runs it, [ADTNCCL]) tells it where Open MPI lives there.
OPENMPI = "/opt/amazon/openmpi"
MPIRUN = f"{OPENMPI}/bin/mpirun"
GIB = 2**30
#: The largest two-node message size: 16 GiB, where bus bandwidth plateaus on p5 ([ADTNCCL] sample).
LARGEST_SIZE = 16 * GIB
#: With results checked (`-c 1`), nccl-tests allocates a send, a receive and an expected-result buffer of the
#: largest size on every GPU (src/common.cu `AllocateBuffs`, [NCCLTESTS]); a quarter of the GPU's memory per buffer
#: leaves the fourth quarter to NCCL and CUDA.
BUFFERS_PER_GPU = 4
ONE_NODE_ARGS = ["-b", "8M", "-e", "1G", "-f", "2", "-c", "1"]


def ssh_key_pair() -> tuple[str, str]:
    """A fresh Ed25519 key pair: the private key in OpenSSH format, the public key as an authorized_keys line."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    ).decode()
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
    return private, public + " blueprint-verify\n"


@dataclass(frozen=True)
class Reference:
    """A published two-node `all_reduce_perf` bus bandwidth (GB/s) and the message size it was measured at."""

    busbw: float
    size_bytes: int


#: AWS's published two-node `all_reduce_perf` bus bandwidth at the largest size run ([ADTNCCL] README "Results"):
#: 2 x p5.48xlarge 487.26 GB/s at 16 GiB, 2 x p4de.24xlarge 78.33 GB/s at 2 GiB. A p4d.24xlarge has a p4de's network
#: (4 EFA cards, 400 Gbps) and NVSwitch (catalog), and differs only in GPU memory, so it shares the p4de figure. A
#: type not listed has no reference: its runs must complete with correct results, and their bandwidth is reported,
#: not judged (no threshold is made up, e.g. for the PCIe G types).
PUBLISHED_TWO_NODE = {
    "p5.48xlarge": Reference(487.26, 16 * GIB),
    "p4de.24xlarge": Reference(78.33, 2 * GIB),
    "p4d.24xlarge": Reference(78.33, 2 * GIB),
}


def reference(instance_types: Collection[str]) -> Reference | None:
    """What a healthy pair reaches: the published figure when every instance type of the pool has one (the least
    of them), else None."""
    types = list(instance_types)
    if types and all(t in PUBLISHED_TWO_NODE for t in types):
        return min((PUBLISHED_TWO_NODE[t] for t in types), key=lambda r: r.busbw)
    return None


def largest_size(instance_types: Collection[str]) -> int:
    """The two-node run's largest message size in bytes: the reference's size where it fits, else the largest power
    of two that leaves `BUFFERS_PER_GPU` such buffers in the smallest GPU memory of the pool (at most 16 GiB)."""
    types = catalog.instance_types()
    memory = min((types[t].gpu_memory_gib for t in instance_types if t in types), default=0.0)
    fits = LARGEST_SIZE
    if memory > 0:
        fits = min(fits, 2 ** floor(log2(memory * GIB / BUFFERS_PER_GPU)))
    known = reference(instance_types)
    return known.size_bytes if known is not None and known.size_bytes <= fits else fits


def two_node_args(largest: int) -> list[str]:
    """`all_reduce_perf`'s arguments: sizes doubling from 1 GiB (or `largest`, when smaller) up to `largest`, one GPU
    per rank, 20 iterations, results checked (`-c 1`: the `#wrong` columns)."""
    size = f"{largest // GIB}G" if largest >= GIB else f"{largest // 2**20}M"
    first = "1G" if largest >= GIB else size
    return ["-b", first, "-e", size, "-f", "2", "-g", "1", "-c", "1", "-n", "20"]


def expected_busbw(pool: PoolExpectation, fraction: float) -> float | None:
    """GB/s the two-node all-reduce must reach: the fraction of the reference figure (None: no reference)."""
    known = reference(pool.gpus_by_type)
    return None if known is None else round(known.busbw * fraction, 1)


def judge_two_node(run: NcclRun, expected: float | None, reference_bytes: int | None = None) -> tuple[Status, str]:
    """`fail` when EFA is not in use, a result is wrong or the bandwidth is short of `expected`; `skip` when there
    is no reference to judge the bandwidth by, or the run's largest size is not the one the reference was measured
    at (`reference_bytes`; bus bandwidth grows with the size); else `pass`."""
    peak = run.peak
    comparable = expected is not None and reference_bytes in (None, peak.size_bytes)
    problems = []
    if not run.ofi_efa or not (run.network and "Libfabric" in run.network):
        problems.append(f"EFA not in use (NCCL network: {run.network or 'not reported'})")
    if peak.wrong:
        problems.append(f"{peak.wrong} wrong results")
    if comparable and expected is not None and peak.busbw < expected:
        problems.append(f"bus bandwidth {peak.busbw:g} GB/s < {expected:g} GB/s")
    if problems:
        return "fail", "; ".join(problems)
    measured = f"{peak.busbw:g} GB/s bus bandwidth at {peak.size_bytes / GIB:g} GiB over {run.network}"
    if expected is None:
        return "skip", f"no reference for the instance type: {measured}, results correct"
    if not comparable:
        at = f"{(reference_bytes or 0) / GIB:g} GiB"
        return (
            "skip",
            f"the reference was measured at {at}, not at this run's largest size: {measured}, results correct",
        )
    return "pass", measured


def pairs(nodes: list[str]) -> list[tuple[str, str]]:
    """Disjoint neighbours (`a+b`, `c+d`, ...) so every node is in a pair; an odd one out pairs with the first."""
    found = [(nodes[i], nodes[i + 1]) for i in range(0, len(nodes) - 1, 2)]
    if len(nodes) % 2 and len(nodes) > 1:
        found.append((nodes[-1], nodes[0]))
    return found


def _volume(secret: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    volumes: list[dict[str, Any]] = [
        {"name": "ssh", "secret": {"secretName": secret, "defaultMode": 0o400}},
        {"name": "dshm", "emptyDir": {"medium": "Memory"}},
    ]
    mounts: list[dict[str, Any]] = [
        {"name": "ssh", "mountPath": SSH_DIR, "readOnly": True},
        {"name": "dshm", "mountPath": "/dev/shm"},
    ]
    return volumes, mounts


def _two_node(ctx: Context, pool: PoolExpectation, nodes: list[str], run: int) -> Result:
    """One pair's all-reduce; a worker or launcher that cannot start or a worker that ends is an `error` naming the
    pair, at once."""
    target = f"{pool.name}/{'+'.join(nodes)}"
    expected = expected_busbw(pool, ctx.options.min_busbw_fraction)
    try:
        return _run_pair(ctx, pool, nodes, run, target, expected)
    except PodsStopped as error:
        return Result(CHECK, target, "error", str(error), expected=expected, nodes=tuple(nodes))
    finally:
        ctx.session.cleanup()  # free the pair's GPUs for the next run


def _run_pair(
    ctx: Context, pool: PoolExpectation, nodes: list[str], run: int, target: str, expected: float | None
) -> Result:
    session, slots, gpus = ctx.session, pool.gpus_per_node, pool.physical_gpus
    budget = ctx.budget()
    secret = session.name(CHECK, f"{pool.name}-{run}-ssh")
    private, public = ssh_key_pair()
    session.create_secret(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": secret, "labels": session.labels(CHECK)},
            "data": {
                "id_ed25519": base64.b64encode(private.encode()).decode(),
                "authorized_keys": base64.b64encode(public.encode()).decode(),
            },
        }
    )
    volumes, mounts = _volume(secret)
    resources = gpu_resources(
        slots, {EFA_RESOURCE: str(pool.efa_devices), HUGEPAGES_RESOURCE: WORKER_HUGEPAGES, "memory": WORKER_MEMORY}
    )
    sshd = (
        f"mkdir -p /root/.ssh /run/sshd && cp {SSH_DIR}/authorized_keys /root/.ssh/ && chmod 700 /root/.ssh && "
        "chmod 600 /root/.ssh/authorized_keys && ssh-keygen -A && exec /usr/sbin/sshd -D -e"
    )
    workers = []
    for i, node in enumerate(nodes):
        body = pod_spec(
            session.name(CHECK, f"{pool.name}-{run}-w{i}"),
            session.labels(CHECK),
            ctx.options.nccl_image,
            ["bash", "-c", sshd],
            {NODE_NAME_LABEL: node},
            pool.tolerations,
            resources,
            volumes=volumes,
            mounts=mounts,
            run_as=None,  # sshd and mpirun run as root
            runtime_class=pool.runtime_class,
        )
        # Ready only once sshd listens: the launcher's mpirun connects as soon as the workers are Ready
        body["spec"]["containers"][0]["readinessProbe"] = {
            "tcpSocket": {"port": SSH_PORT},
            "periodSeconds": 2,
        }
        workers.append(session.create_pod(body))
    ready = session.wait(workers, budget, until="ready")
    ips = [str(ready[w].get("status", {}).get("podIP")) for w in workers]
    sizes = two_node_args(largest_size(pool.gpus_by_type))
    mpirun = [
        MPIRUN, "--prefix", OPENMPI, "--allow-run-as-root", "--tag-output",
        "-np", str(gpus * len(ips)), "-N", str(gpus),
        "-H", ",".join(f"{ip}:{gpus}" for ip in ips), "--bind-to", "none",
        "-x", "PATH", "-x", "LD_LIBRARY_PATH", "-x", "FI_PROVIDER=efa", "-x", "FI_EFA_FORK_SAFE=1",
        "-x", "NCCL_DEBUG=INFO", *(f for v in NCCL_TUNING for f in ("-x", v)),
        "--mca", "pml", "^ucx", "--mca", "btl", "tcp,self",
        "--mca", "btl_tcp_if_exclude", "lo,docker0,veth_def_agent", ALL_REDUCE, *sizes,
    ]  # fmt: skip
    launch = (
        f"{EXPORT_LD_LIBRARY_PATH} && mkdir -p /root/.ssh && cp {SSH_DIR}/id_ed25519 /root/.ssh/ && "
        "chmod 600 /root/.ssh/id_ed25519 && " + " ".join(mpirun)
    )
    launcher = pod_spec(
        session.name(CHECK, f"{pool.name}-{run}-launcher"),
        session.labels(CHECK),
        ctx.options.nccl_image,
        ["bash", "-c", launch],
        {NODE_NAME_LABEL: nodes[0]},
        pool.tolerations,
        # the launcher only starts the ranks: no GPU of the node is exposed to it
        env={"PATH": PATH, "NVIDIA_VISIBLE_DEVICES": "void"},
        volumes=volumes[:1],
        mounts=mounts[:1],
        run_as=None,
    )
    outcome = session.run(launcher, budget, watch=workers)  # a worker that ends ends the wait
    try:
        parsed = parse_nccl(outcome.log)
    except ParseError as error:
        return Result(
            CHECK, target, "error", f"launcher {outcome.phase}: {error}", expected=expected, nodes=tuple(nodes)
        )
    known = reference(pool.gpus_by_type)
    status, detail = judge_two_node(parsed, expected, known.size_bytes if known else None)
    blamed = tuple(nodes) if status == "fail" else ()
    return Result(CHECK, target, status, detail, parsed.peak.busbw, expected, blamed)


def _one_node(ctx: Context, pool: PoolExpectation, node: str) -> Result:
    """One node's all-reduce over its NVLink or PCIe paths: wrong results fail it; no published single-node
    figure exists for any type here, so its bandwidth is reported with `skip` ("no reference")."""
    target = f"{pool.name}/{node}"
    try:
        return _run_one_node(ctx, pool, node, target)
    except PodsStopped as error:
        return Result(CHECK, target, "error", str(error), nodes=(node,))
    finally:
        ctx.session.cleanup()


def _run_one_node(ctx: Context, pool: PoolExpectation, node: str, target: str) -> Result:
    # one process driving every physical GPU (`-g`), started by mpirun as the image's MPI build of nccl-tests expects
    mpirun = [MPIRUN, "--allow-run-as-root", "-np", "1", "--bind-to", "none", ALL_REDUCE, *ONE_NODE_ARGS]
    body = pod_spec(
        ctx.session.name(CHECK, f"{pool.name}-{node.split('.')[0]}"),
        ctx.session.labels(CHECK),
        ctx.options.nccl_image,
        ["bash", "-c", f"{EXPORT_LD_LIBRARY_PATH} && exec {' '.join(mpirun)} -g {pool.physical_gpus}"],
        {NODE_NAME_LABEL: node},
        pool.tolerations,
        gpu_resources(pool.gpus_per_node),
        env={"PATH": PATH, "NCCL_DEBUG": "INFO"},
        run_as=None,  # the image's mpirun, as in the two-node run
        runtime_class=pool.runtime_class,
    )
    outcome = ctx.session.run(body, ctx.budget())
    try:
        run = parse_nccl(outcome.log)
    except ParseError as error:
        return Result(CHECK, target, "error", f"pod {outcome.phase}: {error}")
    peak = run.peak
    if peak.wrong:
        return Result(CHECK, target, "fail", f"{peak.wrong} wrong results", peak.busbw, None, (node,))
    size = f"{peak.size_bytes / 2**30:g} GiB"
    detail = f"no reference for one node: {peak.busbw:g} GB/s bus bandwidth on one node at {size}, results correct"
    return Result(CHECK, target, "skip", detail, peak.busbw)


def pair_nodes(result: Result) -> list[str]:
    """The nodes of a pair's result, from its target (`pool/a+b`)."""
    return result.target.split("/", 1)[1].split("+")


def _isolate(ctx: Context, pool: PoolExpectation, failed: Result, good: str, run: int) -> list[Result]:
    """A failed or errored pair's nodes, each run again with a known-good node: a node whose run fails (or errors)
    again is blamed, not its good partner."""
    found = []
    for i, member in enumerate(m for m in pair_nodes(failed) if m != good):
        again = _two_node(ctx, pool, [member, good], run + i)
        found.append(replace(again, nodes=(member,)) if again.nodes else again)
    return found


def _efa_pool(ctx: Context, pool: PoolExpectation, ready: list[str]) -> list[Result]:
    """Every node's own all-reduce (NVLink pools), then pairs across the pool, then each failed or errored pair's
    nodes against a known-good node: one of a pair that passed, or that completed with correct results over EFA on a
    type with no published reference (`skip`)."""
    results: list[Result] = []
    if pool.interconnect is not None and pool.interconnect.nvlink:
        results += [_one_node(ctx, pool, node) for node in ready]
    if len(ready) < 2:
        results.append(
            Result(
                CHECK,
                pool.name,
                "skip",
                f"the pair test needs 2 Ready nodes with free GPUs, the pool has {len(ready)}: scale it to 2 and rerun",
            )
        )
        return results
    runs = [_two_node(ctx, pool, list(pair), k) for k, pair in enumerate(pairs(ready))]
    results += runs
    good = next((n for r in runs if r.status in ("pass", "skip") for n in pair_nodes(r)), None)
    if good is None:  # no pair completed: every failed pair's nodes stay blamed
        return results
    for k, bad in enumerate(r for r in runs if r.status in ("fail", "error")):
        results += _isolate(ctx, pool, bad, good, len(runs) + 2 * k)
    return results


def check(ctx: Context) -> list[Result]:
    results: list[Result] = []
    for pool in ctx.expect.pools:
        if not pool.is_gpu:
            continue
        skipped = mig_skip(CHECK, pool, "a CUDA process uses one MIG device, so no multi-GPU all-reduce runs on them")
        if skipped:
            results.append(skipped)
            continue
        ready = [node_name(n) for n in free_nodes(ctx, CHECK, pool, ctx.pool_nodes(pool, ready_only=True), results)]
        if pool.efa_devices:
            results += _efa_pool(ctx, pool, ready)
        elif ready:
            results += [_one_node(ctx, pool, node) for node in ready]
        else:
            results.append(Result(CHECK, pool.name, "skip", "no Ready node in the pool"))
    return results
