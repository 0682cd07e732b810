"""Every rule of the second pass, in one list, in the order problems are looked for.

Each rule is a small function over what parsed (`Parsed`) that yields `Problem`s; its docstring states the rule and
cites the limit it enforces. `blueprint schema --write` turns this list into docs/validation-rules.md.
"""

from __future__ import annotations

from components.validation import (
    addons,
    cluster,
    dcgm_exporters,
    dra,
    file,
    gateway,
    hybrid,
    lustre_backups,
    lustre_clients,
    mig,
    namespaces,
    network,
    node_images,
    offerings,
    pools,
    queues,
    regions,
    reservations,
    shared_gpus,
    site_connection,
    storage,
    training,
    workloads,
)
from components.validation.parse import Rule

#: Concern -> its rules, in report order.
BY_CONCERN: dict[str, tuple[Rule, ...]] = {
    "file": file.RULES,
    "cluster": (*cluster.RULES, *regions.RULES),
    "network": (*network.RULES, *site_connection.RULES),
    "pools": (*pools.RULES, *reservations.RULES, *node_images.RULES, *offerings.RULES, *dra.RULES),
    "hybrid": hybrid.RULES,
    "storage": (*storage.RULES, *lustre_backups.RULES, *lustre_clients.RULES),
    "addons": (*addons.RULES, *dcgm_exporters.RULES, *mig.RULES),
    "workloads": (
        *workloads.RULES,
        *shared_gpus.RULES,
        *namespaces.RULES,
        *queues.RULES,
        *training.RULES,
        *gateway.RULES,
    ),
}
#: The one list every validation runs.
RULES: tuple[Rule, ...] = tuple(rule for rules in BY_CONCERN.values() for rule in rules)
