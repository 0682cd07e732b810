"""Rules on the `addons` section: managed add-on pins, cluster-autoscaler, the device plugin, alerts."""

from __future__ import annotations

import re
from collections.abc import Iterator

from components.catalog import versions
from components.errors import Problem
from components.validation.parse import Parsed, shown, shown_text

#: SNS topic ARNs: `arn:<partition>:sns:<region>:<12-digit account>:<name of 1-256 letters, digits, - and _>`,
#: with `.fifo` for FIFO topics (SNS CreateTopic `Name`).
SNS_TOPIC_ARN = re.compile(r"^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,256}(\.fifo)?$")
EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")


def managed_addon_pins_are_known(p: Parsed) -> Iterator[Problem]:
    """Pins name EKS managed add-ons this stack installs, at or above their minimum version (versions.yaml, each
    minimum with its source)."""
    if p.addons is None:
        return
    known = sorted(versions.managed_addons())
    for name, version in p.addons.managed.pins.items():
        where = f"addons.managed.pins.{shown_text(name)}"
        if name not in known:
            yield Problem(where, f"unknown EKS add-on; known: {', '.join(known)}")
            continue
        minimum = versions.managed_addon(name).minimum_version
        if minimum and not versions.version_at_least(version, minimum):
            yield Problem(where, f"{version} is below the minimum {minimum} ({versions.managed_addon(name).source})")


def autoscaler_expander_works_here(p: Parsed) -> Iterator[Problem]:
    """The price expander works only on GCE, GKE and Equinix Metal (cluster-autoscaler FAQ); the priority expander
    needs a ConfigMap the stack does not manage."""
    if p.addons is None:
        return
    expander = p.addons.cluster_autoscaler.expander
    if expander == "price":
        yield Problem(
            "addons.clusterAutoscaler.expander",
            "the price expander works only on GCE, GKE and Equinix Metal (cluster-autoscaler FAQ); use least-waste",
        )
    elif expander == "priority":
        yield Problem(
            "addons.clusterAutoscaler.expander",
            "the priority expander needs a priorities ConfigMap this blueprint does not manage; use least-waste",
        )


def alert_targets_are_addresses(p: Parsed) -> Iterator[Problem]:
    """Alerts go to an email address and/or an SNS topic ARN of the documented shape (SNS CreateTopic)."""
    if p.addons is None:
        return
    alerts = p.addons.monitoring.alerts
    if alerts.email is not None and not EMAIL.fullmatch(alerts.email):
        yield Problem("addons.monitoring.alerts.email", f"{shown(alerts.email)} is not an email address")
    arn = alerts.sns_topic_arn
    if arn is not None and not SNS_TOPIC_ARN.match(arn):
        yield Problem(
            "addons.monitoring.alerts.snsTopicArn",
            f"{shown(arn)} is not an SNS topic ARN (arn:aws:sns:us-east-1:123456789012:alerts)",
        )


def alerts_have_a_metrics_path(p: Parsed) -> Iterator[Problem]:
    """Alert thresholds and destinations are read by the CloudWatch alarms (`containerInsights`) and the Prometheus
    rules (`dcgmPrometheus`); with both off, nothing raises an alert, so `alerts` would be ignored."""
    monitoring = p.addons.monitoring if p.addons else None
    if monitoring is None or monitoring.container_insights or monitoring.dcgm_prometheus:
        return
    if monitoring.alerts.model_fields_set:
        yield Problem(
            "addons.monitoring.alerts",
            "containerInsights and dcgmPrometheus are both off, so no alarm or rule reads it; turn one on or remove it",
        )


def switched_off_addons_take_no_settings(p: Parsed) -> Iterator[Problem]:
    """An add-on switched off reads none of its settings: cluster-autoscaler's expander and scale-down timings,
    the termination handler's drain timeout, the device plugin's MIG strategy."""
    if p.addons is None:
        return
    autoscaler, handler, plugin = (
        p.addons.cluster_autoscaler,
        p.addons.node_termination_handler,
        p.addons.nvidia_device_plugin,
    )
    sections = (
        ("clusterAutoscaler", autoscaler, "enabled: off" if autoscaler.enabled == "off" else None),
        ("nodeTerminationHandler", handler, "enabled: off" if handler.enabled == "off" else None),
        ("nvidiaDevicePlugin", plugin, None if plugin.enabled else "enabled: false"),
    )
    for key, section, off in sections:
        for field in sorted(section.model_fields_set - {"enabled"}) if off else ():
            alias = type(section).model_fields[field].alias or field
            yield Problem(f"addons.{key}.{alias}", f"the add-on is off ({off}), so nothing reads it; remove it")


RULES = (
    managed_addon_pins_are_known,
    autoscaler_expander_works_here,
    alert_targets_are_addresses,
    alerts_have_a_metrics_path,
    switched_off_addons_take_no_settings,
)
