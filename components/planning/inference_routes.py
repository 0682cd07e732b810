"""The inference Gateway's objects (pure, no Pulumi): one Gateway in the serving namespace, one HTTPRoute per model
name that splits the model's requests between its exposed versions by weight and matches the model named in the
request's `X-Gateway-Model-Name` header, and the NetworkPolicy that admits the Gateway's clients to its Envoy pods.

Invariant: the Gateway is internal (a ClusterIP Service, `components.planning.addons.envoy_gateway`) and admits only
the serving namespace and the configured namespaces and networks (`workloads.gateway.allowFrom`); the serving pods
admit the Gateway's Envoy pods and nothing else new. Routes attach only from the Gateway's own namespace. Why and
how to call it: docs/inference-routing.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from components.config import ServingWorkload, WorkloadsConfig
from components.planning.addons.envoy_gateway import GATEWAY_CLASS, NAMESPACE, PROXY_SERVICE, proxy_pods

#: The Gateway's name, in the serving namespace.
GATEWAY_NAME = "inference"
#: The listener's port: above 1023, so the Envoy container listens on it as is (Envoy Gateway adds 10000 to a
#: privileged port, [ENVOYGWSRC] internal/gatewayapi/listener.go) and the NetworkPolicy names the port the pods
#: listen on, as the VPC CNI needs ([EKSNP]).
LISTENER_PORT = 8080
#: The header a route matches the model on: the Gateway API Inference Extension's body-based router copies the
#: OpenAI request's `model` into it ([GAIEBBR] pkg/bbr/README.md), and clients that know the model set it themselves.
MODEL_HEADER = "X-Gateway-Model-Name"
#: The OpenAI-compatible API's path prefix (vLLM serves `/v1/completions`, `/v1/chat/completions`, ... [VLLM]).
API_PREFIX = "/v1"
#: The label the API server sets on every namespace to its name ([NETPOL]).
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
#: The NetworkPolicy of the Envoy pods, in Envoy Gateway's namespace.
CLIENTS_POLICY = "inference-gateway-clients"
#: The ValidatingAdmissionPolicy (and its binding) that keeps the stack's GatewayClass to the inference Gateway.
GATEWAY_CLASS_POLICY = "inference-gateway-class"


@dataclass(frozen=True)
class Backend:
    """One version of a model behind its route: the workload's Service and its weight."""

    workload: str
    weight: int


@dataclass(frozen=True)
class ModelRoute:
    """One HTTPRoute: the model name it matches, its versions, and how long a request may take."""

    name: str
    model: str
    backends: tuple[Backend, ...]
    timeout_seconds: int


@dataclass(frozen=True)
class InferenceRouting:
    """The Gateway of a stack whose serving workloads are exposed: where it is, its routes and its clients."""

    namespace: str
    routes: tuple[ModelRoute, ...]
    client_namespaces: tuple[str, ...]
    client_cidrs: tuple[str, ...]

    @property
    def endpoint(self) -> str:
        """The OpenAI-compatible base URL clients call, inside the cluster."""
        return f"http://{PROXY_SERVICE}.{NAMESPACE}.svc:{LISTENER_PORT}{API_PREFIX}"


def exposed(workloads: Sequence[ServingWorkload]) -> list[ServingWorkload]:
    """The serving workloads the Gateway routes to, in config order."""
    return [w for w in workloads if w.gateway.expose]


def model_routes(workloads: Sequence[ServingWorkload]) -> list[ModelRoute]:
    """One route per model name, named after its first exposed version (workload names are unique, so route names
    are), its versions in config order. A request may take as long as the longest a version gives an in-flight
    request to finish when it stops (`terminationGraceSeconds`): Envoy's own route timeout is 15 s ([ENVOYRT]),
    shorter than many generations."""
    by_model: dict[str, list[ServingWorkload]] = {}
    for workload in exposed(workloads):
        by_model.setdefault(workload.model_name, []).append(workload)
    return [
        ModelRoute(
            name=versions[0].name,
            model=model,
            backends=tuple(Backend(w.name, w.gateway.weight) for w in versions),
            timeout_seconds=max(w.termination_grace_seconds for w in versions),
        )
        for model, versions in by_model.items()
    ]


def plan_inference_routing(workloads: WorkloadsConfig, serving_namespace: str | None) -> InferenceRouting | None:
    """The Gateway's plan, or None when no workload is exposed (or there is no serving namespace, which validation
    refuses for a stack with serving workloads)."""
    routes = model_routes(workloads.serving)
    if not routes or serving_namespace is None:
        return None
    allow = workloads.gateway.allow_from
    return InferenceRouting(
        namespace=serving_namespace,
        routes=tuple(routes),
        client_namespaces=tuple(sorted({serving_namespace, *allow.namespaces})),
        client_cidrs=tuple(dict.fromkeys(allow.cidrs)),
    )


