"""The shipped stacks' figures in the docs, generated from their offline plans so they cannot drift.

The README's stacks table and the figures line of each stack in `docs/stacks.md` are written by
`blueprint schema --write` from what `blueprint plan --stack NAME --format json` gives (resource count, the
summary's `gpus`, `hourlyUsd`, node pools and storage), between markers; `blueprint schema --check` fails when a
plan changed and they did not. Everything is read from the plan's JSON, never recomputed, so a figure the summary
changes (a new cost item, say) reaches the docs on the next `schema --write`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from blueprint.plan.render import incomplete

ROOT = Path(__file__).resolve().parents[1]
README_PATH = ROOT / "README.md"
STACKS_DOC_PATH = ROOT / "docs" / "stacks.md"
TABLE_MARKER = "stacks-table"
#: One figures line per stack in docs/stacks.md: `<!-- stack-figures-training:start -->`.
FIGURES_MARKER = "stack-figures-{stack}"

#: The sign the docs write counts with: four nodes of eight H100s are `4 TIMES 8 TIMES H100`.
TIMES = "\N{MULTIPLICATION SIGN}"

PlanOf = Callable[[str], Mapping[str, Any]]


def _usd(value: float) -> str:
    return f"${value:,.2f}"


def _count(value: float) -> str:
    return f"{value:,.0f}"


def _capacity(pool: Mapping[str, Any]) -> str:
    return str(pool["capacityType"]).replace("-", " ")


def _gpu_pool(pool: Mapping[str, Any]) -> str:
    """One GPU pool as the table names it: `h100`: 0..4 x `p5.48xlarge` (8xH100), on demand, one AZ, ..."""
    shape = f"{pool['gpusPerNode']}{TIMES}{pool['gpuModel']}"
    if pool["kind"] == "hybrid":
        return f"`{pool['name']}`: {pool['maxNodes']} on-prem servers {TIMES} {shape} as EKS Hybrid Nodes"
    zones = len(pool["availabilityZones"])
    parts = [
        f"`{pool['name']}`: {pool['minNodes']}..{pool['maxNodes']} {TIMES} `{pool['instanceType']}` ({shape})",
        _capacity(pool),
        "one AZ" if zones == 1 else f"{zones} AZs",
    ]
    if pool["placementGroup"]:
        parts.append("placement group")
    return ", ".join(parts)


def _fabric(pool: Mapping[str, Any]) -> str:
    return (
        f"`{pool['name']}`: {pool['efaDevicesPerNode']} EFA devices / {_count(pool['fabricGbpsPerNode'])} Gbps per node"
    )


_STORAGE_KIND = {"lustre": "FSx for Lustre", "efs": "EFS", "nfs": "NFS"}


def _storage(volume: Mapping[str, Any]) -> str:
    """A file system with its capacity and throughput as the summary states them."""
    kind = _STORAGE_KIND.get(volume["kind"], volume["kind"])
    head = f"{kind} `{volume['name']}`"
    if volume["kind"] == "lustre":
        head += f" {_count(volume['capacityGiB'])} GiB at {volume['perUnitThroughputMBpsPerTiB']} MB/s/TiB"
    elif volume["kind"] == "efs":
        head += f" ({volume['throughputMode']} throughput)"
    elif "server" in volume:
        head += f" (`{volume['server']}`)"
    throughput = f"{_count(volume['throughputMBps'])} MB/s"
    if volume.get("gpus"):
        throughput += f" ({_count(volume['throughputPerGpuMBps'])} MB/s per GPU)"
    return f"{head}: {throughput}"


def _at_max(hourly: Mapping[str, Any]) -> str:
    text = _usd(hourly["max"])
    if hourly.get("spotSaving"):
        text += f" (vs {_usd(hourly['maxOnDemand'])} all on demand)"
    return text


def table_row(stack: str, plan: Mapping[str, Any]) -> str:
    """The README row of one stack: its columns, in the table's order."""
    summary = plan["summary"]
    gpu_pools = [p for p in summary["nodePools"] if p["gpusPerNode"]]
    efa_pools = [p for p in gpu_pools if p["efaDevicesPerNode"]]
    gpus = f"{summary['gpus']['min']}..{summary['gpus']['max']}: " + "; ".join(_gpu_pool(p) for p in gpu_pools)
    fabric = "; ".join([*(_fabric(p) for p in efa_pools), *(_storage(v) for v in summary["storage"])]) or "none"
    file = f"stacks/Pulumi.{stack}.yaml"
    cells = [
        stack,
        f"[`{file}`]({file})",
        gpus,
        fabric,
        str(len(plan["resources"])),
        _usd(summary["hourlyUsd"]["idle"]) + incomplete(dict(summary)),
        _at_max(summary["hourlyUsd"]) + incomplete(dict(summary)),
    ]
    return "| " + " | ".join(cells) + " |"


def stacks_table(plans: Mapping[str, Mapping[str, Any]]) -> str:
    """The README's stacks table, one row per stack in `plans`."""
    lines = [
        "| stack | file | GPUs (min..max) | fabric and storage | resources | $/h idle | $/h at max |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        *(table_row(stack, plan) for stack, plan in plans.items()),
    ]
    return "\n".join(lines)


def figures_line(stack: str, plan: Mapping[str, Any]) -> str:
    """The figures of one stack in docs/stacks.md."""
    summary = plan["summary"]
    hourly = summary["hourlyUsd"]
    text = (
        f"Figures (`blueprint plan --stack {stack}`): {len(plan['resources'])} resources, "
        f"{summary['gpus']['min']}..{summary['gpus']['max']} GPUs, **{_usd(hourly['idle'])}/h idle**, "
        f"**{_usd(hourly['max'])}/h at max**"
    )
    if hourly.get("spotSaving"):
        saving = _usd(hourly["spotSaving"])
        text += f" against {_usd(hourly['maxOnDemand'])} all on demand (spot saves about {saving}/h)"
    return text + incomplete(dict(summary)) + "."


def figures_marker(stack: str) -> str:
    return FIGURES_MARKER.format(stack=stack)


def documented_stacks(text: str) -> list[str]:
    """The stacks whose figures `docs/stacks.md` carries (it has their markers)."""
    prefix, suffix = "<!-- " + FIGURES_MARKER.split("{")[0], ":start -->"
    lines = text.splitlines()
    return [line[len(prefix) : -len(suffix)] for line in lines if line.startswith(prefix) and line.endswith(suffix)]


def generated_parts(stacks: list[str], plan_of: PlanOf) -> list[tuple[Path, str, str]]:
    """(document, marker, generated text) for the README table and each stack's figures in docs/stacks.md. The
    table lists the stacks in the order docs/stacks.md describes them, then any other stack by name."""
    documented = documented_stacks(STACKS_DOC_PATH.read_text())
    unknown = [stack for stack in documented if stack not in stacks]
    if unknown:
        raise ValueError(f"docs/stacks.md has figures for {unknown}, which are not stacks in stacks/")
    plans = {stack: plan_of(stack) for stack in [*documented, *sorted(set(stacks) - set(documented))]}
    parts = [(README_PATH, TABLE_MARKER, stacks_table(plans))]
    parts.extend((STACKS_DOC_PATH, figures_marker(stack), figures_line(stack, plans[stack])) for stack in documented)
    return parts
