"""Monitoring and alerts: Container Insights with GPU metrics and/or DCGM exporter + kube-prometheus-stack.

Two switches (`addons.monitoring`):
- `containerInsights` (default on): the `amazon-cloudwatch-observability` EKS add-on ([CWI] aws-gpu-facts.md §7a:
  node/pod/container GPU metrics from v1.3.0-eksbuild.1), its agent's Pod Identity role, tolerations for every
  pool taint, the GPU metrics agent for `gpu-utilization` pools, and two CloudWatch alarms: GPU temperature and
  idle GPU spend;
- `dcgmPrometheus` (default off): kube-prometheus-stack (first: it brings the ServiceMonitor and PrometheusRule
  CRDs) and NVIDIA's DCGM exporter on every GPU node, with Prometheus rules for XID errors, uncorrectable ECC
  errors, temperature and idle spend.

Alerts go to an SNS topic when `alerts.snsTopicArn` is given or `alerts.email` is set (a topic encrypted with its
own KMS key is created then, with an email subscription).
"""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.addons.alarms import metric_alarm
from components.addons.helm import helm_release, service_account_role
from components.catalog import versions
from components.config import Alerts
from components.context import ClusterContext, stateful_options
from components.managed_addons import RESOLVE_CONFLICTS, addon_version
from components.planning.addons.documents import as_json
from components.planning.addons.monitoring import (
    ALERTMANAGER_SERVICE_ACCOUNT,
    CLOUDWATCH_ADDON,
    CLOUDWATCH_AGENT_POLICY,
    CLOUDWATCH_NAMESPACE,
    CLOUDWATCH_SERVICE_ACCOUNT,
    CLUSTER_NAME,
    DCGM_EXPORTER_RELEASE,
    DCGM_EXPORTER_RUNTIME_CLASS_RELEASE,
    KUBE_PROMETHEUS_STACK_RELEASE,
    MONITORING_NAMESPACE,
    alertmanager_sns_policy,
    alerts_key_policy,
    alerts_topic_arn_pattern,
    cloudwatch_addon_configuration,
    container_insights_alarms,
    dcgm_exporter_values,
    kube_prometheus_stack_values,
)
from components.planning.addons.selection import AddonSelection, AlertsTopic
from components.planning.gpu_runtime import runtime_class_plans
from components.planning.pools import PoolPlan