def gateway_spec() -> dict[str, Any]:
    """The Gateway: one plain-HTTP listener inside the cluster, routes from its own namespace only."""
    return {
        "gatewayClassName": GATEWAY_CLASS,
        "listeners": [
            {
                "name": "http",
                "protocol": "HTTP",
                "port": LISTENER_PORT,
                "allowedRoutes": {"namespaces": {"from": "Same"}},
            }
        ],
    }


def http_route_spec(route: ModelRoute, service_port: int) -> dict[str, Any]:
    """The HTTPRoute of one model: requests under `/v1` whose model header names it, split between its versions'
    Services by weight ([GWAPI] HTTPRoute `backendRefs[].weight`, `matches[].headers`)."""
    return {
        "parentRefs": [{"name": GATEWAY_NAME, "sectionName": "http"}],
        "rules": [
            {
                "matches": [
                    {
                        "path": {"type": "PathPrefix", "value": API_PREFIX},
                        "headers": [{"type": "Exact", "name": MODEL_HEADER, "value": route.model}],
                    }
                ],
                "backendRefs": [{"name": b.workload, "port": service_port, "weight": b.weight} for b in route.backends],
                "timeouts": {"request": f"{route.timeout_seconds}s"},
            }
        ],
    }


def gateway_peer(routing: InferenceRouting) -> dict[str, Any]:
    """The NetworkPolicy peer of the Gateway's Envoy pods, for the serving pods' policy."""
    return {
        "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: NAMESPACE}},
        "podSelector": {"matchLabels": proxy_pods(GATEWAY_NAME, routing.namespace)},
    }


def clients_policy_spec(routing: InferenceRouting, hybrid_nodes: Sequence[str] = ()) -> dict[str, Any]:
    """The Envoy pods admit their listener's port from the serving namespace and the configured namespaces and
    networks, nothing else. `hybrid_nodes`: when serving pods can run on a hybrid pool, their connections arrive
    from their server's address (Cilium masquerades them, [HYBRIDCNI]), so those node CIDRs are admitted too."""
    sources: list[dict[str, Any]] = [
        *({"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: n}}} for n in routing.client_namespaces),
        *({"ipBlock": {"cidr": cidr}} for cidr in dict.fromkeys([*routing.client_cidrs, *hybrid_nodes])),
    ]
    return {
        "podSelector": {"matchLabels": proxy_pods(GATEWAY_NAME, routing.namespace)},
        "policyTypes": ["Ingress"],
        "ingress": [{"from": sources, "ports": [{"protocol": "TCP", "port": LISTENER_PORT}]}],
    }


def gateway_class_policy_spec(routing: InferenceRouting) -> dict[str, Any]:
    """A ValidatingAdmissionPolicy spec: a Gateway of the stack's GatewayClass is the inference Gateway itself or
    nothing. The class's EnvoyProxy gives the proxies' Service a fixed name (`inference-gateway`), so a second
    Gateway of the class, in any namespace, would have the controller point that one Service at its own proxies and
    take the models' clients; another team brings its own GatewayClass instead (docs/inference-routing.md).
    Built with Kubernetes' own admission engine (ValidatingAdmissionPolicy, GA in 1.30, [VAP])."""
    allowed = f"request.namespace == '{routing.namespace}' && object.metadata.name == '{GATEWAY_NAME}'"
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {
            "resourceRules": [
                {
                    "apiGroups": ["gateway.networking.k8s.io"],
                    "apiVersions": ["*"],
                    "operations": ["CREATE", "UPDATE"],
                    "resources": ["gateways"],
                }
            ]
        },
        "validations": [
            {
                "expression": f"object.spec.gatewayClassName != '{GATEWAY_CLASS}' || ({allowed})",
                "message": (
                    f"GatewayClass {GATEWAY_CLASS} serves only Gateway {routing.namespace}/{GATEWAY_NAME} (its "
                    "proxies' Service has one fixed name); create your own GatewayClass for another Gateway"
                ),
            }
        ],
    }


def gateway_class_binding_spec() -> dict[str, Any]:
    """The binding that enforces `gateway_class_policy_spec` in every namespace."""
    return {"policyName": GATEWAY_CLASS_POLICY, "validationActions": ["Deny"]}
