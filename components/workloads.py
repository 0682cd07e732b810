"""The serving example: per `workloads.serving` entry, a vLLM Deployment on its inference pool, a ClusterIP Service,
the NetworkPolicy admitting its clients, a PodDisruptionBudget, the PodMonitor that has Prometheus scrape its vLLM
servers and the KEDA ScaledObject that applies its rule: the queue rule on vLLM's requests in flight by default, the
GPU-utilization rule when chosen (specs in `components.planning.serving`, `components.planning.serving_policies` and
`components.planning.serving_autoscaling`).

The objects live in the NFS claim's namespace (a claim is mounted only there). `pulumi up` does not wait for the
replicas to turn Ready (`pulumi.com/skipAwait`): they need the model's weights on the claim, which a fresh stack
does not have yet (docs/operations.md, "Serving example"), and a GPU node that cluster-autoscaler may still be
adding.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import pulumi
import pulumi_kubernetes as k8s

from components.addons import Addons
from components.config import ServingWorkload
from components.context import ClusterContext
from components.planning.addons.envoy_gateway import NAMESPACE as ENVOY_GATEWAY_NAMESPACE
from components.planning.addons.monitoring import MONITORING_NAMESPACE, POD_MONITOR_LABELS, prometheus_url
from components.planning.dra import claim_template_name
from components.planning.inference_routes import (
    CLIENTS_POLICY,
    GATEWAY_CLASS_POLICY,
    GATEWAY_NAME,
    clients_policy_spec,
    gateway_class_binding_spec,
    gateway_class_policy_spec,
    gateway_peer,
    gateway_spec,
    http_route_spec,
)
from components.planning.network_policies import cross_cni_sources
from components.planning.serving import (
    SERVING_PORT,
    claim_template,
    deployment_spec,
    disruption_budget_spec,
    network_policy_spec,
    pod_monitor_spec,
    service_spec,
    serving_labels,
)
from components.planning.serving_autoscaling import scaled_object
from components.planning.serving_policies import queue_scaled_object
from components.planning.stack_plan import StackPlan
from components.storage import SharedStorage

#: Specs are plain dicts with the Kubernetes API's own (camelCase) keys, which the SDK passes through unchanged; its
#: TypedDicts spell them in snake_case, hence the casts.
#: pulumi-kubernetes: register the object and move on, without waiting for it to become ready.
SKIP_AWAIT = {"pulumi.com/skipAwait": "true"}


class ServingWorkloads(pulumi.ComponentResource):
    def __init__(
        self,
        name: str,
        *,
        context: ClusterContext,
        stack_plan: StackPlan,
        storage: SharedStorage,
        addons: Addons,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        ctx, workloads = context, stack_plan.spec.workloads.serving
        super().__init__("gpu-clusters:index:ServingWorkloads", name, None, opts)
        if storage.nfs is None or addons.keda is None:
            raise ValueError("serving workloads need storage.nfs and KEDA (validation refuses them without)")
        namespace, claim = storage.nfs.namespace, storage.nfs.claim_name
        prometheus = addons.monitoring.prometheus if addons.monitoring is not None else None
        waits: list[pulumi.Resource] = [
            *ctx.namespace_ready(namespace),
            storage.nfs.claim,
            *([prometheus] if prometheus else []),
        ]
        across = cross_cni_sources(stack_plan.spec.network, stack_plan.pools)
        self.endpoints: dict[str, str] = {}
        routing = stack_plan.inference_routing
        routed = {b.workload for r in routing.routes for b in r.backends} if routing is not None else set()
        for workload in workloads:
            plan = stack_plan.pool(workload.pool)
            prefix = f"{ctx.cluster_name_plain}-{workload.name}"
            gpus = claim_template(workload, plan)
            templates: list[pulumi.Resource] = []
            if gpus is not None:
                # On a DRA pool each replica's GPUs come from a claim made from this template, which the driver's
                # kubelet plugin prepares: the replicas wait for the driver, so `pulumi destroy` stops them (and the
                # kubelet releases their claims through the plugin) before it uninstalls the driver.
                if addons.dra_driver is not None:
                    templates.append(addons.dra_driver.release)
                templates.append(
                    k8s.resource.v1.ResourceClaimTemplate(
                        f"{prefix}-gpus",
                        metadata=cast(Any, {"name": claim_template_name(workload.name), "namespace": namespace}),
                        spec=cast(Any, gpus),
                        opts=self._options(ctx, waits),
                    )
                )
            deployment = k8s.apps.v1.Deployment(
                prefix,
                metadata=cast(Any, self._metadata(workload, namespace, SKIP_AWAIT)),
                spec=cast(Any, deployment_spec(workload, plan, claim)),
                opts=self._options(ctx, [*waits, *templates]),
            )
            k8s.core.v1.Service(
                prefix,
                metadata=cast(Any, self._metadata(workload, namespace, SKIP_AWAIT)),
                spec=cast(Any, service_spec(workload)),
                opts=self._options(ctx, waits),
            )
            # Who may reach the server: its namespace, the configured sources and Prometheus, nothing else; on a
            # hybrid pool, EC2 pods by address (Cilium cannot match them by selector).
            ec2_pods = across.ec2_pods if across is not None and across.reaches([workload.pool]) else ()
            k8s.networking.v1.NetworkPolicy(
                prefix,
                metadata=cast(Any, self._metadata(workload, namespace)),
                spec=cast(
                    Any,
                    network_policy_spec(
                        workload,
                        MONITORING_NAMESPACE,
                        ec2_pods,
                        gateway_peer(routing) if routing is not None and workload.name in routed else None,
                    ),
                ),
                opts=self._options(ctx, waits),
            )
            k8s.policy.v1.PodDisruptionBudget(
                prefix,
                metadata=cast(Any, self._metadata(workload, namespace)),
                spec=cast(Any, disruption_budget_spec(workload)),
                opts=self._options(ctx, waits),
            )
            if prometheus is not None:
                # The servers' own metrics (the queue rule's input, and the operator's view of the queue); the
                # PodMonitor CRD comes with kube-prometheus-stack.
                k8s.apiextensions.CustomResource(
                    f"{prefix}-metrics",
                    api_version="monitoring.coreos.com/v1",
                    kind="PodMonitor",
                    metadata=self._metadata(workload, namespace, labels=POD_MONITOR_LABELS),
                    spec=pod_monitor_spec(workload),
                    opts=self._options(ctx, waits),
                )
            queue = stack_plan.queue_rules.get(workload.name)
            spec = (
                queue_scaled_object(queue, namespace, workload.name, prometheus_url())
                if queue is not None
                else scaled_object(stack_plan.serving[workload.name], namespace, workload.name, prometheus_url())
            )
            k8s.apiextensions.CustomResource(
                f"{prefix}-scaler",
                api_version="keda.sh/v1alpha1",
                kind="ScaledObject",
                metadata=self._metadata(workload, namespace),
                spec=spec,
                # The ScaledObject CRD comes with the KEDA chart.
                opts=self._options(ctx, [*ctx.namespace_ready(namespace), addons.keda.release, deployment]),
            )
            self.endpoints[workload.name] = f"http://{workload.name}.{namespace}.svc:{SERVING_PORT}/v1"
        self.gateway_endpoint: str | None = None
        if routing is not None:
            self._gateway(ctx, stack_plan, addons, waits)
        self.register_outputs({"endpoints": self.endpoints, "gatewayEndpoint": self.gateway_endpoint})

    def _gateway(
        self, ctx: ClusterContext, stack_plan: StackPlan, addons: Addons, waits: Sequence[pulumi.Resource]
    ) -> None:
        """The inference Gateway, one HTTPRoute per model and the NetworkPolicy of its Envoy pods. They wait for
        the GatewayClass (so for Envoy Gateway's CRDs and controller), which `pulumi destroy` therefore deletes
        after them."""
        routing = stack_plan.inference_routing
        eg = addons.envoy_gateway
        if routing is None or eg is None:
            raise ValueError("exposed serving workloads need Envoy Gateway (the envoy-gateway switch turns it on)")
        after_class = [*waits, eg.gateway_class]
        # Only this Gateway may use the class: a second one would take over the proxies' fixed-name Service.
        policy = k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
            f"{ctx.cluster_name_plain}-{GATEWAY_CLASS_POLICY}",
            metadata={"name": GATEWAY_CLASS_POLICY},
            spec=cast(Any, gateway_class_policy_spec(routing)),
            opts=self._options(ctx, []),
        )
        k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
            f"{ctx.cluster_name_plain}-{GATEWAY_CLASS_POLICY}",
            metadata={"name": GATEWAY_CLASS_POLICY},
            spec=cast(Any, gateway_class_binding_spec()),
            opts=self._options(ctx, [policy]),
        )
        gateway = k8s.apiextensions.CustomResource(
            f"{ctx.cluster_name_plain}-{GATEWAY_NAME}-gateway",
            api_version="gateway.networking.k8s.io/v1",
            kind="Gateway",
            metadata={"name": GATEWAY_NAME, "namespace": routing.namespace},
            spec=gateway_spec(),
            opts=self._options(ctx, after_class),
        )
        for route in routing.routes:
            k8s.apiextensions.CustomResource(
                f"{ctx.cluster_name_plain}-{route.name}-route",
                api_version="gateway.networking.k8s.io/v1",
                kind="HTTPRoute",
                metadata={"name": route.name, "namespace": routing.namespace},
                spec=http_route_spec(route, SERVING_PORT),
                opts=self._options(ctx, [*after_class, gateway]),
            )
        across = cross_cni_sources(stack_plan.spec.network, stack_plan.pools)
        # The serving namespace's own pods call the Gateway: from a hybrid server, by its node's address.
        home = next(n for n in stack_plan.namespaces if n.name == routing.namespace)
        pools = home.quota.pools if home.quota is not None else ()
        hybrid_nodes = across.hybrid_nodes if across is not None and across.reaches(pools) else ()
        k8s.networking.v1.NetworkPolicy(
            f"{ctx.cluster_name_plain}-{CLIENTS_POLICY}",
            metadata={"name": CLIENTS_POLICY, "namespace": ENVOY_GATEWAY_NAMESPACE},
            spec=cast(Any, clients_policy_spec(routing, hybrid_nodes)),
            opts=self._options(ctx, [*ctx.namespace_ready(ENVOY_GATEWAY_NAMESPACE), eg.release]),
        )
        self.gateway_endpoint = routing.endpoint

    def _metadata(
        self,
        workload: ServingWorkload,
        namespace: str,
        annotations: dict[str, str] | None = None,
        labels: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        return {
            "name": workload.name,
            "namespace": namespace,
            "labels": {**serving_labels(workload), **(labels or {})},
            **({"annotations": dict(annotations)} if annotations else {}),
        }

    def _options(self, ctx: ClusterContext, depends_on: Sequence[pulumi.Resource]) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions(
            provider=ctx.k8s_provider, parent=self, depends_on=[*ctx.kubernetes_ready, *depends_on]
        )

    def exports(self) -> dict[str, Any]:
        """Stack outputs: the OpenAI-compatible base URL of each serving workload and of the inference Gateway,
        inside the cluster."""
        out: dict[str, Any] = {"servingEndpoints": dict(self.endpoints)}
        if self.gateway_endpoint is not None:
            out["inferenceGatewayEndpoint"] = self.gateway_endpoint
        return out
