"""The serving workloads' rule choice: the queue rule (KEDA on vLLM's requests in flight) by default, the
GPU-utilization rule by `autoscaling.rule` or the pool's `gpu-utilization` mode; each rule's settings refused under
the other; the PodMonitor that feeds the queue rule and the NetworkPolicy that lets its scrapes in."""

from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from blueprint import closed_loop as cl
from blueprint import simulation_docs
from blueprint.plan.runner import stack_file
from components.catalog import serving_capacity
from components.config import ServingAutoscaling
from components.errors import ConfigError
from components.planning.addons.monitoring import MONITORING_NAMESPACE, prometheus_url
from components.planning.network_policies import NAMESPACE_NAME_LABEL
from components.planning.serving import METRICS_PATH, METRICS_PORT, network_policy_spec, pod_monitor_spec
from components.planning.serving_policies import UNMEASURED_CONCURRENCY, in_flight_query, in_flight_target
from components.planning.stack_plan import plan_stack
from components.yaml_loader import dump_yaml, parse_yaml
from tests.builders import HYBRID_POOL, INFERENCE_POOL, SYSTEM_POOL, pool, stack_config, stack_run

SCALED_OBJECT = "kubernetes:keda.sh/v1alpha1:ScaledObject"
POD_MONITOR = "kubernetes:monitoring.coreos.com/v1:PodMonitor"
#: The l40s pool left to cluster-autoscaler, where a workload picks its own rule.
L40S = pool(INFERENCE_POOL, scaling={"min": 1, "max": 8})


def serving(workload: dict[str, Any], *pools: dict[str, Any]) -> Any:
    return stack_config(
        SYSTEM_POOL,
        *(pools or (L40S,)),
        validated=True,
        storage={"nfs": {"kind": "efs", "kubernetes": {"namespace": "inference", "claimName": "weights"}}},
        addons={"monitoring": {"containerInsights": False, "dcgmPrometheus": True}},
        workloads={"serving": [{"name": "chat", "pool": "l40s", "model": "m", **workload}]},
    )


