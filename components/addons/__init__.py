"""GPU platform add-ons: device plugins, cluster-autoscaler, drains before terminations (the node termination
handler), KEDA (serving autoscaling), monitoring and alerts.

`Addons` builds the ones the stack switches on (`components.planning.addons.selection.select_addons` resolves the `auto`
switches from the pool plans); each is its own component in this package, and every value it installs with is
computed in `components.planning.addons`. Nothing is built for an add-on that is off.

    Addons(f"{name}-addons", ctx, spec.addons, pool_plans, asg_names={pool: asg.name, ...},
           workloads=spec.workloads, opts=ResourceOptions(parent=self))

Each add-on receives its own section of the `addons` config; the cluster's names, region and versions come from the
`ClusterContext`.

`asg_names` maps `aws` pool names to their Auto Scaling group names (hybrid pools have none); the interruption
handler hooks every group (each can scale in). `workloads` switches KEDA on when a serving workload exists.
`file_systems` names the stack's Lustre and EFS file systems, which the monitoring dashboards show.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pulumi

from components.addons.cluster_autoscaler import ClusterAutoscaler
from components.addons.device_plugins import EfaDevicePlugin, NvidiaDevicePlugin, nvidia_runtime_class
from components.addons.interruption import InterruptionHandler
from components.addons.keda import Keda
from components.addons.mig_manager import MigManager
from components.addons.monitoring import MonitoredFileSystems, Monitoring
from components.config import AddonsConfig, WorkloadsConfig
from components.context import ClusterContext
from components.planning.addons.selection import AddonSelection, select_addons
from components.planning.gpu_runtime import runtime_class_plans
from components.planning.pools import PoolPlan

__all__ = [
    "Addons",
    "ClusterAutoscaler",
    "EfaDevicePlugin",
    "InterruptionHandler",
    "Keda",
    "MigManager",
    "MonitoredFileSystems",
    "Monitoring",
    "NvidiaDevicePlugin",
]


class Addons(pulumi.ComponentResource):
    """Every enabled add-on of a cluster. Attributes are None (or empty) for add-ons that are off."""

    def __init__(
        self,
        name: str,
        ctx: ClusterContext,
        settings: AddonsConfig,
        pool_plans: Sequence[PoolPlan],
        asg_names: Mapping[str, pulumi.Input[str]],
        workloads: WorkloadsConfig | None = None,
        opts: pulumi.ResourceOptions | None = None,
        file_systems: MonitoredFileSystems | None = None,
    ) -> None:
        super().__init__("gpu-clusters:index:Addons", name, None, opts)
        self.selection: AddonSelection = select_addons(settings, pool_plans, workloads)
        selection = self.selection
        child = pulumi.ResourceOptions(parent=self)

        # Hybrid GPU pools on `gpuRuntime: runtime-class` reach the NVIDIA runtime only through this class.
        self.nvidia_runtime_class = (
            nvidia_runtime_class(f"{name}-nvidia-runtime-class", ctx, self) if runtime_class_plans(pool_plans) else None
        )
        self.nvidia_device_plugin = (
            NvidiaDevicePlugin(
                f"{name}-nvidia-device-plugin",
                ctx,
                settings.nvidia_device_plugin,
                pool_plans,
                self.nvidia_runtime_class,
                child,
            )
            if selection.nvidia_device_plugin
            else None
        )
        self.mig_manager = MigManager(f"{name}-mig-manager", ctx, pool_plans, child) if selection.mig_manager else None
        self.efa_device_plugin = (
            EfaDevicePlugin(f"{name}-efa-device-plugin", ctx, pool_plans, child)
            if selection.efa_device_plugin
            else None
        )
        self.cluster_autoscaler = (
            ClusterAutoscaler(f"{name}-cluster-autoscaler", ctx, settings.cluster_autoscaler, pool_plans, child)
            if selection.cluster_autoscaler
            else None
        )
        self.interruption_handler = (
            InterruptionHandler(
                f"{name}-node-termination-handler", ctx, settings.node_termination_handler, pool_plans, asg_names, child
            )
            if selection.node_termination_handler
            else None
        )
        self.keda = Keda(f"{name}-keda", ctx, pool_plans, child) if selection.keda else None
        self.monitoring = (
            Monitoring(
                f"{name}-monitoring",
                ctx,
                settings.monitoring.alerts,
                pool_plans,
                selection,
                self.nvidia_runtime_class,
                child,
                file_systems,
            )
            if selection.monitoring
            else None
        )
        self.register_outputs({"enabled": selection.enabled})

    def exports(self) -> dict[str, Any]:
        """Stack outputs: which add-ons run, where spot interruptions queue up, where alerts go."""
        out: dict[str, Any] = {"addons": self.selection.enabled}
        if self.interruption_handler is not None:
            out["interruptionQueueUrl"] = self.interruption_handler.queue_url
        if self.monitoring is not None and self.monitoring.topic_arn is not None:
            out["alertsTopicArn"] = self.monitoring.topic_arn
        return out
