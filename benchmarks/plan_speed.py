"""Benchmark: how much `blueprint plan` costs beyond importing the SDKs it cannot do without.

Why: a plan's floor is the import of pulumi, the pulumi_aws and pulumi_kubernetes modules the program uses and the
policy SDK; above it, most of a large plan is the Pulumi SDK registering resources under mocks (work this project
cannot remove), the rest is this project's own (components, mocks, policy checks, output). The figures tell the two
apart. Each is the best of `--repeat` fresh processes, run in turns (the machine's load only adds time):

  (a) floor: a fresh interpreter imports exactly the SDK modules a plan of `--stack` loads;
  (b) `blueprint plan --stack <stack> --format json` in a fresh process, and the ratio b/a (goal: about 1.0x);
  (c) a synthetic stack of `--pools` node pools: milliseconds per pool above the floor (the target), and peak RSS;
  (d) the SDK's registration floor: (c)'s plan replayed through the SDK under the same mocks without this project's
      components (`benchmarks.sdk_replay`); (c) per pool splits into that SDK share and the project's own share,
      and the memory the registrations alone add on top of (a)'s.

Run: `python -m benchmarks.plan_speed [--stack hybrid] [--pools 200] [--repeat 3]`. Prints figures; it asserts
nothing (timings are not tests).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import yaml

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.plan_pools import raw_config  # noqa: E402

SDK_PACKAGES = ("pulumi", "pulumi_aws", "pulumi_kubernetes", "pulumi_policy")
#: The targets the figures are held to: milliseconds per pool above the import floor, the
#: 200-pool plan's peak memory, and the shipped stack's plan against the floor.
TARGET_MS_PER_POOL = 15.0
TARGET_PEAK_MIB = 300
TARGET_PLAN_OVER_FLOOR = 1.0


class Run(NamedTuple):
    """One process's cost. CPU time (user + system) moves far less than wall time when the machine is shared."""

    wall: float
    cpu: float
    rss_kib: int


#: Run inside a fresh interpreter: plan the stack and print the SDK modules that were really loaded (the
#: providers register most submodules lazily; only those actually executed count).
_LIST_MODULES = """
import json, sys
from blueprint.plan.plan import make_plan
make_plan({stack!r})
from pulumi._utils import _LazyModule
print(json.dumps(sorted(name for name, module in list(sys.modules.items())
                        if name.split(".")[0] in {packages!r} and not isinstance(module, _LazyModule))))
"""

#: The floor: import those modules, forcing lazy ones to load, and nothing else.
_IMPORT_ONLY = """
import importlib, json, sys
for name in json.loads(sys.argv[1]):
    hasattr(importlib.import_module(name), "__all__")
"""


def run_fresh(args: list[str], stdout: Path | None = None) -> Run:
    """Wall and CPU seconds and peak RSS of one fresh process; stdout written to `stdout` or discarded, a failure
    raises with its stderr."""
    with tempfile.TemporaryFile() as stderr, open(stdout or os.devnull, "wb") as out:
        start = time.perf_counter()
        process = subprocess.Popen(args, cwd=ROOT, stdout=out, stderr=stderr)
        _, status, usage = os.wait4(process.pid, 0)
        elapsed = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode != 0:
            stderr.seek(0)
            message = stderr.read().decode(errors="replace")[-2000:]
            raise RuntimeError(f"{' '.join(args[:4])}... exited {process.returncode}: {message}")
    return Run(elapsed, usage.ru_utime + usage.ru_stime, usage.ru_maxrss)


def best_of_interleaved(commands: list[list[str]], repeat: int, stdout: dict[int, Path] | None = None) -> list[Run]:
    """For each command, its best wall and CPU seconds and its highest peak RSS over `repeat` rounds that run every
    command once in turn, so that a burst of load on the machine hits the floor and the plans alike. `stdout`: where
    the command of that index writes its output (each round overwrites it)."""
    where = stdout or {}
    rounds = [[run_fresh(command, where.get(i)) for i, command in enumerate(commands)] for _ in range(repeat)]
    return [
        Run(min(r[i].wall for r in rounds), min(r[i].cpu for r in rounds), max(r[i].rss_kib for r in rounds))
        for i in range(len(commands))
    ]


