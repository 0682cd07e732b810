"""A planned CloudWatch metric alarm of the monitoring add-on (pure, no Pulumi).

`components.addons.alarms` turns a `MetricAlarmPlan` into an `aws.cloudwatch.MetricAlarm`, substituting the
placeholders its dimensions may hold (`monitoring.CLUSTER_NAME`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

#: One datapoint per minute: the alarm period and the agent's collection interval.
METRIC_PERIOD_SECONDS = 60


@dataclass(frozen=True)
class MetricAlarmPlan:
    """An `aws.cloudwatch.MetricAlarm` on one metric; `dimensions` may hold deploy-time placeholders."""

    suffix: str
    description: str
    namespace: str
    metric_name: str
    statistic: str
    comparison: str
    threshold: float
    period: int
    evaluation_periods: int
    dimensions: Mapping[str, str]
    treat_missing_data: str


@dataclass(frozen=True)
class QueryAlarmPlan:
    """An `aws.cloudwatch.MetricAlarm` on a Metrics Insights query (PutMetricAlarm `Metrics`: one query whose
    `Expression` is the query, with its `Period`, [CWMIALARM]); `query` may hold deploy-time placeholders."""

    suffix: str
    description: str
    query: str
    comparison: str
    threshold: float
    period: int
    evaluation_periods: int
    treat_missing_data: str
