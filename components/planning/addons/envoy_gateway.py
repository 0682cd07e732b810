"""Envoy Gateway: the Gateway API implementation of the inference Gateway (pure, no Pulumi).

Invariant: the controller, its certificate Job and the Envoy proxies it creates run on the system pool, with the
restricted security context the chart and the controller give them ([ENVOYGW] chart v1.9.0 values
`deployment.envoyGateway.securityContext`, `certgen.job.securityContext`; [ENVOYGWSRC] v1.9.0
internal/infrastructure/kubernetes/proxy/resource.go: the Envoy and shutdown-manager containers run as 65532, no
privilege escalation, every capability dropped, seccomp `RuntimeDefault`), so their namespace enforces `restricted`.
The proxies' Service is a ClusterIP (the controller's default is a LoadBalancer: [ENVOYGWSRC]
api/v1alpha1/shared_types.go `KubernetesServiceSpec.Type`): the Gateway is internal only. Why Envoy Gateway and
what it does not do (InferencePool backends): docs/inference-routing.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from components.planning.addons.placement import SYSTEM_NODE_SELECTOR, system_plans, tolerations_for
from components.planning.pools import PoolPlan

NAMESPACE = "envoy-gateway-system"
#: The release name of the install guide ([ENVOYGW]); the chart names its objects `envoy-gateway` whatever it is.
RELEASE = "eg"
#: The controller name Envoy Gateway reconciles GatewayClasses of: the chart's default
#: `config.envoyGateway.gateway.controllerName` ([ENVOYGW] values.yaml), which the stack keeps.
CONTROLLER_NAME = "gateway.envoyproxy.io/gatewayclass-controller"
#: The GatewayClass of the stack's inference Gateway, and the EnvoyProxy (`gateway.envoyproxy.io/v1alpha1`) it
#: points to: how the controller deploys the proxies of every Gateway of the class.
GATEWAY_CLASS = "gpu-clusters"
ENVOY_PROXY = "inference-gateway"
#: The proxies' Service, named so that clients find it without the hash the controller would put in its name
#: ([ENVOYGWSRC] api/v1alpha1/shared_types.go `KubernetesServiceSpec.Name`).
PROXY_SERVICE = "inference-gateway"
#: Two proxies on the system pool's two nodes: one node's drain does not take the Gateway down.
PROXY_REPLICAS = 2
#: Every Envoy proxy pod the controller creates, in the controller's namespace ([ENVOYGWSRC]
#: internal/infrastructure/kubernetes/proxy/resource.go `EnvoyAppLabel`); with the owning Gateway's name and
#: namespace (internal/gatewayapi/translator.go `OwningGatewayNameLabel`, `OwningGatewayNamespaceLabel`) they select
#: one Gateway's proxies.
ENVOY_POD_LABELS = {
    "app.kubernetes.io/name": "envoy",
    "app.kubernetes.io/component": "proxy",
    "app.kubernetes.io/managed-by": "envoy-gateway",
}
OWNING_GATEWAY_NAME = "gateway.envoyproxy.io/owning-gateway-name"
OWNING_GATEWAY_NAMESPACE = "gateway.envoyproxy.io/owning-gateway-namespace"


def envoy_gateway_values(plans: Sequence[PoolPlan]) -> dict[str, Any]:
    """Helm values: the controller and the certificate Job on the system pool, tolerating its taint. The chart's
    CRDs stay on (`crds.enabled`, its default): they are the cluster's Gateway API CRDs."""
    placement = {"nodeSelector": dict(SYSTEM_NODE_SELECTOR), "tolerations": tolerations_for(system_plans(plans))}
    return {
        "deployment": {"pod": placement},
        "certgen": {"job": placement},
    }


def proxy_pods(gateway: str, namespace: str) -> dict[str, str]:
    """The labels of one Gateway's Envoy pods."""
    return {**ENVOY_POD_LABELS, OWNING_GATEWAY_NAME: gateway, OWNING_GATEWAY_NAMESPACE: namespace}


def envoy_proxy_spec(plans: Sequence[PoolPlan]) -> dict[str, Any]:
    """The EnvoyProxy spec: a ClusterIP Service with a fixed name, two proxies on the system pool."""
    return {
        "provider": {
            "type": "Kubernetes",
            "kubernetes": {
                "envoyService": {"type": "ClusterIP", "name": PROXY_SERVICE},
                "envoyDeployment": {
                    "replicas": PROXY_REPLICAS,
                    "pod": {
                        "nodeSelector": dict(SYSTEM_NODE_SELECTOR),
                        "tolerations": tolerations_for(system_plans(plans)),
                    },
                },
            },
        }
    }


def gateway_class_spec() -> dict[str, Any]:
    """The GatewayClass spec: Envoy Gateway's controller, with the stack's EnvoyProxy as its parameters."""
    return {
        "controllerName": CONTROLLER_NAME,
        "parametersRef": {
            "group": "gateway.envoyproxy.io",
            "kind": "EnvoyProxy",
            "name": ENVOY_PROXY,
            "namespace": NAMESPACE,
        },
    }
