"""Check `storage`: each shared file system's claim is Bound, mounts in a pool that uses it, and gives a short write
and read throughput comparable with the plan.

The figure held to is `--min-storage-fraction` (default 0.25) of the least of the file system's throughput, the
client's network bandwidth and, for EFS, its per-client limit (`components.planning.storage`): a smoke test that a
mount works at a plausible speed, not a benchmark. See docs/operations.md#verifying-a-deploy.
"""

from __future__ import annotations

from typing import Any

from blueprint.verify.context import Context, Options
from blueprint.verify.expectations import PoolExpectation, StorageExpectation
from blueprint.verify.model import PodsStopped, Result
from blueprint.verify.parsers import ParseError, parse_storage
from blueprint.verify.pods import PodSession
from components import tags
from components.planning.check_pods import pod_spec

CHECK = "storage"
MOUNT = "/mnt/claim"

#: Runs in the probe pod: `python3 -c PROBE DIR STREAMS MIB`; prints one JSON line of MB/s (10^6 bytes/s).
PROBE = """
import json, mmap, os, shutil, sys, threading, time
d, n, mib = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
os.makedirs(d, exist_ok=True)
MB = 1 << 20
direct = getattr(os, "O_DIRECT", 0)
def opened(path, flags):
    try:
        return os.open(path, flags | direct, 0o600)
    except OSError:
        return os.open(path, flags, 0o600)
def write(i):
    buf = mmap.mmap(-1, MB); buf.write(os.urandom(MB))
    fd = opened(f"{d}/f{i}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    for _ in range(mib):
        os.write(fd, buf)
    os.fsync(fd); os.close(fd)
def read(i):
    buf = mmap.mmap(-1, MB)
    fd = opened(f"{d}/f{i}", os.O_RDONLY)
    while os.readv(fd, [buf]) > 0:
        pass
    os.close(fd)
def timed(fn):
    threads = [threading.Thread(target=fn, args=(i,)) for i in range(n)]
    start = time.monotonic()
    for t in threads: t.start()
    for t in threads: t.join()
    return round(n * mib * MB / 1e6 / (time.monotonic() - start), 1)
try:
    w = timed(write); r = timed(read)
    print(json.dumps({"writeMBps": w, "readMBps": r}))
finally:
    shutil.rmtree(d, ignore_errors=True)
"""


def probe_pod(
    session: PodSession, options: Options, fs: StorageExpectation, pool: PoolExpectation, read_only: bool
) -> dict[str, Any]:
    """The probe pod: in the claim's namespace, held to Pod Security `restricted` as the file system's workload
    user, writing in the namespace's own directory (on Lustre, the one the client nodes make at boot; the root,
    which belongs to root, admits no one else)."""
    within = f"{MOUNT}/{fs.directory}" if fs.directory else MOUNT
    command = (
        ["ls", within]
        if read_only
        else [
            "python3",
            "-c",
            PROBE,
            f"{within}/.blueprint-verify-{session.run_id}",
            str(options.probe_streams),
            str(options.probe_mib_per_stream),
        ]
    )
    return pod_spec(
        session.name(CHECK, fs.name),
        session.labels(CHECK),
        options.probe_image,
        command,
        {tags.POOL: pool.name},
        pool.tolerations,
        volumes=[{"name": "claim", "persistentVolumeClaim": {"claimName": fs.claim, "readOnly": read_only}}],
        mounts=[{"name": "claim", "mountPath": MOUNT}],
        run_as=fs.run_as,
    )


def _one(ctx: Context, fs: StorageExpectation) -> Result:
    target = f"{fs.name} ({fs.namespace}/{fs.claim})"
    claim = ctx.api.read_claim(fs.namespace, fs.claim)
    if claim is None:
        return Result(CHECK, target, "fail", "the claim does not exist")
    phase = (claim.get("status") or {}).get("phase")
    if phase != "Bound":
        return Result(CHECK, target, "fail", f"the claim is {phase or 'not Bound'}")
    pool = next(
        (p for p in ctx.expect.pools if p.name in fs.pools and ctx.pool_nodes(p, ready_only=True)),
        None,
    )
    if pool is None:
        return Result(CHECK, target, "skip", f"no Ready node in the pools that mount it ({', '.join(fs.pools) or '-'})")
    read_only = (claim.get("spec") or {}).get("accessModes") == ["ReadOnlyMany"]
    body = probe_pod(ctx.session, ctx.options, fs, pool, read_only)
    try:
        outcome = ctx.session.run(body, ctx.budget(), namespace=fs.namespace)
    except PodsStopped as error:  # this file system only
        return Result(CHECK, target, "error", str(error))
    where = f"{pool.name}/{outcome.node or '?'}"
    if outcome.phase != "Succeeded":
        return Result(CHECK, target, "fail", f"pod on {where} {outcome.phase}: {outcome.log[-300:]}")
    if read_only:
        return Result(CHECK, target, "pass", f"mounted read-only on {where}; throughput not measured")
    try:
        measured = parse_storage(outcome.log)
    except ParseError as error:
        return Result(CHECK, target, "error", str(error))
    if fs.per_client_mbps is None:
        return Result(CHECK, target, "pass", f"mounted on {where}: {measured} (no plan figure)", measured)
    want = round(fs.per_client_mbps * ctx.options.min_storage_fraction, 1)
    slow = [f"{k} {v:g} < {want:g}" for k, v in measured.items() if v < want]
    detail = (
        "; ".join(slow)
        if slow
        else f"write {measured.get('writeMBps', 0):g} MB/s, read {measured.get('readMBps', 0):g} MB/s on {where}"
    )
    return Result(CHECK, target, "fail" if slow else "pass", detail, measured, want)


def check(ctx: Context) -> list[Result]:
    results = []
    for fs in ctx.expect.storage:
        results.append(_one(ctx, fs))
        ctx.session.cleanup()
    return results
