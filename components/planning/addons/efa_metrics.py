"""EFA counters in Prometheus (pure, no Pulumi): a textfile sidecar next to node-exporter.

node-exporter's infiniband collector exports no EFA traffic, so a shell loop in a second container of the
node-exporter pod writes the EFA devices' `hw_counters` ([EFADRV]) as Prometheus text for its textfile collector.
Invariant: the exported names are `components.catalog.metrics.efa_port_counters`, the ones the dashboards query.
Why and sources: docs/design-notes.md#efa-counters-in-prometheus.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from components.catalog.metrics import efa_metric_name, efa_port_counters
from components.planning.pools import PoolPlan

#: Where the sidecar writes and node-exporter reads (`--collector.textfile.directory`).
EFA_TEXTFILE_DIRECTORY = "/run/efa-textfile"
EFA_TEXTFILE = "efa.prom"
EFA_TEXTFILE_VOLUME = "efa-textfile"
#: As often as Prometheus scrapes node-exporter by default (kube-prometheus-stack: 30 s); the file is rewritten
#: twice per scrape interval so a scrape never reads a sample older than 15 s.
EFA_SCRAPE_SECONDS = 15
EFA_SIDECAR = "efa-counters"
#: kube-prometheus-stack's own node-exporter arguments ([KPS] values.yaml `prometheus-node-exporter.extraArgs`):
#: a values list replaces the chart's list, so adding the textfile directory means restating these.
KPS_NODE_EXPORTER_ARGS: tuple[str, ...] = (
    "--collector.filesystem.mount-points-exclude=^/(dev|proc|sys|run/containerd/.+|var/lib/docker/.+"
    "|var/lib/kubelet/.+)($|/)",
    "--collector.filesystem.fs-types-exclude=^(autofs|binfmt_misc|bpf|cgroup2?|configfs|debugfs|devpts|devtmpfs"
    "|fusectl|hugetlbfs|iso9660|mqueue|nsfs|overlay|proc|procfs|pstore|rpc_pipefs|securityfs|selinuxfs|squashfs"
    "|sysfs|tracefs|erofs)$",
)
#: node-exporter mounts the host's /sys here ([KPS] prometheus-node-exporter templates/daemonset.yaml).
HOST_SYS = "/host/sys"


def efa_plans(plans: Sequence[PoolPlan]) -> list[PoolPlan]:
    """Pools whose nodes have EFA interfaces."""
    return [p for p in plans if p.efa and p.efa_devices > 0]


def efa_counters_pass(host_sys: str = HOST_SYS, directory: str = EFA_TEXTFILE_DIRECTORY) -> str:
    """One pass of the sidecar: every EFA port counter of `metrics.yaml` as `node_efa_<counter>_total{device,port}`
    into `directory/efa.prom`, written to a temporary file first and renamed, so node-exporter never reads half a
    file. Each metric's samples are written together under one `# TYPE` line, as the text format requires; a
    counter an older driver lacks is skipped. (`host_sys` and `directory` are parameters for the tests, which run
    it over a fake sysfs tree.)"""
    counters = " ".join(efa_port_counters())
    out = f"{directory}/{EFA_TEXTFILE}"
    return "\n".join(
        [
            f'tmp="{out}.$$"',
            ': > "$tmp"',
            f"for counter in {counters}; do",
            '  typed=""',
            f"  for dir in {host_sys}/class/infiniband/*/ports/*/hw_counters; do",
            '    [ -r "$dir/$counter" ] || continue',
            '    port_dir="${dir%/hw_counters}"',
            '    device_dir="${port_dir%/ports/*}"',
            '    driver="$(readlink -f "$device_dir/device/driver")"',
            '    [ "${driver##*/}" = efa ] || continue',
            '    if [ -z "$typed" ]; then',
            '      echo "# TYPE node_efa_${counter}_total counter" >> "$tmp"',
            "      typed=1",
            "    fi",
            '    echo "node_efa_${counter}_total{device=\\"${device_dir##*/}\\",port=\\"${port_dir##*/}\\"}'
            ' $(cat "$dir/$counter")" >> "$tmp"',
            "  done",
            "done",
            f'mv "$tmp" "{out}"',
        ]
    )


def efa_counters_script() -> str:
    """The sidecar's command: `efa_counters_pass` every `EFA_SCRAPE_SECONDS`, for ever."""
    return f"set -u\nwhile true; do\n{efa_counters_pass()}\nsleep {EFA_SCRAPE_SECONDS}\ndone"


def efa_metric_names() -> frozenset[str]:
    """The Prometheus names the sidecar can export (the dashboards' allowed EFA names)."""
    return frozenset(efa_metric_name(c) for c in efa_port_counters())


def efa_textfile_values() -> dict[str, Any]:
    """prometheus-node-exporter values that add the sidecar and point the textfile collector at its directory."""
    return {
        "image": {"distroless": False},
        "extraArgs": [*KPS_NODE_EXPORTER_ARGS, f"--collector.textfile.directory={EFA_TEXTFILE_DIRECTORY}"],
        "sidecarVolumeMount": [{"name": EFA_TEXTFILE_VOLUME, "mountPath": EFA_TEXTFILE_DIRECTORY, "readOnly": False}],
        "sidecars": [
            {
                "name": EFA_SIDECAR,
                "command": ["/bin/sh", "-c", efa_counters_script()],
                "volumeMounts": [{"name": "sys", "mountPath": HOST_SYS, "readOnly": True}],
                "resources": {
                    "requests": {"cpu": "10m", "memory": "16Mi"},
                    "limits": {"memory": "32Mi"},
                },
            }
        ],
    }