class Monitoring(pulumi.ComponentResource):
    def __init__(
        self,
        name: str,
        ctx: ClusterContext,
        alerts: Alerts,
        plans: Sequence[PoolPlan],
        selection: AddonSelection,
        runtime_class: k8s.node.v1.RuntimeClass | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpu-clusters:index:Monitoring", name, None, opts)
        self._ctx = ctx
        self._alerts = alerts
        self.topic_arn: pulumi.Output[str] | None = None
        self.topic_key: aws.kms.Key | None = None
        self.addon: aws.eks.Addon | None = None
        self.alarms: dict[str, aws.cloudwatch.MetricAlarm] = {}
        self.prometheus: k8s.helm.v3.Release | None = None
        self.dcgm_exporter: k8s.helm.v3.Release | None = None
        self.dcgm_exporter_runtime_class: k8s.helm.v3.Release | None = None
        self._runtime_class = runtime_class

        self._alerts_topic(selection.alerts_topic)
        if selection.container_insights:
            self._container_insights(plans)
        if selection.dcgm_prometheus:
            self._dcgm_prometheus(plans)
        self.register_outputs({"alertsTopicArn": self.topic_arn})

    # ------------------------------------------------------------------------------------------------ SNS topic
    def _alerts_topic(self, mode: AlertsTopic) -> None:
        ctx = self._ctx
        alerts = self._alerts
        child = pulumi.ResourceOptions(parent=self)
        cluster = ctx.cluster_name_plain
        if mode == "existing" and alerts.sns_topic_arn:
            self.topic_arn = pulumi.Output.from_input(alerts.sns_topic_arn)
        elif mode == "create":
            self.topic_key = aws.kms.Key(
                f"{cluster}-alerts",
                description=f"Encrypts the GPU alerts topic of cluster {cluster}",
                enable_key_rotation=True,
                deletion_window_in_days=30,
                policy=pulumi.Output.all(ctx.account_id, ctx.partition).apply(
                    lambda v: as_json(
                        alerts_key_policy(v[0], alerts_topic_arn_pattern(v[1], ctx.region, v[0], cluster), v[1])
                    )
                ),
                tags=dict(ctx.tags),
                opts=stateful_options(ctx.stateful["kms-key"], self),
            )
            topic = aws.sns.Topic(
                f"{cluster}-alerts", kms_master_key_id=self.topic_key.arn, tags=dict(ctx.tags), opts=child
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
    def _container_insights(self, plans: Sequence[PoolPlan]) -> None:
        ctx = self._ctx
        cluster = ctx.cluster_name_plain
        identity = service_account_role(
            ctx,
            "cloudwatch-agent",
            CLOUDWATCH_NAMESPACE,
            CLOUDWATCH_SERVICE_ACCOUNT,
            None,
            [CLOUDWATCH_AGENT_POLICY],
            self,
        )
        self.addon = aws.eks.Addon(
            f"{cluster}-{CLOUDWATCH_ADDON}",
            cluster_name=ctx.cluster_name,
            addon_name=CLOUDWATCH_ADDON,
            addon_version=addon_version(CLOUDWATCH_ADDON, ctx.kubernetes_version, ctx.managed_addon_pins),
            configuration_values=as_json(cloudwatch_addon_configuration(plans)),
            resolve_conflicts_on_create=RESOLVE_CONFLICTS,
            resolve_conflicts_on_update=RESOLVE_CONFLICTS,
            tags=dict(ctx.tags),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*ctx.kubernetes_ready, *identity]),
        )
        for alarm in container_insights_alarms(self._alerts):
            self.alarms[alarm.suffix] = metric_alarm(
                f"{cluster}-{alarm.suffix}",
                alarm,
                {CLUSTER_NAME: ctx.cluster_name},
                actions=self._actions,
                ok_actions=self._actions,
                tags=ctx.tags,
                opts=pulumi.ResourceOptions(parent=self, depends_on=[self.addon]),
            )

    # --------------------------------------------------------------------------------- DCGM + Prometheus stack
    def _dcgm_prometheus(self, plans: Sequence[PoolPlan]) -> None:
        ctx = self._ctx
        alerts = self._alerts
        depends: list[pulumi.Resource] = []
        if self.topic_arn is not None:
            key_arn = self.topic_key.arn if self.topic_key is not None else None
            policy = pulumi.Output.all(self.topic_arn, key_arn).apply(
                lambda v: as_json(alertmanager_sns_policy(v[0], v[1]))
            )
            depends = service_account_role(
                ctx,
                "alertmanager",
                MONITORING_NAMESPACE,
                ALERTMANAGER_SERVICE_ACCOUNT,
                policy,
                (),
                self,
            )
        values = (
            pulumi.Output.from_input(self.topic_arn).apply(
                lambda arn: kube_prometheus_stack_values(alerts, ctx.region, plans, arn)
            )
            if self.topic_arn is not None
            else kube_prometheus_stack_values(alerts, ctx.region, plans, None)
        )
        self.prometheus = helm_release(
            f"{ctx.cluster_name_plain}-{KUBE_PROMETHEUS_STACK_RELEASE}",
            KUBE_PROMETHEUS_STACK_RELEASE,
            versions.chart("kube-prometheus-stack"),
            MONITORING_NAMESPACE,
            values,
            ctx,
            parent=self,
            depends_on=depends,
            create_namespace=True,
        )
        dcgm = versions.chart("dcgm-exporter")
        self.dcgm_exporter = helm_release(
            f"{ctx.cluster_name_plain}-{DCGM_EXPORTER_RELEASE}",
            DCGM_EXPORTER_RELEASE,
            dcgm,
            MONITORING_NAMESPACE,
            dcgm_exporter_values(plans, dcgm.image_tag),
            ctx,
            parent=self,
            # The chart's ServiceMonitor needs the Prometheus Operator CRDs that kube-prometheus-stack installs.
            depends_on=[self.prometheus],
        )
        if self._runtime_class is not None and runtime_class_plans(plans):
            self.dcgm_exporter_runtime_class = helm_release(
                f"{ctx.cluster_name_plain}-{DCGM_EXPORTER_RUNTIME_CLASS_RELEASE}",
                DCGM_EXPORTER_RUNTIME_CLASS_RELEASE,
                dcgm,
                MONITORING_NAMESPACE,
                dcgm_exporter_values(plans, dcgm.image_tag, runtime_class=True),
                ctx,
                parent=self,
                depends_on=[self.prometheus, self._runtime_class],
            )
