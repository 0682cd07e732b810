"""Which GPU platform add-ons a stack gets (pure, no Pulumi): the `auto` switches resolved from the pool plans.

`ADDON_SWITCHES` is the one list of add-on switches: a name and the rule that decides it. `AddonSelection` is derived
from it (a switch per name, in list order), and `components.addons.ADDONS` builds the add-on whose switch is on, so
a new add-on is one `AddonSwitch` here and one `AddonSpec` beside its component.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from components.config import AddonsConfig, WorkloadsConfig
from components.planning.addons.cluster_autoscaler import autoscaled_plans
from components.planning.addons.interruption import drained_plans
from components.planning.addons.placement import gpu_plans
from components.planning.dra import dra_plans
from components.planning.mig import mig_plans
from components.planning.pools import PoolPlan

AlertsTopic = Literal["create", "existing", "none"]


@dataclass(frozen=True)
class AddonFacts:
    """What a switch may read: the stack's add-on settings, its pool plans and its workloads."""

    settings: AddonsConfig
    plans: Sequence[PoolPlan]
    workloads: WorkloadsConfig | None


@dataclass(frozen=True)
class AddonSwitch:
    """One add-on the plan turns on or off: its name (in the plan's `addons` list) and the rule that decides it."""

    name: str
    wanted: Callable[[AddonFacts], bool]


def _switch(value: str, auto: bool) -> bool:
    return auto if value == "auto" else value == "on"


def _plugin_gpus(plans: Sequence[PoolPlan]) -> bool:
    """Whether a GPU pool gets its GPUs from the device plugin (every GPU pool not on DRA)."""
    return len(gpu_plans(plans)) > len(dra_plans(plans))


def kueue_runs(settings: AddonsConfig, plans: Sequence[PoolPlan], workloads: WorkloadsConfig | None) -> bool:
    """Kueue's switch, the one rule the plan and validation read. `auto`: any GPU pool, since gang scheduling is a
    MUST of Kubernetes AI Conformance on every cluster with accelerators (docs/conformance.md#gang_scheduling), also
    where every GPU pool allocates through DRA and stays out of the default queues; or queues or a training job
    configured."""
    gpus = any(p.is_gpu for p in plans)
    configured = workloads is not None and (workloads.queues is not None or workloads.training is not None)
    return _switch(settings.kueue.enabled, gpus or configured)


#: Every add-on switch, in the order the plan lists the enabled ones. `auto`: EFA plugin when a pool wires EFA,
#: cluster-autoscaler when a pool is in cluster-autoscaler or gpu-utilization mode with room to scale, termination
#: handler when an `aws` pool exists (every Auto Scaling group drains through it); the mig-manager whenever a pool
#: partitions its GPUs; KEDA when a serving workload exists; Kueue when a GPU pool exists or queues are configured;
#: JobSet, the multi-node job controller, when a training pool or the reference training job (`workloads.training`)
#: exists; the health loop when a pool is gated.
ADDON_SWITCHES: tuple[AddonSwitch, ...] = (
    AddonSwitch("nvidia-device-plugin", lambda f: f.settings.nvidia_device_plugin.enabled and _plugin_gpus(f.plans)),
    #: NVIDIA's DRA driver for GPUs, whenever a GPU pool allocates through DRA (`gpuAllocation: dra`).
    AddonSwitch("nvidia-dra-driver-gpu", lambda f: bool(dra_plans(f.plans))),
    AddonSwitch("mig-manager", lambda f: bool(mig_plans(f.plans))),
    AddonSwitch(
        "efa-device-plugin", lambda f: _switch(f.settings.efa_device_plugin.enabled, any(p.efa for p in f.plans))
    ),
    AddonSwitch(
        "cluster-autoscaler", lambda f: _switch(f.settings.cluster_autoscaler.enabled, bool(autoscaled_plans(f.plans)))
    ),
    AddonSwitch(
        "node-termination-handler",
        lambda f: _switch(f.settings.node_termination_handler.enabled, bool(drained_plans(f.plans))),
    ),
    #: KEDA scales the serving workloads' replicas on their GPU utilization (`workloads.serving`).
    AddonSwitch("keda", lambda f: bool(f.workloads is not None and f.workloads.serving)),
    #: Envoy Gateway, the Gateway API implementation of the inference Gateway, when a serving workload is exposed
    #: through it (`workloads.serving[].gateway.expose`, on by default): docs/inference-routing.md.
    AddonSwitch(
        "envoy-gateway",
        lambda f: f.workloads is not None and any(w.gateway.expose for w in f.workloads.serving),
    ),
    #: Kueue queues batch jobs (components.planning.queues): `auto` when the stack has a GPU pool (gang scheduling,
    #: docs/conformance.md) or configures `workloads.queues` or `workloads.training`.
    AddonSwitch("kueue", lambda f: kueue_runs(f.settings, f.plans, f.workloads)),
    AddonSwitch(
        "jobset",
        lambda f: (
            any(p.role == "training" for p in f.plans) or (f.workloads is not None and f.workloads.training is not None)
        ),
    ),
    AddonSwitch("container-insights", lambda f: f.settings.monitoring.container_insights),
    AddonSwitch("dcgm-prometheus", lambda f: f.settings.monitoring.dcgm_prometheus),
    #: The health loop, whenever a pool's nodes register with the health gate's startup taint: without it they
    #: would never lose it (`addons.nodeHealth.enabled` off leaves the taint out, components.planning.pools).
    AddonSwitch("node-health", lambda f: any(p.health_gated for p in f.plans)),
)


@dataclass(frozen=True)
class AddonSelection:
    """Which add-ons a stack gets: each switch of `ADDON_SWITCHES` by name, resolved from the pool plans once, here,
    and where the alerts go."""

    switches: Mapping[str, bool]
    alerts_topic: AlertsTopic

    def on(self, name: str) -> bool:
        """Whether the add-on `name` is deployed; a name no switch has raises KeyError (a typo is not "off")."""
        return self.switches[name]

    @property
    def monitoring(self) -> bool:
        """Anything for the monitoring component to build: a metrics pipeline or an alerts topic."""
        return self.on("container-insights") or self.on("dcgm-prometheus") or self.alerts_topic != "none"

    @property
    def enabled(self) -> list[str]:
        """Names of the add-ons that will be deployed (for the stack outputs and the plan), in switch order."""
        return [name for name, on in self.switches.items() if on]


def select_addons(
    addons: AddonsConfig, plans: Sequence[PoolPlan], workloads: WorkloadsConfig | None = None
) -> AddonSelection:
    """Resolve every switch of `ADDON_SWITCHES` and the alerts destination."""
    facts = AddonFacts(addons, plans, workloads)
    alerts = addons.monitoring.alerts
    topic: AlertsTopic = "existing" if alerts.sns_topic_arn else ("create" if alerts.email else "none")
    return AddonSelection({s.name: bool(s.wanted(facts)) for s in ADDON_SWITCHES}, topic)
