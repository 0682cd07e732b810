"""Monitoring and alerts: Container Insights with GPU metrics and/or DCGM exporter + kube-prometheus-stack.

Two switches (`addons.monitoring`): `containerInsights` (the CloudWatch add-on, its alarms and dashboard, [CWI])
and `dcgmPrometheus` (kube-prometheus-stack first, for its CRDs, then the DCGM exporter, Prometheus rules and
Grafana). Alerts go to an SNS topic when `alerts.snsTopicArn` or `alerts.email` is set.
See docs/addons.md#monitoring-and-alerts.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import NamedTuple

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.addons.alarms import metric_alarm
from components.addons.helm import helm_release, service_account_role
from components.catalog import versions
from components.config import Alerts, NodeHealth
from components.context import ClusterContext, stateful_options
from components.managed_addons import RESOLVE_CONFLICTS, addon_version
from components.planning.addons.alarms import MetricAlarmPlan, QueryAlarmPlan
from components.planning.addons.cloudwatch_dashboard import cloudwatch_dashboard, dashboard_name
from components.planning.addons.documents import as_json
from components.planning.addons.grafana import (
    GRAFANA_SERVICE_ACCOUNT,
    DashboardPlan,
    config_map_annotations,
    config_map_labels,
    grafana_cloudwatch_policy,
    prometheus_dashboards,
    render_dashboard,
)
from components.planning.addons.monitoring import (
    ALERTMANAGER_SERVICE_ACCOUNT,
    CLOUDWATCH_ADDON,
    CLOUDWATCH_AGENT_POLICY,
    CLOUDWATCH_NAMESPACE,
    CLOUDWATCH_SERVICE_ACCOUNT,
    CLUSTER_NAME,
    DCGM_EXPORTER_RELEASE,
    DCGM_EXPORTER_RUNTIME_CLASS_NAMESPACE,
    DCGM_EXPORTER_RUNTIME_CLASS_RELEASE,
    KUBE_PROMETHEUS_STACK_RELEASE,
    MONITORING_NAMESPACE,
    POD_MONITOR_LABELS,
    alertmanager_sns_policy,
    alerts_key_policy,
    alerts_topic_arn_pattern,
    cloudwatch_addon_configuration,
    container_insights_alarms,
    dcgm_exporter_values,
    kube_prometheus_stack_values,
)
from components.planning.addons.node_health_alarms import heartbeat_alarm, pool_alarms
from components.planning.addons.node_monitoring import HEALTH_LOOP_POD_MONITOR, agent_wanted, health_loop_pod_monitor
from components.planning.addons.selection import AddonSelection, AlertsTopic
from components.planning.gpu_runtime import runtime_class_plans
from components.planning.pools import PoolPlan


class MonitoredFileSystems(NamedTuple):
    """The stack's shared file systems the dashboards show (ids known once they exist); None when absent."""

    lustre: pulumi.Input[str] | None = None
    efs: pulumi.Input[str] | None = None

    def present(self) -> dict[str, pulumi.Input[str]]:
        """The file systems the stack has, by dashboard name (`FILE_SYSTEM_DASHBOARDS`): their ids."""
        return {kind: fs for kind, fs in (("lustre", self.lustre), ("efs", self.efs)) if fs is not None}


