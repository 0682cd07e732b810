"""Alarms go somewhere: with no topic or address the plan summary and `blueprint check` (an advisory policy) say that
the GPU alarms notify nobody; the shipped stacks show, commented, how to give them one."""

from __future__ import annotations

from typing import Any

import pytest

from blueprint.plan.runner import list_stacks, stack_file
from blueprint.plan.summary import ALARMS_NOTIFY_NOBODY, summarize
from components.planning.stack_plan import plan_stack
from tests.builders import SYSTEM_POOL, TRAINING_POOL, addon_stack, shipped_plan
from tests.policies import resource_args, validate

ALARM = "aws:cloudwatch/metricAlarm:MetricAlarm"
TOPIC = "arn:aws:sns:us-east-1:123456789012:gpu-oncall"


def summary(**alerts: Any) -> dict[str, Any]:
    spec = addon_stack(SYSTEM_POOL, TRAINING_POOL, addons={"monitoring": {"alerts": alerts}})
    return summarize(plan_stack(spec))


def test_the_summary_warns_when_alarms_have_no_destination() -> None:
    nowhere = summary()
    assert nowhere["alerts"] == {"alarms": True, "destination": None}
    assert nowhere["warnings"].count(ALARMS_NOTIFY_NOBODY) == 1
    assert summary(email="ops@example.com")["alerts"]["destination"] == "ops@example.com"
    assert ALARMS_NOTIFY_NOBODY not in summary(snsTopicArn=TOPIC)["warnings"]


def test_check_reports_an_alarm_without_actions_as_advisory() -> None:
    def messages(actions: list[str]) -> list[str]:
        return validate("alarms-notify-someone", resource_args(ALARM, {"alarmActions": actions}, name="gpu-idle"))

    assert messages([]) == [
        "alarm 'gpu-idle' notifies nobody: set addons.monitoring.alerts.email or addons.monitoring.alerts.snsTopicArn"
    ]
    assert messages([TOPIC]) == []


@pytest.mark.program
@pytest.mark.parametrize("stack", list_stacks())
def test_shipped_stacks_warn_and_show_how_to_set_a_destination(stack: str) -> None:
    plan = shipped_plan(stack)
    assert ALARMS_NOTIFY_NOBODY in plan["summary"]["warnings"]
    advisories = {v["policy"] for v in plan["violations"] if v["level"] == "advisory"}
    cloudwatch_alarms = [r for r in plan["resources"] if r["type"] == ALARM]
    # The policy judges CloudWatch alarms; the Prometheus path's rules are covered by the summary warning alone.
    assert ("alarms-notify-someone" in advisories) == bool(cloudwatch_alarms)
    text = stack_file(stack).read_text()
    assert "#     alerts: {email:" in text
