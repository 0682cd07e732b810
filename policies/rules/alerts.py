"""Alert rules: an alarm the stack creates tells someone when it fires."""

from __future__ import annotations

from collections.abc import Iterator

from policies.resources import Resource, items
from policies.rules.signatures import Config

#: The CloudWatch alarm type the stack creates (GPU temperature, idle spend, GPU-utilization scaling).
METRIC_ALARM = "aws:cloudwatch/metricAlarm:MetricAlarm"


def alarms_notify_someone(alarm: Resource, config: Config) -> Iterator[str]:
    """Every CloudWatch alarm has an action: with no `addons.monitoring.alerts.email` or `snsTopicArn` the GPU alarms
    are created with no action at all, and their state changes show only in the console (CloudWatch PutMetricAlarm
    `AlarmActions`, https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_PutMetricAlarm.html).
    Advisory: a stack may watch its alarms some other way."""
    if not items(alarm.get("alarmActions", default=[])):
        yield (
            f"alarm '{alarm.name}' notifies nobody: set addons.monitoring.alerts.email or "
            "addons.monitoring.alerts.snsTopicArn"
        )