class Monitoring(pulumi.ComponentResource):
    def __init__(
        self,
        name: str,
        *,
        context: ClusterContext,
        alerts: Alerts,
        plans: Sequence[PoolPlan],
        node_health: NodeHealth | None = None,
        selection: AddonSelection,
        runtime_class: k8s.node.v1.RuntimeClass | None = None,
        file_systems: MonitoredFileSystems | None = None,
        workloads: Collection[str] = (),
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpu-clusters:index:Monitoring", name, None, opts)
        self._workloads = frozenset(workloads)
        self._ctx = context
        self._alerts = alerts
        self._node_health = node_health or NodeHealth()
        self.topic_arn: pulumi.Output[str] | None = None
        self.topic_key: aws.kms.Key | None = None
        self.addon: aws.eks.Addon | None = None
        self.alarms: dict[str, aws.cloudwatch.MetricAlarm] = {}
        self.prometheus: k8s.helm.v3.Release | None = None
        self.dcgm_exporter: k8s.helm.v3.Release | None = None
        self.dcgm_exporter_runtime_class: k8s.helm.v3.Release | None = None
        self._runtime_class = runtime_class
        self._file_systems = file_systems or MonitoredFileSystems()
        self.dashboards: dict[str, k8s.core.v1.ConfigMap] = {}
        self.health_loop_scrape: k8s.apiextensions.CustomResource | None = None
        self.cloudwatch_dashboard: aws.cloudwatch.Dashboard | None = None

        self._alerts_topic(selection.alerts_topic)
        if selection.on("container-insights"):
            self._container_insights(plans, health_loop=selection.on("node-health"))
        if selection.on("dcgm-prometheus"):
            self._dcgm_prometheus(plans)
        self.register_outputs({"alertsTopicArn": self.topic_arn})

    # ------------------------------------------------------------------------------------------------ SNS topic
    def _alerts_topic(self, mode: AlertsTopic) -> None:
        context = self._ctx
        alerts = self._alerts
        child = pulumi.ResourceOptions(parent=self)
        cluster = context.cluster_name_plain
        if mode == "existing" and alerts.sns_topic_arn:
            self.topic_arn = pulumi.Output.from_input(alerts.sns_topic_arn)
        elif mode == "create":
            self.topic_key = aws.kms.Key(
                f"{cluster}-alerts",
                description=f"Encrypts the GPU alerts topic of cluster {cluster}",
                enable_key_rotation=True,
                deletion_window_in_days=30,
                policy=pulumi.Output.all(context.account_id, context.partition).apply(
                    lambda v: as_json(
                        alerts_key_policy(v[0], alerts_topic_arn_pattern(v[1], context.region, v[0], cluster), v[1])
                    )
                ),
                tags=dict(context.tags),
                opts=stateful_options(context.stateful["kms-key"], self),
            )
            topic = aws.sns.Topic(
                f"{cluster}-alerts", kms_master_key_id=self.topic_key.arn, tags=dict(context.tags), opts=child
            )
            self.topic_arn = topic.arn
        if self.topic_arn is not None and alerts.email:
            aws.sns.TopicSubscription(
                f"{cluster}-alerts-email", topic=self.topic_arn, protocol="email", endpoint=alerts.email, opts=child
            )

    @property
    def _actions(self) -> list[pulumi.Input[str]]:
        return [] if self.topic_arn is None else [self.topic_arn]

    # ---------------------------------------------------------------------------------------- Container Insights
    def _container_insights(self, plans: Sequence[PoolPlan], health_loop: bool) -> None:
        """The add-on, its GPU alarms and the dashboard; with the health loop (which publishes to CloudWatch on
        these stacks) also its alarms and dashboard widgets."""
        context = self._ctx
        cluster = context.cluster_name_plain
        identity = service_account_role(
            context,
            "cloudwatch-agent",
            CLOUDWATCH_NAMESPACE,
            CLOUDWATCH_SERVICE_ACCOUNT,
            None,
            [CLOUDWATCH_AGENT_POLICY],
            self,
        )
        self.addon = aws.eks.Addon(
            f"{cluster}-{CLOUDWATCH_ADDON}",
            cluster_name=context.cluster_name,
            addon_name=CLOUDWATCH_ADDON,
            addon_version=addon_version(CLOUDWATCH_ADDON, context.kubernetes_version, context.managed_addon_pins),
            configuration_values=as_json(cloudwatch_addon_configuration(plans)),
            resolve_conflicts_on_create=RESOLVE_CONFLICTS,
            resolve_conflicts_on_update=RESOLVE_CONFLICTS,
            tags=dict(context.tags),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*context.kubernetes_ready, *identity]),
        )
        placeholders = {CLUSTER_NAME: context.cluster_name}
        alarms: list[MetricAlarmPlan | QueryAlarmPlan] = [*container_insights_alarms(self._alerts)]
        if health_loop:
            alarms += [heartbeat_alarm(), *pool_alarms(plans)]
        for alarm in alarms:
            self.alarms[alarm.suffix] = metric_alarm(
                f"{cluster}-{alarm.suffix}",
                alarm,
                placeholders,
                actions=self._actions,
                ok_actions=self._actions,
                tags=context.tags,
                opts=pulumi.ResourceOptions(parent=self, depends_on=[self.addon]),
            )
        self._cloudwatch_dashboard(plans, health_loop)

    def _cloudwatch_dashboard(self, plans: Sequence[PoolPlan], health_loop: bool) -> None:
        """GPUs, EFA, file systems, nodes and node health on one CloudWatch dashboard (`cloudwatch_dashboard`)."""
        context = self._ctx
        fs = self._file_systems
        body = pulumi.Output.all(context.cluster_name, fs.lustre, fs.efs).apply(
            lambda v: as_json(cloudwatch_dashboard(v[0], context.region, plans, v[1], v[2], health_loop))
        )
        self.cloudwatch_dashboard = aws.cloudwatch.Dashboard(
            dashboard_name(context.cluster_name_plain),
            dashboard_name=dashboard_name(context.cluster_name_plain),
            dashboard_body=body,
            opts=pulumi.ResourceOptions(parent=self),
        )

    # --------------------------------------------------------------------------------- DCGM + Prometheus stack
    def _dcgm_prometheus(self, plans: Sequence[PoolPlan]) -> None:
        context = self._ctx
        alerts = self._alerts
        node_health = self._node_health
        depends: list[pulumi.Resource] = []
        if self.topic_arn is not None:
            key_arn = self.topic_key.arn if self.topic_key is not None else None
            policy = pulumi.Output.all(self.topic_arn, key_arn).apply(
                lambda v: as_json(alertmanager_sns_policy(v[0], v[1]))
            )
            depends = service_account_role(
                context,
                "alertmanager",
                MONITORING_NAMESPACE,
                ALERTMANAGER_SERVICE_ACCOUNT,
                policy,
                (),
                self,
            )
        file_systems = self._file_systems.present()
        cloudwatch = bool(file_systems)
        if cloudwatch:
            # Grafana's CloudWatch data source reads the file systems' metrics with this role ([GFCW], grafana.py).
            depends += service_account_role(
                context,
                "grafana",
                MONITORING_NAMESPACE,
                GRAFANA_SERVICE_ACCOUNT,
                as_json(grafana_cloudwatch_policy()),
                (),
                self,
            )
        values = (
            pulumi.Output.from_input(self.topic_arn).apply(
                lambda arn: kube_prometheus_stack_values(alerts, context.region, plans, arn, cloudwatch, node_health)
            )
            if self.topic_arn is not None
            else kube_prometheus_stack_values(alerts, context.region, plans, None, cloudwatch, node_health)
        )
        self.prometheus = helm_release(
            f"{context.cluster_name_plain}-{KUBE_PROMETHEUS_STACK_RELEASE}",
            KUBE_PROMETHEUS_STACK_RELEASE,
            versions.chart("kube-prometheus-stack"),
            MONITORING_NAMESPACE,
            values,
            context,
            parent=self,
            depends_on=depends,
        )
        for dashboard in prometheus_dashboards(plans, file_systems, self._workloads):
            self.dashboards[dashboard.name] = self._dashboard_config_map(dashboard)
        if agent_wanted(plans):
            self.health_loop_scrape = self._health_loop_pod_monitor()
        dcgm = versions.chart("dcgm-exporter")
        self.dcgm_exporter = helm_release(
            f"{context.cluster_name_plain}-{DCGM_EXPORTER_RELEASE}",
            DCGM_EXPORTER_RELEASE,
            dcgm,
            MONITORING_NAMESPACE,
            dcgm_exporter_values(plans, dcgm.image_tag),
            context,
            parent=self,
            # The chart's ServiceMonitor needs the Prometheus Operator CRDs that kube-prometheus-stack installs.
            depends_on=[self.prometheus],
        )
        if self._runtime_class is not None and runtime_class_plans(plans):
            self.dcgm_exporter_runtime_class = helm_release(
                f"{context.cluster_name_plain}-{DCGM_EXPORTER_RUNTIME_CLASS_RELEASE}",
                DCGM_EXPORTER_RUNTIME_CLASS_RELEASE,
                dcgm,
                DCGM_EXPORTER_RUNTIME_CLASS_NAMESPACE,
                dcgm_exporter_values(plans, dcgm.image_tag, runtime_class=True),
                context,
                parent=self,
                depends_on=[self.prometheus, self._runtime_class],
            )

    def _health_loop_pod_monitor(self) -> k8s.apiextensions.CustomResource:
        """The health loop's PodMonitor (`node_monitoring.health_loop_pod_monitor`); its CRD comes with
        kube-prometheus-stack."""
        context = self._ctx
        body = health_loop_pod_monitor(MONITORING_NAMESPACE, POD_MONITOR_LABELS)
        return k8s.apiextensions.CustomResource(
            f"{context.cluster_name_plain}-{HEALTH_LOOP_POD_MONITOR}-pod-monitor",
            api_version=body["apiVersion"],
            kind=body["kind"],
            metadata=body["metadata"],
            spec=body["spec"],
            opts=pulumi.ResourceOptions(
                parent=self,
                provider=context.k8s_provider,
                depends_on=[
                    *context.namespace_ready(MONITORING_NAMESPACE),
                    *([self.prometheus] if self.prometheus else []),
                ],
            ),
        )

    def _dashboard_config_map(self, dashboard: DashboardPlan) -> k8s.core.v1.ConfigMap:
        """A dashboard as a ConfigMap in `monitoring`, labelled for Grafana's dashboard sidecar (grafana.py). It
        waits for the namespace and for kube-prometheus-stack, whose Grafana reads it."""
        context = self._ctx
        file_system = self._file_systems.present().get(dashboard.name)
        text: pulumi.Input[str] = (
            pulumi.Output.from_input(file_system).apply(lambda fs: render_dashboard(dashboard, {"filesystem": fs}))
            if file_system is not None
            else render_dashboard(dashboard, {})
        )
        return k8s.core.v1.ConfigMap(
            f"{context.cluster_name_plain}-{dashboard.config_map}",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=dashboard.config_map,
                namespace=MONITORING_NAMESPACE,
                labels=config_map_labels(),
                annotations=config_map_annotations(),
            ),
            data={dashboard.file_name: text},
            opts=pulumi.ResourceOptions(
                parent=self,
                provider=context.k8s_provider,
                depends_on=[
                    *context.namespace_ready(MONITORING_NAMESPACE),
                    *([self.prometheus] if self.prometheus else []),
                ],
            ),
        )
