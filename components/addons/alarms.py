"""One way to turn a planned CloudWatch alarm (`MetricAlarmPlan`, `QueryAlarmPlan`) into a resource.

Plans name their dimensions (and queries) with placeholders (`planning.addons.monitoring.CLUSTER_NAME`) because the real
values are outputs known only at deploy time; this module substitutes them and registers the alarm.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_aws as aws

from components.planning.addons.alarms import MetricAlarmPlan, QueryAlarmPlan


def resolved_dimensions(
    dimensions: Mapping[str, str], placeholders: Mapping[str, pulumi.Input[str]]
) -> pulumi.Output[dict[str, str]]:
    """The dimensions with every placeholder value replaced by its (output) value."""
    keys = list(placeholders)
    return pulumi.Output.all(*(placeholders[k] for k in keys)).apply(
        lambda values: {name: dict(zip(keys, values, strict=True)).get(v, v) for name, v in dimensions.items()}
    )


def metric_alarm(
    name: str,
    alarm: MetricAlarmPlan | QueryAlarmPlan,
    placeholders: Mapping[str, pulumi.Input[str]],
    actions: Sequence[pulumi.Input[str]],
    tags: Mapping[str, str],
    opts: pulumi.ResourceOptions,
    ok_actions: Sequence[pulumi.Input[str]] | None = None,
) -> aws.cloudwatch.MetricAlarm:
    """The alarm a plan describes, on one metric or on a Metrics Insights query (`_what_it_reads`)."""
    return aws.cloudwatch.MetricAlarm(
        name,
        alarm_description=alarm.description,
        comparison_operator=alarm.comparison,
        threshold=alarm.threshold,
        evaluation_periods=alarm.evaluation_periods,
        treat_missing_data=alarm.treat_missing_data,
        alarm_actions=list(actions),
        ok_actions=list(ok_actions) if ok_actions is not None else None,
        tags=dict(tags),
        opts=opts,
        **_what_it_reads(alarm, placeholders),
    )


def _what_it_reads(
    alarm: MetricAlarmPlan | QueryAlarmPlan, placeholders: Mapping[str, pulumi.Input[str]]
) -> dict[str, Any]:
    """A query alarm: `metric_queries` with one query, its `expression` the query and its `period` the alarm's, and
    no metric name, statistic or dimensions (PutMetricAlarm takes `Metrics` or those, not both, [CWMIALARM]). A
    metric alarm: its metric, statistic, period and dimensions."""
    if isinstance(alarm, QueryAlarmPlan):
        query = aws.cloudwatch.MetricAlarmMetricQueryArgs(
            id="q1", expression=resolved_query(alarm.query, placeholders), period=alarm.period, return_data=True
        )
        return {"metric_queries": [query]}
    return {
        "namespace": alarm.namespace,
        "metric_name": alarm.metric_name,
        "dimensions": resolved_dimensions(alarm.dimensions, placeholders),
        "statistic": alarm.statistic,
        "period": alarm.period,
    }


def resolved_query(query: str, placeholders: Mapping[str, pulumi.Input[str]]) -> pulumi.Output[str]:
    """The query with every placeholder replaced by its (output) value."""
    keys = list(placeholders)

    def substitute(values: list[str]) -> str:
        text = query
        for key, value in zip(keys, values, strict=True):
            text = text.replace(key, value)
        return text

    return pulumi.Output.all(*(placeholders[k] for k in keys)).apply(substitute)
