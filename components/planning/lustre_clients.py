"""How each pool's nodes reach an EFA-enabled FSx for Lustre file system: over EFA, set up the way the FSx guide
requires, or over TCP (ENA), the way every client can (pure, no Pulumi).

The FSx for Lustre guide, "Configuring EFA clients"
(https://docs.aws.amazon.com/fsx/latest/LustreGuide/configure-efa-clients.html):

- EFA clients run Amazon Linux 2023 (or RHEL 9.5+, Ubuntu 22.04+ with kernel 6.8+) on "Nitro v4 (or higher) EC2
  instances that support EFA, excluding the trn2 instance family";
- they install the EFA driver (the EKS-optimized AL2023 NVIDIA AMIs carry it, [EKSUG] ml-eks-optimized-ami) and
  configure Lustre's EFA interfaces: the guide's quick setup downloads `configure-efa-fsx-lustre-client.zip` and runs
  its `setup.sh`, which "Imports Lustre modules, Configures TCP and EFA interfaces, Creates a systemd service for
  automatic configuration on reboot";
- "Each FSx for Lustre file system has a maximum limit of 1024 EFA connections across all client instances", one
  per configured interface: 8 on p5, p5e, p5en, p6-b200 and p6e-gb200, 2 on other types with several network cards,
  1 on the rest.

Other clients (Nitro v3 types such as p4d and g5, Bottlerocket nodes, pools without EFA) mount the same file system
over TCP: "EFA-enabled file systems can communicate with client instances using ENA, ENA Express, and EFA" (FSx guide,
"Working with EFA-enabled file systems", https://docs.aws.amazon.com/fsx/latest/LustreGuide/efa-file-systems.html).
Nitro generations: aws-gpu-facts.md §1 ([AC], [EFADOC]).
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
