"""Human renderings of a plan: a terminal table (rich) and Markdown with a Mermaid diagram for PR comments.

Both read only the plan dict (the JSON contract), so what a reviewer sees is exactly what `--format json` says.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from rich.console import Console
from rich.table import Table


def _usd(value: float) -> str:
    return f"${value:,.2f}"


def _part_usd(value: float) -> str:
    """A cost part's $/h: cents, or four decimals for a part below half a cent (a $1/month key is $0.0014/h), so
    no billed part reads as free."""
    return f"${value:,.4f}" if 0 < value < 0.005 else _usd(value)


def _spot_saving(cost: dict[str, Any], versus: str = "") -> str:
    """` (spot saves ~$X/h...)` when some pool runs on spot, else nothing: a stack without spot saves nothing."""
    saving = cost["spotSaving"]
    return f" (spot saves ~{_usd(saving)}/h{versus})" if round(saving, 2) > 0 else ""


def incomplete(summary: dict[str, Any]) -> str:
    """` (incomplete: N parts unpriced)` when the Region's catalog prices some billed part of the stack nowhere: the
    totals leave those parts out (the summary's `cost.unpriced`), so they must not read as the whole bill."""
    unpriced = len((summary.get("cost") or {}).get("unpriced", []))
    if not unpriced:
        return ""
    return f" (incomplete: {unpriced} part{'s' * (unpriced != 1)} unpriced)"


def _pool_usd(pool: dict[str, Any], key: str) -> str:
    """A pool's $/h, or `no price` where the catalog has none in the Region (the summary's `cost.unpriced`)."""
    return "no price" if pool["hourlyUsd"] is None else _usd(pool["hourlyUsd"][key])


def _cost_rows(summary: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """The cost breakdown as (part, $/h idle, $/h max, how), then unpriced, committed and usage-billed parts (no
    $/h)."""
    cost = summary.get("cost") or {}
    rows = [
        (
            f"{b['kind']} {b['name']}",
            _part_usd(b["idleUsd"]),
            _part_usd(b["maxUsd"]),
            b["detail"] + (" (estimate)" * b["estimate"]),
        )
        for b in cost.get("breakdown", [])
    ]
    rows += [(f"{u['kind']} {u['name']}", "-", "-", f"not counted: {u['reason']}") for u in cost.get("unpriced", [])]
    rows += [(f"{c['kind']} {c['name']}", "-", "-", f"committed: {c['detail']}") for c in cost.get("committed", [])]
    rows += [(f"{n['kind']} {n['name']}", "-", "-", f"not counted: {n['reason']}") for n in cost.get("notCounted", [])]
    return rows


def _nodes(pool: dict[str, Any]) -> str:
    return f"{pool['minNodes']}" if pool["minNodes"] == pool["maxNodes"] else f"{pool['minNodes']}..{pool['maxNodes']}"


def _gpus(pool: dict[str, Any]) -> str:
    """`8 x H100`, and a MIG pool's partition of each GPU: `8 x H100 (MIG 7x1g.10gb)`."""
    if not pool["gpusPerNode"]:
        return "-"
    mig = pool.get("migDevicesPerGpu")
    partition = f" (MIG {'+'.join(f'{n}x{p}' for p, n in mig.items())})" if mig else ""
    return f"{pool['gpusPerNode']} x {pool['gpuModel']}{partition}"


def _fabric(pool: dict[str, Any]) -> str:
    if not pool["efaDevicesPerNode"]:
        return "-"
    return f"{pool['efaDevicesPerNode']}/{pool['maxEfaDevicesPerNode']} EFA, {pool['fabricGbpsPerNode']:g} Gbps"


def _pods(pool: dict[str, Any]) -> str:
    """The kubelet's maxPods (what the VPC CNI can address); `-` on hybrid pools, whose pod addresses Cilium assigns."""
    return "-" if pool["maxPods"] is None else str(pool["maxPods"])


def _lustre(pool: dict[str, Any]) -> str:
    """How the pool's nodes reach the Lustre file system (`efa` or `tcp`), or `-` when they do not mount it."""
    return pool["lustreClient"] or "-"


def _mbps(value: float | None) -> str:
    """Throughput figure; None where nobody can know it (bursting EFS, an NFS server of unknown bandwidth)."""
    return "-" if value is None else f"{value:,.0f}"


def training_line(job: dict[str, Any]) -> str:
    """The reference training job in one line: its GPUs, and a checkpoint's size and write time."""
    return (
        f"Training job {job['name']} on {job['pool']}: {job['nodes']} nodes, {job['gpus']} GPUs, "
        f"{job['efaDevices']} EFA devices; checkpoint {job['checkpointBytes'] / 1e9:,.2f} GB written in "
        f"{job['checkpointWriteSeconds']:g} s at {_mbps(job['lustreThroughputMBps'])} MB/s (Lustre); "
        f"{job['maxRestarts']} restarts for job failures, node failures not counted"
    )


def _where(pool: dict[str, Any]) -> str:
    if pool["kind"] == "hybrid":
        return "on-prem"
    zones = ",".join(z[-2:] if len(pool["availabilityZones"]) > 1 else z for z in pool["availabilityZones"])
    return zones + (" +PG" if pool["placementGroup"] else "")


def table(plan: dict[str, Any], console: Console) -> None:
    summary = plan["summary"]
    title = (
        f"{plan['project']} / {plan['stack']}: cluster {summary['cluster']} ({summary['region']}, "
        f"Kubernetes {summary['kubernetesVersion']})"
    )
    pools = Table(title=title, title_justify="left")
    for column in (
        "pool",
        "kind/role",
        "instance",
        "GPUs/node",
        "nodes",
        "capacity",
        "scaling",
        "fabric",
        "pods/node",
        "Lustre",
        "where",
        "$/h idle",
        "$/h max",
    ):
        pools.add_column(column, justify="right" if column.startswith("$") else "left", overflow="fold")
    for p in summary["nodePools"]:
        pools.add_row(
            p["name"],
            f"{p['kind']}/{p['role']}",
            p["instanceType"] or "-",
            _gpus(p),
            _nodes(p),
            p["capacityType"],
            p["scalingMode"],
            _fabric(p),
            _pods(p),
            _lustre(p),
            _where(p),
            _pool_usd(p, "idle"),
            _pool_usd(p, "max"),
        )
    console.print(pools)
    if summary["storage"]:
        storage = Table(title="Shared storage", title_justify="left")
        for column in ("name", "kind", "capacity GiB", "throughput MB/s", "mounted by", "MB/s per GPU at max"):
            storage.add_column(column, overflow="fold")
        for s in summary["storage"]:
            storage.add_row(
                s["name"],
                s["kind"],
                f"{s['capacityGiB']:,}" if s.get("capacityGiB") else "elastic",
                _mbps(s["throughputMBps"]),
                ", ".join(s.get("mountedBy", [])) or "-",
                f"{s['throughputPerGpuMBps']:,.1f}" if s.get("throughputPerGpuMBps") else "-",
            )
        console.print(storage)
    if summary.get("serving"):
        serving = Table(title="Serving (replicas scale by the rule named)", title_justify="left")
        for column in ("name", "pool", "model", "GPUs/replica", "replicas", "rule", "scale out", "scale in"):
            serving.add_column(column, overflow="fold")
        for w in summary["serving"]:
            if w["rule"] == "queue":
                target = f"{w['targetInFlightPerReplica']:g} requests in flight per replica"
                out_text, in_text = f"above {target}", f"below {target}"
            else:
                out, scale_in = w["scaleOut"], w["scaleIn"]
                cooldown = f"{w['cooldownSeconds']} s cooldown"
                out_text = f"+{out['replicas']} after {out['afterMinutes']} min > {out['abovePercent']:g}%"
                in_text = (
                    f"-{scale_in['replicas']} after {scale_in['afterMinutes']} min < {scale_in['belowPercent']:g}%"
                )
                in_text += f", {cooldown}"
            serving.add_row(
                w["name"],
                w["pool"],
                w["model"],
                str(w["gpusPerReplica"]),
                f"{w['replicas']['min']}..{w['replicas']['max']} ({w['replicas']['perNode']}/node)",
                w["rule"],
                out_text,
                in_text,
            )
        console.print(serving)
    if summary.get("trainingJob"):
        console.print(training_line(summary["trainingJob"]))
    _print_hybrid_site(summary.get("hybridSite") or {}, console)
    if summary.get("hybrid"):
        _print_hybrid(summary["hybrid"], console)
    breakdown = Table(
        title=f"Cost per hour in {summary['region']} (what bills while the stack runs)", title_justify="left"
    )
    for column in ("part", "$/h idle", "$/h max", "how"):
        breakdown.add_column(column, justify="right" if column.startswith("$") else "left", overflow="fold")
    for row in _cost_rows(summary):
        breakdown.add_row(*row)
    console.print(breakdown)
    _print_quotas(summary, console)
    _print_queues(summary, console)
    cost = summary["hourlyUsd"]
    console.print(
        f"GPUs: {summary['gpus']['min']} idle .. {summary['gpus']['max']} at max.  "
        f"Cost: {_usd(cost['idle'])}/h idle, {_usd(cost['max'])}/h at max{incomplete(summary)}"
        f"{_spot_saving(cost, ' vs all on-demand')}.  Resources: {len(plan['resources'])}."
    )
    for warning in summary.get("warnings", []):
        console.print(f"[yellow]Warning: {warning}[/yellow]")
    _print_violations(plan["violations"], console)


def _print_hybrid_site(site: dict[str, Any], console: Console) -> None:
    """The on-prem site's part: Prometheus's paths through the site firewall, and how each pool's pod blocks are
    routed (docs/operations.md, 'Network and firewall' and 'Rejoining a server')."""
    if site.get("scrapePaths"):
        paths = Table(title="On-prem firewall: Prometheus (VPC CIDR) scrapes the servers", title_justify="left")
        for column in ("target", "to", "TCP port", "why"):
            paths.add_column(column, overflow="fold")
        for path in site["scrapePaths"]:
            paths.add_row(path["target"], path["to"], str(path["port"]), path["why"])
        console.print(paths)
    if site.get("podRoutes"):
        routes = Table(title="On-prem pod routes (one block per server)", title_justify="left")
        for column in ("pool", "pod CIDRs", "blocks", "routed by", "valid after a rejoin"):
            routes.add_column(column, overflow="fold")
        for route in site["podRoutes"]:
            peer = route.get("peer")
            how = f"BGP to {peer['address']} (AS {peer['asn']})" if peer else "static routes on the site router"
            routes.add_row(
                route["pool"],
                ", ".join(route["podCidrs"]),
                f"{route['blocks']} x /{route['blockPrefix']}",
                how,
                "yes" if route["validAcrossRejoins"] else "no: re-read after each rejoin",
            )
        console.print(routes)


def _print_hybrid(hybrid: dict[str, Any], console: Console) -> None:
    """What the site's firewall must let the on-prem servers reach (derived from the images they run), and where
    each pool's join script is."""
    egress = Table(title="On-prem servers reach (HTTPS, TCP 443)", title_justify="left")
    for column in ("host", "when", "why"):
        egress.add_column(column, overflow="fold")
    for rule in hybrid["egress"]:
        egress.add_row(rule["host"], rule["phase"], rule["why"])
    console.print(egress)
    for pool in hybrid["pools"]:
        console.print(
            f"Pool {pool['name']}: each server runs the join script (`pulumi stack output "
            f"hybridJoinScript-{pool['name']}`, or `.summary.hybrid.pools[].joinScript` of the JSON plan)."
        )


def _quota_rows(summary: dict[str, Any]) -> list[tuple[str, str, str, str, str]]:
    """(service, quota code, quota, needed at max, used by) for each service quota the stack counts against."""
    return [
        (
            q["service"],
            q["quotaCode"] or "-",
            q["name"],
            f"{q['needed']:,}" if q["unit"] == "count" else f"{q['needed']:,} {q['unit']}",
            "; ".join(q["usedBy"]),
        )
        for q in summary.get("quotas", [])
    ]


def _print_quotas(summary: dict[str, Any], console: Console) -> None:
    rows = _quota_rows(summary)
    if not rows:
        return
    t = Table(title="Service quotas needed at max (docs/operations.md, 'Service quotas')", title_justify="left")
    for column in ("service", "code", "quota", "needed", "used by"):
        t.add_column(column, justify="right" if column == "needed" else "left", overflow="fold")
    for row in rows:
        t.add_row(*row)
    console.print(t)


def _quota_markdown(summary: dict[str, Any]) -> list[str]:
    rows = _quota_rows(summary)
    if not rows:
        return []
    lines = ["", "| service | quota code | quota | needed at max | used by |", "|---|---|---|---:|---|"]
    lines += [f"| {service} | {code} | {name} | {needed} | {used} |" for service, code, name, needed, used in rows]
    return lines


QUEUE_COLUMNS = ("ClusterQueue", "namespaces", "flavor", "GPUs", "EFA", "cohort", "checks")


def _queue_rows(summary: dict[str, Any]) -> list[tuple[str, ...]]:
    """One row per ClusterQueue flavor: its queue, the namespaces whose LocalQueue points to it, the quota, the
    cohort and the admission checks on that flavor (summary `queues`, components.planning.queues)."""
    queues = summary.get("queues") or {}
    topology = {f["name"]: f["topology"] for f in queues.get("flavors", [])}
    rows: list[tuple[str, ...]] = []
    for cq in queues.get("clusterQueues", []):
        for f in cq["flavors"]:
            flavor = f["flavor"] + (f" (topology {topology[f['flavor']]})" if topology.get(f["flavor"]) else "")
            rows.append(
                (
                    cq["name"],
                    ", ".join(cq["namespaces"]) or "-",
                    flavor,
                    str(f["gpus"]),
                    "-" if f["efaDevices"] is None else str(f["efaDevices"]),
                    cq["cohort"] or "-",
                    ", ".join(cq["admissionChecks"]) if f["flavor"] in cq["checkedFlavors"] else "-",
                )
            )
    return rows


def _print_queues(summary: dict[str, Any], console: Console) -> None:
    rows = _queue_rows(summary)
    if not rows:
        return
    t = Table(title="Kueue queues (docs/training.md, 'Queues and quotas')", title_justify="left")
    for column in QUEUE_COLUMNS:
        t.add_column(column, justify="right" if column in ("GPUs", "EFA") else "left", overflow="fold")
    for row in rows:
        t.add_row(*row)
    console.print(t)


def _queue_markdown(summary: dict[str, Any]) -> list[str]:
    rows = _queue_rows(summary)
    if not rows:
        return []
    lines = ["", "| " + " | ".join(QUEUE_COLUMNS) + " |", "|---|---|---|---:|---:|---|---|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _print_violations(violations: list[dict[str, Any]], console: Console) -> None:
    if not violations:
        console.print("[green]Policy pack: no violations.[/green]")
        return
    t = Table(title="Policy violations", title_justify="left")
    for column in ("level", "policy", "resource", "message"):
        t.add_column(column, overflow="fold")
    for v in violations:
        t.add_row(v["level"], v["policy"], (v.get("urn") or "").split("::")[-1], v["message"])
    console.print(t)


def markdown(plan: dict[str, Any]) -> str:
    summary = plan["summary"]
    cost = summary["hourlyUsd"]
    lines = [
        f"### Plan: `{plan['stack']}` (cluster `{summary['cluster']}`, {summary['region']}, "
        f"Kubernetes {summary['kubernetesVersion']})",
        "",
        f"**GPUs** {summary['gpus']['min']} idle .. {summary['gpus']['max']} at max · "
        f"**cost** {_usd(cost['idle'])}/h idle, {_usd(cost['max'])}/h at max{incomplete(summary)}"
        f"{_spot_saving(cost)} · **resources** {len(plan['resources'])} · "
        f"**violations** {len(plan['violations'])}",
        "",
        *(f"**Warning:** {warning}\n" for warning in summary.get("warnings", [])),
        "| pool | kind/role | instance | GPUs/node | nodes | capacity | scaling | fabric | pods/node | Lustre | where "
        "| $/h idle | $/h max |",
        "|---|---|---|---|---|---|---|---|---:|---|---|---:|---:|",
    ]
    for p in summary["nodePools"]:
        lines.append(
            f"| {p['name']} | {p['kind']}/{p['role']} | {p['instanceType'] or '-'} | {_gpus(p)} | {_nodes(p)} | "
            f"{p['capacityType']} | {p['scalingMode']} | {_fabric(p)} | {_pods(p)} | {_lustre(p)} | {_where(p)} | "
            f"{_pool_usd(p, 'idle')} | {_pool_usd(p, 'max')} |"
        )
    lines += ["", "| cost part | $/h idle | $/h max | how |", "|---|---:|---:|---|"]
    lines += [f"| {part} | {idle} | {high} | {how} |" for part, idle, high, how in _cost_rows(summary)]
    if summary["storage"]:
        lines += [
            "",
            "| storage | kind | capacity GiB | MB/s | mounted by | MB/s per GPU |",
            "|---|---|---:|---:|---|---:|",
        ]
        for s in summary["storage"]:
            per_gpu = f"{s['throughputPerGpuMBps']:,.1f}" if s.get("throughputPerGpuMBps") else "-"
            capacity = f"{s['capacityGiB']:,}" if s.get("capacityGiB") else "elastic"
            lines.append(
                f"| {s['name']} | {s['kind']} | {capacity} | {_mbps(s['throughputMBps'])} | "
                f"{', '.join(s.get('mountedBy', [])) or '-'} | {per_gpu} |"
            )
    if summary.get("trainingJob"):
        lines += ["", training_line(summary["trainingJob"])]
    lines += _quota_markdown(summary)
    lines += _queue_markdown(summary)
    lines += ["", "```mermaid", *mermaid(plan), "```", ""]
    if plan["violations"]:
        lines += ["| level | policy | resource | message |", "|---|---|---|---|"]
        for v in plan["violations"]:
            resource = (v.get("urn") or "").split("::")[-1]
            lines.append(f"| {v['level']} | {v['policy']} | {resource} | {v['message'].replace('|', '/')} |")
    else:
        lines.append("Policy pack: no violations.")
    counts = Counter(r["type"] for r in plan["resources"] if r["custom"])
    lines += ["", "<details><summary>Resources by type</summary>", "", "| type | count |", "|---|---:|"]
    lines += [f"| `{t}` | {n} |" for t, n in sorted(counts.items())]
    lines += ["", "</details>"]
    return "\n".join(lines)


def mermaid(plan: dict[str, Any]) -> list[str]:
    """A flowchart of the cluster: AWS side (VPC, AZ-pinned pools, storage) and the on-prem site."""
    summary = plan["summary"]
    aws_pools = [p for p in summary["nodePools"] if p["kind"] == "aws"]
    hybrid_pools = [p for p in summary["nodePools"] if p["kind"] == "hybrid"]
    out = [
        "flowchart LR",
        f'  cp["EKS control plane<br/>{summary["cluster"]}"]',
        f'  subgraph aws["AWS {summary["region"]} VPC"]',
    ]
    for p in aws_pools:
        detail = f"{_nodes(p)} x {p['instanceType']}<br/>{_gpus(p)}<br/>{p['capacityType']}"
        if p["efaDevicesPerNode"]:
            detail += f"<br/>{p['efaDevicesPerNode']} EFA, {p['fabricGbpsPerNode']:g} Gbps"
        out.append(f'    pool_{_id(p["name"])}["{p["name"]}<br/>{detail}"]')
    for s in summary["storage"]:
        if s["kind"] != "nfs":
            out.append(f'    st_{_id(s["name"])}[("{s["name"]}: {s["kind"]}<br/>{_mbps(s["throughputMBps"])} MB/s")]')
    out.append("  end")
    if hybrid_pools:
        out.append('  subgraph site["On-prem site (EKS Hybrid Nodes)"]')
        for p in hybrid_pools:
            out.append(f'    pool_{_id(p["name"])}["{p["name"]}<br/>{_nodes(p)} servers x {_gpus(p)}"]')
        for s in summary["storage"]:
            if s["kind"] == "nfs":
                out.append(f'    st_{_id(s["name"])}[("{s["name"]}: NFS<br/>{_mbps(s["throughputMBps"])} MB/s")]')
        out.append("  end")
    else:
        for s in summary["storage"]:
            if s["kind"] == "nfs":
                out.append(f'  st_{_id(s["name"])}[("{s["name"]}: NFS<br/>{_mbps(s["throughputMBps"])} MB/s")]')
    for p in summary["nodePools"]:
        link = "-. VPN/DX .-" if p["kind"] == "hybrid" else "---"
        out.append(f"  cp {link} pool_{_id(p['name'])}")
    for s in summary["storage"]:
        for name in s.get("mountedBy", []):
            out.append(f"  pool_{_id(name)} --> st_{_id(s['name'])}")
    return out


def _id(name: str) -> str:
    return name.replace("-", "_")
