"""Node health detection as the stacks register it: the EKS node monitoring agent add-on on every stack with GPU pools
(pinned, its DCGM server tolerating the GPU pools and the health gate's startup taint), none without; the node
health rules and the health loop's PodMonitor on the Prometheus path."""

from __future__ import annotations

import json
from typing import Any

import pytest

from blueprint.verify.expectations import load_spec
from components.catalog import versions
from components.config import Taint
from components.managed_addons import NODE_AGENT_ADDONS, node_agent_addons
from components.planning.addons.node_monitoring import (
    AGENT_CONDITIONS,
    METRICS_PORT_NAME,
    NODE_MONITORING_AGENT,
    monitored_gpu_plans,
    node_monitoring_configuration,
)
from components.planning.node_health import (
    FAILED_TAINT_KEY,
    LOOP_POD_LABELS,
    NODE_HEALTH_NAMESPACE,
    STARTUP_TAINT_KEY,
)
from components.planning.stack_plan import plan_pools
from components.planning.tolerations import tolerates
from tests.builders import EKS_ADDON, HELM_RELEASE, SYSTEM, file_plan, shipped_stack, stack_config

POD_MONITOR = "kubernetes:monitoring.coreos.com/v1:PodMonitor"


def _agent(stack: str) -> dict[str, Any]:
    [addon] = [
        r.inputs for r in shipped_stack(stack).run.of_type(EKS_ADDON) if r.inputs["addonName"] == NODE_MONITORING_AGENT
    ]
    return addon


@pytest.mark.program
def test_every_shipped_stack_with_gpu_pools_gets_the_pinned_agent() -> None:
    for stack in ("training", "inference", "hybrid", "smoke"):
        addon = _agent(stack)
        assert (
            addon["addonVersion"]
            == versions.managed_addon_version(NODE_MONITORING_AGENT, "1.35")
            == "v1.7.2-eksbuild.1"
        )
        assert addon["resolveConflictsOnCreate"] == addon["resolveConflictsOnUpdate"] == "OVERWRITE"


@pytest.mark.program
def test_the_dcgm_server_tolerates_every_gpu_pool_taint_and_the_health_loop_taints() -> None:
    """Without its tolerations the DCGM server never starts on a tainted GPU node, and the agent then reports
    DCGMError (AcceleratedHardwareReady False) on every one of them."""
    for stack in ("training", "hybrid"):
        config = json.loads(_agent(stack)["configurationValues"])
        dcgm = config["dcgmAgent"]["tolerations"]
        plans = monitored_gpu_plans(plan_pools(load_spec(stack, None)))
        assert plans
        for plan in plans:
            assert all(tolerates(dcgm, taint) for taint in plan.taints), (stack, plan.name)
        for effect in ("NoSchedule", "NoExecute"):
            assert tolerates(dcgm, Taint(key=STARTUP_TAINT_KEY, value="", effect=effect))
            assert tolerates(dcgm, Taint(key=FAILED_TAINT_KEY, value="true", effect=effect))
        assert not tolerates(
            dcgm, Taint(key="CriticalAddonsOnly", value="true", effect="NoSchedule")
        )  # it has no business there
        # the agent itself runs on every node, whatever its taints
        assert config["nodeAgent"]["tolerations"] == [{"operator": "Exists"}]


def test_hybrid_pools_add_no_toleration_the_dcgm_server_would_use() -> None:
    """Its chart keeps it off hybrid nodes (compute-type affinity): only the cloud GPU pools' taints count."""
    pools = plan_pools(load_spec("hybrid", None))
    assert {p.name for p in monitored_gpu_plans(pools)} == {p.name for p in pools if p.is_gpu and p.kind == "aws"}
    assert [p for p in pools if p.kind == "hybrid"]


def test_a_stack_without_gpu_pools_gets_no_agent() -> None:
    plans = plan_pools(stack_config(SYSTEM))
    assert node_agent_addons(plans) == NODE_AGENT_ADDONS
    assert node_monitoring_configuration(plans)["dcgmAgent"]["tolerations"] == [
        {"key": STARTUP_TAINT_KEY, "operator": "Exists"},
        {"key": FAILED_TAINT_KEY, "operator": "Exists"},
    ]


@pytest.mark.program
def test_a_stack_pin_overrides_the_catalog_version(tmp_path) -> None:
    document = shipped_stack("smoke").files.config | {
        "gpu-clusters:addons": {"managed": {"pins": {NODE_MONITORING_AGENT: "v1.6.7-eksbuild.1"}}}
    }
    path = tmp_path / "Pulumi.pinned.yaml"
    path.write_text(json.dumps({"config": document}))
    addons = [r for r in file_plan(path)["resources"] if r["type"] == EKS_ADDON]
    [agent] = [r for r in addons if r["inputs"]["addonName"] == NODE_MONITORING_AGENT]
    assert agent["inputs"]["addonVersion"] == "v1.6.7-eksbuild.1"


@pytest.mark.program
def test_prometheus_stacks_ship_the_node_health_rules_and_scrape_the_health_loop() -> None:
    run = shipped_stack("inference").run
    [release] = [r.inputs for r in run.of_type(HELM_RELEASE) if r.inputs["name"] == "kube-prometheus-stack"]
    values = release["values"]
    rules = values["additionalPrometheusRulesMap"]["node-health"]["groups"][0]["rules"]
    conditions = " ".join(r["expr"] for r in rules if "kube_node_status_condition" in r["expr"])
    assert all(kind in conditions for kind in AGENT_CONDITIONS)
    # selected by the release label, like the serving PodMonitors (tenants' own need the label too)
    assert "podMonitorSelectorNilUsesHelmValues" not in values["prometheus"]["prometheusSpec"]
    monitor = run.one(POD_MONITOR, "serve-node-health-pod-monitor").inputs
    assert monitor["metadata"]["namespace"] == "monitoring"
    assert monitor["metadata"]["labels"] == {"release": "kube-prometheus-stack"}
    assert monitor["spec"] == {
        "selector": {"matchLabels": LOOP_POD_LABELS},
        "namespaceSelector": {"matchNames": [NODE_HEALTH_NAMESPACE]},
        "podMetricsEndpoints": [{"port": METRICS_PORT_NAME}],
    }


@pytest.mark.program
def test_container_insights_stacks_have_no_prometheus_rules_to_add_to() -> None:
    run = shipped_stack("smoke").run
    assert not [r for r in run.of_type(POD_MONITOR) if r.name.endswith("node-health-pod-monitor")]
    assert not [r for r in run.of_type(HELM_RELEASE) if r.inputs["name"] == "kube-prometheus-stack"]