def sdk_modules(stack: str) -> list[str]:
    code = _LIST_MODULES.format(stack=stack, packages=SDK_PACKAGES)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True, text=True)
    modules: list[str] = json.loads(out.stdout.strip().splitlines()[-1])
    return modules


def blueprint(*args: str) -> list[str]:
    """The console script's command line, run by this interpreter (the same venv)."""
    return [sys.executable, "-c", "import sys; from blueprint.cli import main; sys.exit(main())", *args]


def synthetic_stack_file(pools: int, folder: Path) -> Path:
    """A stack file with `pools` node pools (benchmarks.plan_pools' mix), in the CLI's `--config` format."""
    raw = raw_config(pools)
    config = {"aws:region": "us-east-1", **{f"gpu-clusters:{key}": value for key, value in raw.items()}}
    path = folder / "Pulumi.bench.yaml"
    path.write_text(yaml.safe_dump({"config": config}, sort_keys=False))
    return path


def _figures(run: Run) -> str:
    return f"{run.wall * 1000:.0f} ms / {run.cpu * 1000:.0f} ms / {run.rss_kib / 1024:.0f} MiB"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", default="hybrid")
    parser.add_argument("--pools", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)

    modules = sdk_modules(args.stack)
    with tempfile.TemporaryDirectory() as folder:
        stack_file = synthetic_stack_file(args.pools, Path(folder))
        big_plan, replay_times = Path(folder) / "plan.json", Path(folder) / "replay.jsonl"
        floor, plan, big, replay = best_of_interleaved(
            [
                [sys.executable, "-c", _IMPORT_ONLY, json.dumps(modules)],
                blueprint("plan", "--stack", args.stack, "--format", "json"),
                blueprint("plan", "--config", str(stack_file), "--format", "json"),
                # after (c) in every round: replays the plan (c) wrote
                [sys.executable, "-m", "benchmarks.sdk_replay", str(big_plan), str(replay_times)],
            ],
            args.repeat,
            stdout={2: big_plan},
        )
        replays = [json.loads(line) for line in replay_times.read_text().splitlines()]
    sdk = Run(min(r["wall"] for r in replays), min(r["cpu"] for r in replays), replay.rss_kib)
    sdk_grown_mib = min(r["grown_kib"] for r in replays) / 1024
    print("best of", args.repeat, "fresh processes each; wall ms / CPU ms / peak RSS")
    print(f"(a) floor, import {len(modules)} SDK modules: {_figures(floor)}")
    print(f"(b) blueprint plan --stack {args.stack} --format json: {_figures(plan)}")
    print(
        f"    b/a: {plan.wall / floor.wall:.2f}x wall, {plan.cpu / floor.cpu:.2f}x CPU "
        f"(target: about {TARGET_PLAN_OVER_FLOOR:.1f}x)"
    )
    wall_per_pool = (big.wall - floor.wall) / args.pools * 1000
    cpu_per_pool = (big.cpu - floor.cpu) / args.pools * 1000
    print(f"(c) {args.pools} synthetic pools: {_figures(big)}")
    print(
        f"    per pool above the floor: {wall_per_pool:.1f} ms wall, {cpu_per_pool:.1f} ms CPU "
        f"(target: at most {TARGET_MS_PER_POOL:.0f} ms)"
    )
    print(f"    peak RSS: {big.rss_kib / 1024:.0f} MiB (target: at most {TARGET_PEAK_MIB} MiB)")
    print(
        f"(d) the SDK registering (c)'s {replays[0]['resources']} resources under the same mocks, without this "
        f"project's components: {_figures(sdk)} (peak RSS of the whole replay process)"
    )
    print(
        f"    per pool: SDK registration {sdk.wall / args.pools * 1000:.1f} ms wall, "
        f"{sdk.cpu / args.pools * 1000:.1f} ms CPU; this project's own "
        f"{wall_per_pool - sdk.wall / args.pools * 1000:.1f} ms wall, "
        f"{cpu_per_pool - sdk.cpu / args.pools * 1000:.1f} ms CPU (above both floors)"
    )
    print(
        f"    memory: the registrations alone raised the replay's peak by {sdk_grown_mib:.0f} MiB; on top of the "
        f"floor's {floor.rss_kib / 1024:.0f} MiB that is {floor.rss_kib / 1024 + sdk_grown_mib:.0f} MiB "
        f"(target: at most {TARGET_PEAK_MIB} MiB)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