def problems(workload: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(ConfigError) as raised:
        serving(workload)
    return {p.path: p.message for p in raised.value.problems}


# ------------------------------------------------------------------------------------------------ the choice
def test_the_default_rule_is_queue_with_the_unmeasured_target_off_the_catalog() -> None:
    plan = plan_stack(serving({}))
    rule = plan.queue_rules["chat"]
    assert rule.target_in_flight == in_flight_target(UNMEASURED_CONCURRENCY) == 35
    assert (rule.min_replicas, rule.max_replicas) == (1, 32)


def test_the_catalog_concurrency_sets_the_target_on_a_listed_model_and_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    workload = {"name": "chat", "pool": "a40", "model": "Qwen2.5-7B-Instruct"}
    spec = stack_config(
        SYSTEM_POOL,
        HYBRID_POOL,
        validated=True,
        storage={"nfs": {"kind": "existing", "server": "nfs.example", "share": "/models", "pools": ["a40"]}},
        addons={"monitoring": {"containerInsights": False, "dcgmPrometheus": True}},
        workloads={"serving": [workload]},
    )
    figure = serving_capacity.throughput("Qwen2.5-7B-Instruct", "A40")
    assert figure is not None
    monkeypatch.setattr(serving_capacity, "throughput", lambda *_: replace(figure, concurrency=64))
    assert plan_stack(spec).queue_rules["chat"].target_in_flight == pytest.approx(in_flight_target(64))


def test_a_given_target_and_bounds_are_the_rules() -> None:
    spec = serving({"autoscaling": {"targetInFlightPerReplica": 12}, "replicas": {"min": 2, "max": 6}})
    rule = plan_stack(spec).queue_rules["chat"]
    assert (rule.target_in_flight, rule.min_replicas, rule.max_replicas) == (12, 2, 6)


def test_the_seed_rule_stays_selectable_with_its_settings() -> None:
    spec = serving({"autoscaling": {"rule": "gpu-utilization", "scaleOutAbovePercent": 70}})
    plan = plan_stack(spec)
    assert "chat" not in plan.queue_rules
    assert plan.serving["chat"].scale_out_above_percent == 70


def test_a_gpu_utilization_pool_keeps_the_pool_rule() -> None:
    assert plan_stack(serving({}, INFERENCE_POOL)).queue_rules == {}


def test_settings_of_the_other_rule_are_refused_with_their_paths() -> None:
    found = problems({"autoscaling": {"scaleOutBy": 1, "cooldownSeconds": 60}})
    assert set(found) == {
        "workloads.serving[0].autoscaling.scaleOutBy",
        "workloads.serving[0].autoscaling.cooldownSeconds",
    }
    assert "rule: gpu-utilization" in found["workloads.serving[0].autoscaling.scaleOutBy"]
    found = problems({"autoscaling": {"rule": "gpu-utilization", "targetInFlightPerReplica": 10}})
    assert set(found) == {"workloads.serving[0].autoscaling.targetInFlightPerReplica"}
    assert "set rule: queue" in found["workloads.serving[0].autoscaling.targetInFlightPerReplica"]


@pytest.mark.parametrize(
    ("autoscaling", "path"),
    [
        ({"rule": "hpa"}, "workloads.serving[0].autoscaling.rule"),
        ({"targetInFlightPerReplica": 0}, "workloads.serving[0].autoscaling.targetInFlightPerReplica"),
    ],
)
def test_a_bad_rule_or_target_is_refused(autoscaling: dict[str, Any], path: str) -> None:
    assert path in problems({"autoscaling": autoscaling})


# ------------------------------------------------------------------------------------- what is registered
def _hybrid_with(change: dict[str, Any], tmp_path: Path) -> Any:
    config = copy.deepcopy(parse_yaml(stack_file("hybrid").read_text())["config"])
    config["gpu-clusters:workloads"]["serving"][0].update(change)
    path = tmp_path / "Pulumi.hybrid-rule.yaml"
    path.write_text(dump_yaml({"config": config}))
    return stack_run(config_file=path).run


@pytest.mark.program
def test_the_hybrid_stack_registers_the_queue_trigger_and_its_pod_monitor() -> None:
    run = stack_run("hybrid").run
    spec = run.one(SCALED_OBJECT, "hybrid-chat-scaler").inputs["spec"]
    (trigger,) = spec["triggers"]
    assert trigger["type"] == "prometheus"
    assert trigger["metricType"] == "AverageValue"
    assert trigger["metadata"] == {
        "serverAddress": prometheus_url(),
        "query": in_flight_query("inference", "chat"),
        "threshold": "35",
        "ignoreNullValues": "false",
    }
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (2, 16)
    assert "advanced" not in spec and "fallback" not in spec
    monitor = run.one(POD_MONITOR, "hybrid-chat-metrics").inputs
    assert monitor["metadata"]["namespace"] == "inference"
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert monitor["spec"]["podMetricsEndpoints"] == [{"port": "http", "path": METRICS_PATH}]
    assert monitor["spec"]["selector"]["matchLabels"] == {
        "app.kubernetes.io/name": "chat",
        "app.kubernetes.io/managed-by": "gpu-clusters",
    }


@pytest.mark.program
def test_choosing_the_seed_rule_registers_its_trigger(tmp_path: Path) -> None:
    run = _hybrid_with({"autoscaling": {"rule": "gpu-utilization"}}, tmp_path)
    spec = run.one(SCALED_OBJECT, "hybrid-chat-scaler").inputs["spec"]
    assert spec["triggers"][0]["metricType"] == "Value"
    assert "DCGM_FI_DEV_GPU_UTIL" in spec["triggers"][0]["metadata"]["query"]
    assert "behavior" in spec["advanced"]["horizontalPodAutoscalerConfig"]


def test_the_query_selects_the_pod_monitors_job_and_the_deployments_pods() -> None:
    query = in_flight_query("inference", "chat")
    selector = '{job="inference/chat",namespace="inference",pod=~"chat-[a-z0-9]+-[a-z0-9]+"}'
    assert query == f"sum(vllm:num_requests_running{selector}) + sum(vllm:num_requests_waiting{selector})"


# ------------------------------------------------------------------------------------------ network policy
@pytest.mark.parametrize("ec2_pods", [(), ("10.0.128.0/17",)])
def test_prometheus_reaches_the_metrics_port(ec2_pods: tuple[str, ...]) -> None:
    """From the monitoring namespace (EC2 pools), and by the EC2 pods' addresses where Cilium enforces (hybrid)."""
    workload = serving({}).workloads.serving[0]
    spec = network_policy_spec(workload, MONITORING_NAMESPACE, ec2_pods)
    (rule,) = spec["ingress"]
    assert {"protocol": "TCP", "port": METRICS_PORT} in rule["ports"]
    assert {"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: MONITORING_NAMESPACE}}} in rule["from"]
    assert all({"ipBlock": {"cidr": cidr}} in rule["from"] for cidr in ec2_pods)
    assert spec["podSelector"] == pod_monitor_spec(workload)["selector"]


def test_the_default_rule_is_the_one_the_comparison_found_best() -> None:
    """The shipped default is what docs/serving-simulation.md's comparison ranks first over the built-in traces."""
    results = cl.comparison(simulation_docs.model(), cl.TRACES)
    assert simulation_docs.verdict(results)[0].endswith(f"Best: **{ServingAutoscaling().rule}**.")
