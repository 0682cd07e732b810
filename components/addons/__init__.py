"""GPU platform add-ons: device plugins, cluster-autoscaler, drains before terminations (the node termination
handler), KEDA (serving autoscaling), Kueue (training queues), JobSet (multi-node training jobs), the node health
loop, monitoring and alerts.

`ADDONS` is the registry: one `AddonSpec` per add-on component, with its name and how to build it. Whether the stack
gets it is the plan's switch of the same name (`components.planning.addons.selection.ADDON_SWITCHES`, where every
`auto` switch is resolved), unless the spec says otherwise (monitoring, which several switches feed). `Addons` builds
exactly the enabled ones, in registry order; nothing is built for an add-on that is off. Each add-on is its own
component in this package, and every value it installs with is computed in `components.planning.addons`.

    Addons(f"{name}-addons", context=ctx, stack_plan=stack_plan, asg_names={pool: asg.name, ...},
           file_systems=MonitoredFileSystems(...), opts=ResourceOptions(parent=self))

`asg_names` maps `aws` pool names to their Auto Scaling group names (hybrid pools have none); the interruption
handler hooks every group (each can scale in). `file_systems` names the stack's Lustre and EFS file systems, which
the monitoring dashboards show.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import pulumi
import pulumi_kubernetes as k8s

from components.addons.cluster_autoscaler import ClusterAutoscaler
from components.addons.device_plugins import EfaDevicePlugin, NvidiaDevicePlugin, nvidia_runtime_class
from components.addons.dra_driver import NvidiaDraDriver
from components.addons.envoy_gateway import EnvoyGateway
from components.addons.interruption import InterruptionHandler
from components.addons.jobset import JobSet
from components.addons.keda import Keda
from components.addons.kueue import Kueue, provisioning_request_crd
from components.addons.mig_manager import MigManager
from components.addons.monitoring import MonitoredFileSystems, Monitoring
from components.addons.node_health import NodeHealthLoop
from components.config import AddonsConfig
from components.context import ClusterContext
from components.planning.addons.grafana import workload_kinds
from components.planning.addons.selection import AddonSelection
from components.planning.gpu_runtime import runtime_class_plans
from components.planning.pools import PoolPlan
from components.planning.queues import QueuePlan
from components.planning.stack_plan import StackPlan

T = TypeVar("T")

__all__ = [
    "ADDONS",
    "AddonBuild",
    "AddonSpec",
    "Addons",
    "ClusterAutoscaler",
    "EfaDevicePlugin",
    "EnvoyGateway",
    "InterruptionHandler",
    "JobSet",
    "Keda",
    "Kueue",
    "MigManager",
    "MonitoredFileSystems",
    "Monitoring",
    "NodeHealthLoop",
    "NvidiaDevicePlugin",
    "NvidiaDraDriver",
]


@dataclass(frozen=True)
class AddonBuild:
    """What an add-on's builder may read: its component name, the cluster, its slice of the stack plan, and the
    resources built before it."""

    name: str
    context: ClusterContext
    settings: AddonsConfig
    pools: Sequence[PoolPlan]
    selection: AddonSelection
    asg_names: Mapping[str, pulumi.Input[str]]
    runtime_class: k8s.node.v1.RuntimeClass | None
    file_systems: MonitoredFileSystems | None
    opts: pulumi.ResourceOptions
    #: Kueue's queues (components.planning.queues); None without Kueue.
    queues: QueuePlan | None = None
    #: The ProvisioningRequest CRD, when Kueue's capacity check uses it: cluster-autoscaler and Kueue start after it.
    provisioning_crd: pulumi.Resource | None = None
    #: The kinds of workload the stack runs, which get a dashboard (`grafana.workload_kinds`).
    workloads: frozenset[str] = frozenset()


@dataclass(frozen=True)
class AddonSpec:
    """One add-on component: its name (the component's name suffix and, by default, its switch in the plan) and how
    to build it."""

    name: str
    build: Callable[[AddonBuild], pulumi.ComponentResource]
    #: When to build it, if not exactly when the plan's switch of the same name is on.
    enabled: Callable[[AddonSelection], bool] | None = None

    def wanted(self, selection: AddonSelection) -> bool:
        return self.enabled(selection) if self.enabled is not None else selection.on(self.name)


def _nvidia_device_plugin(b: AddonBuild) -> NvidiaDevicePlugin:
    return NvidiaDevicePlugin(
        b.name,
        context=b.context,
        settings=b.settings.nvidia_device_plugin,
        plans=b.pools,
        runtime_class=b.runtime_class,
        opts=b.opts,
    )


def _cluster_autoscaler(b: AddonBuild) -> ClusterAutoscaler:
    return ClusterAutoscaler(
        b.name,
        context=b.context,
        settings=b.settings.cluster_autoscaler,
        plans=b.pools,
        provisioning_crd=b.provisioning_crd,
        opts=b.opts,
    )


def _kueue(b: AddonBuild) -> Kueue:
    if b.queues is None:
        raise ValueError("Kueue is on but the stack plan has no queues (components.planning.queues plans them)")
    waits = [b.provisioning_crd] if b.provisioning_crd is not None else []
    return Kueue(b.name, context=b.context, plans=b.pools, queues=b.queues, depends_on=waits, opts=b.opts)


def _interruption_handler(b: AddonBuild) -> InterruptionHandler:
    return InterruptionHandler(
        b.name,
        context=b.context,
        settings=b.settings.node_termination_handler,
        plans=b.pools,
        asg_names=b.asg_names,
        opts=b.opts,
    )


def _monitoring(b: AddonBuild) -> Monitoring:
    return Monitoring(
        b.name,
        context=b.context,
        alerts=b.settings.monitoring.alerts,
        node_health=b.settings.node_health,
        plans=b.pools,
        selection=b.selection,
        runtime_class=b.runtime_class,
        file_systems=b.file_systems,
        workloads=b.workloads,
        opts=b.opts,
    )


#: Every add-on component, in build order (monitoring last: its dashboards and alarms cover the others).
ADDONS: tuple[AddonSpec, ...] = (
    AddonSpec("nvidia-device-plugin", _nvidia_device_plugin),
    AddonSpec(
        "nvidia-dra-driver-gpu", lambda b: NvidiaDraDriver(b.name, context=b.context, plans=b.pools, opts=b.opts)
    ),
    AddonSpec("mig-manager", lambda b: MigManager(b.name, context=b.context, plans=b.pools, opts=b.opts)),
    AddonSpec("efa-device-plugin", lambda b: EfaDevicePlugin(b.name, context=b.context, plans=b.pools, opts=b.opts)),
    AddonSpec("cluster-autoscaler", _cluster_autoscaler),
    AddonSpec("node-termination-handler", _interruption_handler),
    AddonSpec("keda", lambda b: Keda(b.name, context=b.context, plans=b.pools, opts=b.opts)),
    AddonSpec("envoy-gateway", lambda b: EnvoyGateway(b.name, context=b.context, plans=b.pools, opts=b.opts)),
    AddonSpec("kueue", _kueue),
    AddonSpec("jobset", lambda b: JobSet(b.name, context=b.context, plans=b.pools, opts=b.opts)),
    AddonSpec(
        "node-health",
        lambda b: NodeHealthLoop(
            b.name,
            context=b.context,
            settings=b.settings.node_health,
            plans=b.pools,
            drain_timeout_seconds=b.settings.node_termination_handler.drain_timeout_seconds,
            cloudwatch=b.selection.on("container-insights"),
            opts=b.opts,
        ),
    ),
    # container insights, DCGM metrics and the alerts topic are switches of this one component
    AddonSpec("monitoring", _monitoring, enabled=lambda s: s.monitoring),
)


class Addons(pulumi.ComponentResource):
    """Every enabled add-on of a cluster, by registry name in `built`."""

    def __init__(
        self,
        name: str,
        *,
        context: ClusterContext,
        stack_plan: StackPlan,
        asg_names: Mapping[str, pulumi.Input[str]],
        file_systems: MonitoredFileSystems | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpu-clusters:index:Addons", name, None, opts)
        self.selection: AddonSelection = stack_plan.addons
        pools = stack_plan.pools
        # Hybrid GPU pools on `gpuRuntime: runtime-class` reach the NVIDIA runtime only through this class.
        self.nvidia_runtime_class = (
            nvidia_runtime_class(f"{name}-nvidia-runtime-class", context, self) if runtime_class_plans(pools) else None
        )
        self.built: dict[str, pulumi.ComponentResource] = {}
        queues = stack_plan.job_queues
        # Kueue's capacity check creates ProvisioningRequests that cluster-autoscaler handles: both need the CRD.
        self.provisioning_crd = (
            provisioning_request_crd(f"{name}-provisioning-request-crd", context, self)
            if queues is not None and queues.provisioning
            else None
        )
        for addon in ADDONS:
            if addon.wanted(self.selection):
                build = AddonBuild(
                    name=f"{name}-{addon.name}",
                    context=context,
                    settings=stack_plan.spec.addons,
                    pools=pools,
                    selection=self.selection,
                    asg_names=asg_names,
                    runtime_class=self.nvidia_runtime_class,
                    file_systems=file_systems,
                    opts=pulumi.ResourceOptions(parent=self),
                    queues=queues,
                    provisioning_crd=self.provisioning_crd,
                    workloads=workload_kinds(bool(stack_plan.spec.workloads.serving), stack_plan.training is not None),
                )
                self.built[addon.name] = addon.build(build)
        self.register_outputs({"enabled": self.selection.enabled})

    def _built(self, name: str, kind: type[T]) -> T | None:
        built = self.built.get(name)
        return built if isinstance(built, kind) else None

    @property
    def keda(self) -> Keda | None:
        return self._built("keda", Keda)

    @property
    def envoy_gateway(self) -> EnvoyGateway | None:
        return self._built("envoy-gateway", EnvoyGateway)

    @property
    def dra_driver(self) -> NvidiaDraDriver | None:
        return self._built("nvidia-dra-driver-gpu", NvidiaDraDriver)

    @property
    def monitoring(self) -> Monitoring | None:
        return self._built("monitoring", Monitoring)

    @property
    def interruption_handler(self) -> InterruptionHandler | None:
        return self._built("node-termination-handler", InterruptionHandler)

    def exports(self) -> dict[str, Any]:
        """Stack outputs: which add-ons run, where spot interruptions queue up, where alerts go."""
        out: dict[str, Any] = {"addons": self.selection.enabled}
        if self.interruption_handler is not None:
            out["interruptionQueueUrl"] = self.interruption_handler.queue_url
        if self.monitoring is not None and self.monitoring.topic_arn is not None:
            out["alertsTopicArn"] = self.monitoring.topic_arn
        return out
