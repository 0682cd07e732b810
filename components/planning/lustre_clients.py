"""How each pool's nodes reach an EFA-enabled FSx for Lustre file system: over EFA, set up the way the FSx guide
requires, or over TCP (ENA), the way every client can (pure, no Pulumi).

Invariants: a pool is an EFA client only on al2023 nodes with EFA of a family the catalog does not exclude
(`components.catalog.no_lustre_efa_families`, [FSXEFA]); the EFA connections of all clients stay within the file
system's 1024. Why and sources: docs/design-notes.md#lustre-clients-over-efa-or-tcp; the user view:
docs/storage.md#efa-lustre-clients.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Literal

from components.catalog import eight_lustre_efa_interface_types, no_lustre_efa_families
from components.config import LustreConfig
from components.planning.pools import PoolPlan
from components.planning.storage import lustre_pools

LustreClient = Literal["efa", "tcp"]

#: EFA connections one file system accepts across all its clients (FSx guide, "Step 3: EFA interfaces").
EFA_CONNECTIONS_PER_FILE_SYSTEM = 1024
#: The guide's quick-setup package.
SETUP_PACKAGE_URL = "https://docs.aws.amazon.com/fsx/latest/LustreGuide/samples/configure-efa-fsx-lustre-client.zip"
SETUP_DIRECTORY = "configure-efa-fsx-lustre-client"


def lustre_client(plan: PoolPlan, config: LustreConfig) -> LustreClient:
    """How one mounting pool reaches the file system: `efa` when the file system and the pool's nodes both can,
    else `tcp`."""
    instance = plan.instance
    can_use_efa = (
        config.efa_enabled
        and plan.efa
        and instance is not None
        and instance.family not in no_lustre_efa_families()
        and plan.pool.ami_family == "al2023"
    )
    return "efa" if can_use_efa else "tcp"


def with_lustre_clients(plans: Sequence[PoolPlan], config: LustreConfig | None) -> list[PoolPlan]:
    """The plans, each mounting pool with its `lustre_client` set (the others keep None)."""
    if config is None:
        return list(plans)
    mounting = {p.name for p in lustre_pools(config, plans)}
    return [dataclasses.replace(p, lustre_client=lustre_client(p, config)) if p.name in mounting else p for p in plans]


def efa_connections(plan: PoolPlan) -> int:
    """EFA connections one node of an `efa` client pool opens to the file system (the setup script's default)."""
    if plan.lustre_client != "efa" or plan.instance is None:
        return 0
    if plan.instance.name in eight_lustre_efa_interface_types():
        return 8
    return 2 if plan.instance.network_cards > 1 else 1


def efa_client_setup_script() -> str:
    """The cloud-init script of an `efa` client node: the FSx guide's quick setup, before the kubelet starts (so
    before any Lustre mount). `setup.sh` also installs a systemd service that repeats the configuration on reboot.
    If the download fails the node still joins, and its mounts use TCP."""
    return "\n".join(
        [
            "#!/bin/bash",
            "# FSx for Lustre over EFA: the FSx for Lustre guide's quick setup (configure-efa-clients.html).",
            "set -euo pipefail",
            'workdir="$(mktemp -d)"',
            'cd "$workdir"',
            f"curl --fail --silent --show-error --location --retry 5 -o setup.zip {SETUP_PACKAGE_URL}",
            "python3 -m zipfile -e setup.zip .",
            f"cd {SETUP_DIRECTORY}",
            "chmod +x ./*.sh ./*.py 2>/dev/null || true",
            "./setup.sh",
            "",
        ]
    )
