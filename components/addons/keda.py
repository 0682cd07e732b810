"""KEDA: scales each serving workload's replicas on its GPU utilization (`components.workloads` creates the
ScaledObjects). Why KEDA, and where its pods run: `components.planning.addons.keda`."""

from __future__ import annotations

from components.addons.helm import ChartAddon
from components.planning.addons.keda import KEDA_NAMESPACE, KEDA_RELEASE, keda_values


class Keda(ChartAddon):
    TYPE = "gpu-clusters:index:Keda"
    RELEASE = KEDA_RELEASE
    CHART = "keda"
    NAMESPACE = KEDA_NAMESPACE
    PLANNED_VALUES = keda_values
