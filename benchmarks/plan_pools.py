"""Benchmark: plan, render and build a synthetic cluster of 200 node pools.

Why: `blueprint plan` runs in pull requests and tests build pools under mocks; both must stay fast for large
clusters. The synthetic stack mixes the three kinds of pool that cost the most to render: p5 EFA training pools
(33 interfaces, RAID0, node-template tags), spot g6e inference pools (mixed instances policy) and CPU system pools.

Run: `python -m benchmarks.plan_pools [--pools 200]`. Prints wall times and counts; exits non-zero only on errors.
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from blueprint.plan.runner import run_mocked  # noqa: E402
from components.config import StackConfig  # noqa: E402
from components.planning import nodeadm  # noqa: E402
from components.planning.autoscaler_tags import autoscaler_tags  # noqa: E402
from components.planning.pools import PoolPlan  # noqa: E402
from components.planning.stack_plan import plan_stack  # noqa: E402
from components.validation import validate  # noqa: E402

T = TypeVar("T")
ZONES = ["us-east-1a", "us-east-1b", "us-east-1c"]
ENDPOINT = "https://0123456789ABCDEF0123456789ABCDEF.gr7.us-east-1.eks.amazonaws.com"
CERTIFICATE_AUTHORITY = "Q0VSVElGSUNBVEU=" * 90  # about the length of a real EKS CA bundle


def synthetic_pools(count: int) -> list[dict[str, Any]]:
    """`count` pools cycling through training (p5, EFA), spot inference (g6e) and system (CPU) pools."""
    pools: list[dict[str, Any]] = []
    for i in range(count):
        kind = i % 3
        if kind == 0:
            pools.append(
                {
                    "name": f"train-{i}",
                    "role": "training",
                    "instanceType": "p5.48xlarge",
                    "scaling": {"min": 0, "max": 16},
                    "placement": {"availabilityZones": [ZONES[i % len(ZONES)]]},
                    "labels": {"team": f"team-{i % 7}"},
                }
            )
        elif kind == 1:
            pools.append(
                {
                    "name": f"infer-{i}",
                    "role": "inference",
                    "instanceType": "g6e.12xlarge",
                    "capacity": {"type": "spot", "spotInstanceTypes": ["g6e.24xlarge"], "onDemandBaseCapacity": 1},
                    # fixed: cluster-autoscaler sizes a mixed group by its first type, so an autoscaled spot pool
                    # may mix only types of the same vCPUs and memory (none in the catalog for g6e.12xlarge)
                    "scaling": {"min": 1, "max": 8, "mode": "fixed"},
                }
            )
        else:
            pools.append(
                {
                    "name": f"system-{i}",
                    "role": "system",
                    "instanceType": "m7i.xlarge",
                    "scaling": {"min": 2, "max": 3, "mode": "fixed"},
                }
            )
    return pools


def raw_config(count: int) -> dict[str, Any]:
    return {
        "cluster": {
            "name": "bench",
            "tags": {"team": "platform"},
            # The deploying machine must reach the API (a rule of the config); the shipped stacks admit the same range.
            "endpoint": {"public": True, "publicAccessCidrs": ["203.0.113.0/24"]},
        },
        "network": {"vpcCidr": "10.0.0.0/16", "availabilityZones": ZONES},
        "nodePools": synthetic_pools(count),
    }


def timed(label: str, fn: Callable[[], T]) -> tuple[T, float]:
    start = time.perf_counter()
    result = fn()
    elapsed = time.perf_counter() - start
    print(f"{label:<52} {elapsed * 1000:10.1f} ms")
    return result, elapsed


def render_all(spec: StackConfig, plans: list[PoolPlan]) -> tuple[int, int]:
    """User data and autoscaler tags for every aws pool: (user data bytes, autoscaler tags)."""
    data_bytes = tag_count = 0
    for plan in plans:
        if plan.kind != "aws":
            continue
        config = nodeadm.node_config(
            spec.cluster.name, ENDPOINT, CERTIFICATE_AUTHORITY, str(spec.cluster.service_cidr), plan
        )
        data_bytes += len(nodeadm.user_data(config).encode())
        tag_count += len(autoscaler_tags(spec.cluster.name, plan))
    return data_bytes, tag_count


def build_all(spec: StackConfig, plans: list[PoolPlan]) -> Counter[str]:
    """Construct one NodePool per aws pool under mocks; count registrations by type."""
    from components.node_pool import NodePool
    from tests.fakes import fake_context

    def program() -> None:
        ctx = fake_context(spec, stack="bench")
        for plan in plans:
            if plan.kind == "aws":
                NodePool(f"bench-{plan.name}", plan, ctx)

    run = run_mocked(program, stack="bench")
    return Counter(r.type for r in run.registrations)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pools", type=int, default=200)
    args = parser.parse_args(argv)

    print(f"synthetic stack: {args.pools} pools (p5 EFA training / g6e spot inference / m7i system)")
    raw = raw_config(args.pools)
    spec, t_validate = timed("validate (all config rules)", lambda: validate(raw, region="us-east-1"))
    tracemalloc.start()
    stack_plan, t_plan = timed("plan_stack (pools, add-ons, storage, serving)", lambda: plan_stack(spec))
    planned_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    plans = stack_plan.pools
    (data_bytes, tags), t_render = timed(
        "nodeadm user data + autoscaler tags, every pool", lambda: render_all(spec, plans)
    )
    counts, t_build = timed("200 NodePool components under mocks", lambda: build_all(spec, plans))

    aws_pools = sum(1 for p in plans if p.kind == "aws")
    efa_devices = sum(p.efa_devices for p in plans)
    print()
    print(f"pools planned: {len(plans)} ({aws_pools} aws), EFA devices per node summed: {efa_devices}")
    print(f"user data rendered: {data_bytes / 1024:.0f} KiB; autoscaler tags: {tags}")
    print(f"plan_stack's peak allocations (tracemalloc): {planned_peak / 2**20:.1f} MiB")
    print(f"resources registered: {sum(counts.values())}")
    for token, n in sorted(counts.items()):
        print(f"  {n:6d}  {token}")
    pure = t_validate + t_plan + t_render
    print(
        f"\npure planning total: {pure * 1000:.0f} ms ({pure / max(len(plans), 1) * 1e3:.2f} ms/pool); "
        f"mocked build: {t_build:.1f} s ({t_build / max(aws_pools, 1) * 1e3:.0f} ms/pool)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
