"""Which GPU platform add-ons a stack gets (pure, no Pulumi): the `auto` switches resolved from the pool plans.

`components.addons.Addons` builds exactly the add-ons an `AddonSelection` switches on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from components.config import AddonsConfig, WorkloadsConfig
from components.planning.addons.cluster_autoscaler import autoscaled_plans
from components.planning.addons.interruption import drained_plans
from components.planning.addons.placement import gpu_plans
from components.planning.mig import mig_plans
from components.planning.pools import PoolPlan

AlertsTopic = Literal["create", "existing", "none"]


@dataclass(frozen=True)
class AddonSelection:
    """Which add-ons a stack gets. `auto` switches are resolved from the pool plans, once, here."""

    nvidia_device_plugin: bool
    efa_device_plugin: bool
    cluster_autoscaler: bool
    node_termination_handler: bool
    #: KEDA, which scales the serving workloads' replicas on their GPU utilization (`workloads.serving`).
    keda: bool
    container_insights: bool
    dcgm_prometheus: bool
    alerts_topic: AlertsTopic
    #: NVIDIA's mig-manager, which partitions the GPUs of pools with `devicePlugin.migDevices`.
    mig_manager: bool = False

    @property
    def monitoring(self) -> bool:
        """Anything for the monitoring component to build: a metrics pipeline or an alerts topic."""
        return self.container_insights or self.dcgm_prometheus or self.alerts_topic != "none"

    @property
    def enabled(self) -> list[str]:
        """Names of the add-ons that will be deployed (for the stack outputs and the plan)."""
        names = {
            "nvidia-device-plugin": self.nvidia_device_plugin,
            "mig-manager": self.mig_manager,
            "efa-device-plugin": self.efa_device_plugin,
            "cluster-autoscaler": self.cluster_autoscaler,
            "node-termination-handler": self.node_termination_handler,
            "keda": self.keda,
            "container-insights": self.container_insights,
            "dcgm-prometheus": self.dcgm_prometheus,
        }
        return [name for name, on in names.items() if on]


def _switch(value: str, auto: bool) -> bool:
    return auto if value == "auto" else value == "on"


def select_addons(
    addons: AddonsConfig, plans: Sequence[PoolPlan], workloads: WorkloadsConfig | None = None
) -> AddonSelection:
    """Resolve every switch. `auto`: EFA plugin when a pool wires EFA, cluster-autoscaler when a pool is in
    cluster-autoscaler or gpu-utilization mode with room to scale, termination handler when an `aws` pool exists
    (every Auto Scaling group drains through it); the mig-manager whenever a pool partitions its GPUs; KEDA when a
    serving workload exists."""
    alerts = addons.monitoring.alerts
    topic: AlertsTopic = "existing" if alerts.sns_topic_arn else ("create" if alerts.email else "none")
    return AddonSelection(
        nvidia_device_plugin=addons.nvidia_device_plugin.enabled and bool(gpu_plans(plans)),
        efa_device_plugin=_switch(addons.efa_device_plugin.enabled, any(p.efa for p in plans)),
        cluster_autoscaler=_switch(addons.cluster_autoscaler.enabled, bool(autoscaled_plans(plans))),
        node_termination_handler=_switch(addons.node_termination_handler.enabled, bool(drained_plans(plans))),
        keda=bool(workloads is not None and workloads.serving),
        container_insights=addons.monitoring.container_insights,
        dcgm_prometheus=addons.monitoring.dcgm_prometheus,
        alerts_topic=topic,
        mig_manager=bool(mig_plans(plans)),
    )
