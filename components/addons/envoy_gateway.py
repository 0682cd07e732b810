"""Envoy Gateway: the Gateway API implementation the inference Gateway runs on (its Gateway and routes:
`components.workloads`). Where its pods run and why its Service is internal:
`components.planning.addons.envoy_gateway`."""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_kubernetes as k8s

from components.addons.helm import helm_release
from components.catalog import versions
from components.context import ClusterContext
from components.planning.addons.envoy_gateway import (
    ENVOY_PROXY,
    GATEWAY_CLASS,
    NAMESPACE,
    RELEASE,
    envoy_gateway_values,
    envoy_proxy_spec,
    gateway_class_spec,
)
from components.planning.pools import PoolPlan


class EnvoyGateway(pulumi.ComponentResource):
    """The Envoy Gateway release, the EnvoyProxy that makes its proxies internal and on the system pool, and the
    stack's GatewayClass. Helm installs the Gateway API and Envoy Gateway CRDs first (the chart's `crds` subchart's
    `crds/`) and never deletes them; the EnvoyProxy and the GatewayClass wait for the release, so `pulumi destroy`
    deletes them (and the Gateway and routes, which wait for the class) while the controller still runs."""

    def __init__(
        self,
        name: str,
        *,
        context: ClusterContext,
        plans: Sequence[PoolPlan],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpu-clusters:index:EnvoyGateway", name, None, opts)
        self.release: k8s.helm.v3.Release = helm_release(
            name, RELEASE, versions.chart("gateway-helm"), NAMESPACE, envoy_gateway_values(plans), context, parent=self
        )
        after_release = pulumi.ResourceOptions(
            provider=context.k8s_provider, parent=self, depends_on=[*context.kubernetes_ready, self.release]
        )
        proxy = k8s.apiextensions.CustomResource(
            f"{name}-proxy",
            api_version="gateway.envoyproxy.io/v1alpha1",
            kind="EnvoyProxy",
            metadata={"name": ENVOY_PROXY, "namespace": NAMESPACE},
            spec=envoy_proxy_spec(plans),
            opts=after_release,
        )
        self.gateway_class = k8s.apiextensions.CustomResource(
            f"{name}-class",
            api_version="gateway.networking.k8s.io/v1",
            kind="GatewayClass",
            metadata={"name": GATEWAY_CLASS},
            spec=gateway_class_spec(),
            opts=pulumi.ResourceOptions.merge(after_release, pulumi.ResourceOptions(depends_on=[proxy])),
        )
        self.register_outputs({"release": self.release.name})
