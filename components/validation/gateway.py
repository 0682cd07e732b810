"""Rules on the inference Gateway (`workloads.gateway`, `workloads.serving[].gateway`): every exposed model gets
traffic, and the Gateway admits named clients only (docs/inference-routing.md)."""

from __future__ import annotations

from collections.abc import Iterator

from components.errors import Problem
from components.validation.parse import Parsed
from components.validation.workloads import client_network_problems


def exposed_models_get_traffic(p: Parsed) -> Iterator[Problem]:
    """The exposed versions of a model (the serving workloads with its `servedModelName`) split its requests by
    `gateway.weight`, and a backend of weight 0 gets none of them ([GWAPI] HTTPBackendRef `weight`): when every
    weight is 0 the route sends nothing anywhere. Reported once per model, at its first version."""
    by_model: dict[str, list[tuple[str, int]]] = {}
    for index, workload in enumerate(p.workloads.serving if p.workloads is not None else []):
        if workload.gateway.expose:
            by_model.setdefault(workload.model_name, []).append(
                (f"workloads.serving[{index}]", workload.gateway.weight)
            )
    for model, versions in by_model.items():
        if not any(weight for _, weight in versions):
            yield Problem(
                f"{versions[0][0]}.gateway.weight",
                f"every exposed version of model {model} has weight 0, so its route sends requests nowhere; give one "
                "a weight above 0, or set `gateway.expose: false` on them all",
            )


def gateway_clients_are_named(p: Parsed) -> Iterator[Problem]:
    """`workloads.gateway.allowFrom` configures a Gateway the stack builds only when a serving workload is exposed,
    and its `cidrs` are IPv4 networks no wider than a /8, as for a serving workload's own clients."""
    if p.workloads is None:
        return
    allow = p.workloads.gateway.allow_from
    if (allow.namespaces or allow.cidrs) and not any(w.gateway.expose for w in p.workloads.serving):
        yield Problem(
            "workloads.gateway.allowFrom",
            "no serving workload is exposed through the Gateway, so there is no Gateway to admit clients to; expose "
            "one (`workloads.serving[].gateway.expose`) or remove `workloads.gateway`",
        )
    for index, cidr in enumerate(allow.cidrs):
        yield from client_network_problems(f"workloads.gateway.allowFrom.cidrs[{index}]", cidr)


RULES = (exposed_models_get_traffic, gateway_clients_are_named)
