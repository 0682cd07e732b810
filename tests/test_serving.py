"""The serving example and its autoscaler: the rule (one object for the ScaledObject and the simulation), the
simulation driven with the documented rule, the Kubernetes objects, KEDA, the shipped stacks and `blueprint
simulate`."""

from __future__ import annotations

import copy
import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from blueprint import simulate as sim
from blueprint.plan.runner import load_stack
from blueprint.plan.summary import summarize
from components.config import ServingWorkload, StackConfig
from components.planning.addons.keda import keda_values
from components.planning.addons.monitoring import dcgm_exporter_target, prometheus_url
from components.planning.serving import deployment_spec, disruption_budget_spec, service_spec
from components.planning.serving_autoscaling import (
    HOLD,
    SCALE_IN,
    ServingRule,
    Step,
    decide,
    deployment_pods,
    hpa_step,
    scaled_object,
    serving_rule,
    simulate,
)
from components.planning.stack_plan import plan_pools, plan_stack
from components.validation import validate_config
from tests.builders import (
    AUTOSCALING_GROUP,
    HELM_RELEASE,
    HYBRID_POOL,
    INFERENCE_POOL,
    SYSTEM_POOL,
    CliResult,
    pool,
    shipped_stack,
    stack_config,
)
from tests.plot_checks import SIGNATURES, assert_laid_out, built, shown_y_ticks

SCALED_OBJECT = "kubernetes:keda.sh/v1alpha1:ScaledObject"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
PDB = "kubernetes:policy/v1:PodDisruptionBudget"
SERVICE = "kubernetes:core/v1:Service"


def serving_stack(*pools: dict[str, Any], workload: dict[str, Any] | None = None) -> StackConfig:
    """A validated stack with a serving workload `chat` on the l40s pool (or as given), EFS and Prometheus."""
    return stack_config(
        SYSTEM_POOL,
        *(pools or (INFERENCE_POOL,)),
        validated=True,
        storage={"nfs": {"kind": "efs", "kubernetes": {"namespace": "inference", "claimName": "weights"}}},
        addons={"monitoring": {"containerInsights": False, "dcgmPrometheus": True}},
        workloads={"serving": [workload or {"name": "chat", "pool": "l40s", "model": "m"}]},
    )


def rule_of(spec: StackConfig) -> tuple[ServingWorkload, ServingRule]:
    workload = spec.workloads.serving[0]
    plan = next(p for p in plan_pools(spec) if p.name == workload.pool)
    return workload, serving_rule(workload, plan, dcgm_exporter_target(plan))


@pytest.fixture(scope="module")
def default_rule() -> ServingRule:
    """The documented default on g6e.12xlarge (4 GPUs), one GPU per replica, pool 1-8 nodes."""
    return rule_of(serving_stack())[1]


# ------------------------------------------------------------------------------------------------------ the rule
def test_default_rule_counts_steps_in_nodes_worth_of_replicas(default_rule: ServingRule) -> None:
    r = default_rule
    assert (r.scale_out_above_percent, r.scale_out_after_minutes, r.scale_out_replicas) == (85, 15, 8)
    assert (r.scale_in_below_percent, r.scale_in_after_minutes, r.scale_in_replicas) == (30, 30, 4)
    assert (r.cooldown_seconds, r.min_replicas, r.max_replicas, r.replicas_per_node) == (300, 1, 32, 4)


def test_the_pool_rule_and_replica_size_set_the_steps() -> None:
    custom = pool(
        INFERENCE_POOL,
        scaling={
            "min": 1,
            "max": 6,
            "mode": "gpu-utilization",
            "gpuUtilization": {"scaleOutBy": 1, "scaleInBy": 2, "cooldownSeconds": 600, "scaleOutAfterMinutes": 5},
        },
    )
    _, rule = rule_of(
        serving_stack(custom, workload={"name": "chat", "pool": "l40s", "model": "m", "gpusPerReplica": 2})
    )
    assert (rule.replicas_per_node, rule.scale_out_replicas, rule.scale_in_replicas) == (2, 2, 4)
    assert (rule.cooldown_seconds, rule.scale_out_after_minutes, rule.max_replicas) == (600, 5, 12)


def test_a_hybrid_workload_takes_its_own_rule_and_the_servers_as_bounds() -> None:
    workload = {
        "name": "chat",
        "pool": "a40",
        "model": "m",
        "autoscaling": {"rule": "gpu-utilization", "scaleOutAbovePercent": 70},
    }
    spec = stack_config(
        SYSTEM_POOL,
        HYBRID_POOL,
        validated=True,
        storage={"nfs": {"kind": "existing", "server": "nfs.example", "share": "/models", "pools": ["a40"]}},
        addons={"monitoring": {"containerInsights": False, "dcgmPrometheus": True}},
        workloads={"serving": [workload]},
    )
    _, rule = rule_of(spec)
    assert (rule.scale_out_above_percent, rule.max_replicas, rule.min_nodes, rule.max_nodes) == (70, 8, 2, 2)


def _mig_serving_spec() -> StackConfig:
    mig_pool = {
        "name": "h100",
        "role": "inference",
        "instanceType": "p5.48xlarge",
        "scaling": {"min": 1, "max": 2, "mode": "fixed"},
        "devicePlugin": {"migDevices": {"1g.10gb": 7}},
    }
    return stack_config(
        SYSTEM_POOL,
        mig_pool,
        validated=True,
        storage={"nfs": {"kind": "efs", "kubernetes": {"namespace": "inference", "claimName": "weights"}}},
        addons={
            "nvidiaDevicePlugin": {"migStrategy": "single"},
            "monitoring": {"containerInsights": False, "dcgmPrometheus": True},
        },
        workloads={"serving": [{"name": "chat", "pool": "h100", "model": "m"}]},
    )


def test_a_single_strategy_mig_pool_holds_one_replica_per_mig_device() -> None:
    """Under `single` each MIG device is one `nvidia.com/gpu`: a p5 split 7 x 1g.10gb per GPU holds 56 replicas."""
    _, rule = rule_of(_mig_serving_spec())
    assert (rule.replicas_per_node, rule.scale_out_replicas, rule.scale_in_replicas) == (56, 112, 56)


def test_serving_on_mig_devices_scales_on_graphics_engine_activity() -> None:
    """The exporter reports no DCGM_FI_DEV_GPU_UTIL for MIG devices, so that query would never scale: on a MIG pool
    the rule reads DCGM_FI_PROF_GR_ENGINE_ACTIVE x 100, parenthesised so each window covers the whole expression."""
    _, rule = rule_of(_mig_serving_spec())
    assert rule.mig_devices
    query = scaled_object(rule, "inference", "chat", "http://p")["triggers"][0]["metadata"]["query"]
    assert "DCGM_FI_DEV_GPU_UTIL" not in query
    exporter = 'job="dcgm-exporter",namespace="monitoring"'
    pods = f'{{{exporter},exported_namespace="inference",exported_pod=~"{deployment_pods("chat")}"}}'
    utilization = f"(avg(avg_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE{pods}[60s])) * 100)"
    assert f"avg_over_time({utilization}[15m:1m]) > bool 85" in query
    assert f"avg_over_time({utilization}[30m:1m]) < bool 30" in query


def test_serving_on_whole_gpus_scales_on_gpu_utilization(default_rule: ServingRule) -> None:
    assert not default_rule.mig_devices
    query = scaled_object(default_rule, "inference", "chat", "http://p")["triggers"][0]["metadata"]["query"]
    assert "avg_over_time(avg(avg_over_time(DCGM_FI_DEV_GPU_UTIL{" in query and "GR_ENGINE" not in query


# --------------------------------------------------------------------------------------------------- simulation
def test_scale_out_after_15_minutes_above_85_percent(default_rule: ServingRule) -> None:
    steps = simulate(default_rule, [90.0] * 15, start_replicas=4)
    assert [s.replicas for s in steps[:14]] == [4] * 14  # 14 minutes are not enough
    assert (steps[14].action, steps[14].replicas, steps[14].nodes) == ("scale-out", 12, 3)  # +2 nodes' worth


def test_a_minute_without_data_restarts_the_window(default_rule: ServingRule) -> None:
    steps = simulate(default_rule, [90.0] * 10 + [None] + [90.0] * 14, start_replicas=4)
    assert {s.replicas for s in steps} == {4}


def test_the_window_is_judged_on_its_average(default_rule: ServingRule) -> None:
    """One noisy minute (50%) among 90% ones leaves the window's average at 87.3%: it still scales out; two such
    minutes (84.7%) do not."""
    one = simulate(default_rule, [90.0] * 10 + [50.0] + [90.0] * 4, start_replicas=4)
    assert one[-1].action == "scale-out"
    two = simulate(default_rule, [90.0] * 9 + [50.0] * 2 + [90.0] * 4, start_replicas=4)
    assert {s.replicas for s in two} == {4}


def test_scale_in_after_30_minutes_below_30_percent_removes_one_node(default_rule: ServingRule) -> None:
    steps = simulate(default_rule, [10.0] * 30, start_replicas=12)
    assert [s.replicas for s in steps[:29]] == [12] * 29
    assert (steps[29].action, steps[29].replicas) == ("scale-in", 8)


def test_nodes_leave_after_the_autoscaler_unneeded_time(default_rule: ServingRule) -> None:
    steps = simulate(default_rule, [10.0] * 45, start_replicas=12, scale_down_unneeded_minutes=10)
    assert steps[29].nodes == 3 and steps[38].nodes == 3 and steps[39].nodes == 2


def test_each_step_needs_a_full_window_at_the_new_count(default_rule: ServingRule) -> None:
    """Sustained load: steps 15 minutes apart (the window restarts with the count), never sooner than the cooldown."""
    steps = simulate(default_rule, [95.0] * 60, start_replicas=4)
    assert [s.minute for s in steps if s.action == "scale-out"] == [14, 29, 44, 59]


def test_the_cooldown_spaces_steps_when_it_is_longer_than_the_window() -> None:
    custom = pool(
        INFERENCE_POOL,
        scaling={
            "min": 1,
            "max": 8,
            "mode": "gpu-utilization",
            "gpuUtilization": {"scaleOutAfterMinutes": 1, "scaleOutBy": 1, "cooldownSeconds": 600},
        },
    )
    _, rule = rule_of(serving_stack(custom))
    steps = simulate(rule, [95.0] * 30, start_replicas=1)
    assert [s.minute for s in steps if s.action == "scale-out"] == [0, 10, 20]


def test_bounds_hold(default_rule: ServingRule) -> None:
    high = simulate(default_rule, [99.0] * 300, start_replicas=4)
    assert max(s.replicas for s in high) == default_rule.max_replicas == 32
    assert max(s.nodes for s in high) == default_rule.max_nodes == 8
    low = simulate(default_rule, [1.0] * 600, start_replicas=32)
    assert low[-1].replicas == default_rule.min_replicas == 1
    assert min(s.nodes for s in low) == default_rule.min_nodes == 1


def test_a_short_spike_and_the_band_between_thresholds_hold(default_rule: ServingRule) -> None:
    steps = simulate(default_rule, [50.0] * 60 + [99.0] * 10 + [50.0] * 60, start_replicas=8)
    assert {s.action for s in steps} == {"hold"}


def test_hpa_step_follows_the_query_value_and_the_policies(default_rule: ServingRule) -> None:
    r = default_rule
    assert hpa_step(r, HOLD, 8, [], 0) == 8
    assert hpa_step(r, r.scale_out_value, 8, [], 0) == 16
    assert hpa_step(r, r.scale_out_value, 16, [(0, 8)], 299) == 16  # within the cooldown
    assert hpa_step(r, r.scale_out_value, 16, [(0, 8)], 300) == 24
    assert hpa_step(r, SCALE_IN, 8, [], 0) == 4
    assert hpa_step(r, SCALE_IN, 2, [], 0) == 1  # min replicas


def test_decide_reads_no_data_as_hold(default_rule: ServingRule) -> None:
    assert decide(default_rule, [None] * 60) == HOLD
    assert decide(default_rule, [99.0] * 20, steady=10) == HOLD  # the count changed 10 minutes ago


# ------------------------------------------------------------------------------------------- in-cluster objects
def test_scaled_object_is_the_rule(default_rule: ServingRule) -> None:
    spec = scaled_object(default_rule, "inference", "chat", prometheus_url())
    assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "chat"}
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (1, 32)
    assert "fallback" not in spec  # an unreachable Prometheus holds the count
    (trigger,) = spec["triggers"]
    assert (trigger["type"], trigger["metricType"]) == ("prometheus", "Value")
    meta = trigger["metadata"]
    assert (meta["threshold"], meta["ignoreNullValues"]) == ("1", "false")
    assert meta["serverAddress"] == "http://kube-prometheus-stack-prometheus.monitoring.svc:9090"
    query = meta["query"]
    assert query.startswith("1 + 33 * (")
    selector = 'job="dcgm-exporter",namespace="monitoring",exported_namespace="inference"'
    assert f'DCGM_FI_DEV_GPU_UTIL{{{selector},exported_pod=~"{deployment_pods("chat")}"}}' in query
    assert "[60s]))[15m:1m]) > bool 85)" in query and "[60s]))[30m:1m]) < bool 30)" in query
    assert (
        'max(changes(kube_deployment_spec_replicas{job="kube-state-metrics",namespace="inference",deployment="chat"}'
        "[15m])) == bool 0" in query
    )
    assert query.count("or vector(0)") == 2
    behavior = spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    assert behavior["scaleUp"] == {
        "stabilizationWindowSeconds": 0,
        "selectPolicy": "Max",
        "policies": [{"type": "Pods", "value": 8, "periodSeconds": 300}],
    }
    assert behavior["scaleDown"]["policies"] == [{"type": "Pods", "value": 4, "periodSeconds": 300}]


def test_deployment_requests_whole_gpus_on_its_pool_and_drains_gracefully() -> None:
    spec = serving_stack(
        workload={"name": "chat", "pool": "l40s", "model": "org/m", "gpusPerReplica": 2, "drainSeconds": 20}
    )
    workload = spec.workloads.serving[0]
    plan = next(p for p in plan_pools(spec) if p.name == "l40s")
    deployment = deployment_spec(workload, plan, "weights")
    assert "replicas" not in deployment  # the HPA owns the count
    assert deployment["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}
    pod = deployment["template"]["spec"]
    (container,) = pod["containers"]
    assert container["resources"] == {
        "requests": {"nvidia.com/gpu": "2", "cpu": "12", "memory": "96Gi"},
        "limits": {"nvidia.com/gpu": "2"},
    }
    assert pod["nodeSelector"] == {"gpu-clusters/pool": "l40s"}
    assert pod["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
    ]
    assert container["readinessProbe"]["httpGet"] == {"path": "/health", "port": "http"}
    assert container["startupProbe"]["failureThreshold"] * container["startupProbe"]["periodSeconds"] >= 1200
    assert container["lifecycle"] == {"preStop": {"sleep": {"seconds": 20}}}
    assert pod["terminationGracePeriodSeconds"] == 180
    assert container["args"][:3] == ["/models/org/m", "--served-model-name", "m"]
    assert container["args"][container["args"].index("--tensor-parallel-size") + 1] == "2"
    assert {"name": "models", "mountPath": "/models", "readOnly": True} in container["volumeMounts"]
    assert {"name": "models", "persistentVolumeClaim": {"claimName": "weights", "readOnly": True}} in pod["volumes"]
    assert "runtimeClassName" not in pod
    assert disruption_budget_spec(workload)["maxUnavailable"] == 1
    assert service_spec(workload)["ports"] == [{"name": "http", "port": 8000, "targetPort": "http"}]


def test_a_runtime_class_hybrid_pool_gets_the_nvidia_runtime_class() -> None:
    a40 = pool(HYBRID_POOL, gpuRuntime="runtime-class")
    spec = stack_config(SYSTEM_POOL, a40, workloads={"serving": [{"name": "chat", "pool": "a40", "model": "m"}]})
    plan = next(p for p in plan_pools(spec) if p.name == "a40")
    pod = deployment_spec(spec.workloads.serving[0], plan, "weights")["template"]["spec"]
    assert pod["runtimeClassName"] == "nvidia"


def test_keda_runs_on_the_system_pool() -> None:
    values = keda_values(plan_pools(serving_stack()))
    assert values["nodeSelector"] == {"gpu-clusters/role": "system"}
    assert {"key": "CriticalAddonsOnly", "operator": "Exists"} in values["tolerations"]


def test_keda_reads_secrets_only_in_its_own_namespace() -> None:
    permissions = keda_values(plan_pools(serving_stack()))["permissions"]
    assert permissions["operator"]["restrict"]["secret"] is True
    assert permissions["metricServer"]["restrict"]["secret"] is True


# ----------------------------------------------------------------------------------------------- shipped stacks
@pytest.mark.program
@pytest.mark.parametrize(
    ("stack", "prefix", "pool_name", "claim"),
    [("inference", "serve", "l40s", "model-weights"), ("hybrid", "hybrid", "a40", "model-weights")],
)
def test_shipped_stacks_serve_with_the_autoscaler_wired(stack: str, prefix: str, pool_name: str, claim: str) -> None:
    run = shipped_stack(stack).run
    deployment = run.one(DEPLOYMENT, f"{prefix}-chat").inputs
    pod = deployment["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"gpu-clusters/pool": pool_name}
    assert pod["volumes"][0]["persistentVolumeClaim"] == {"claimName": claim, "readOnly": True}
    assert deployment["metadata"]["namespace"] == "inference"
    scaler = run.one(SCALED_OBJECT, f"{prefix}-chat-scaler")
    assert scaler.inputs["spec"]["scaleTargetRef"]["name"] == "chat"
    assert scaler.inputs["spec"]["minReplicaCount"] == 2
    assert run.one(PDB, f"{prefix}-chat").inputs["spec"]["maxUnavailable"] == 1
    assert run.one(SERVICE, f"{prefix}-chat").inputs["spec"]["type"] == "ClusterIP"
    releases = {r.inputs["name"]: r.inputs for r in run.of_type(HELM_RELEASE)}
    assert {"keda", "kube-prometheus-stack", "dcgm-exporter"} <= set(releases)
    assert releases["keda"]["values"]["nodeSelector"] == {"gpu-clusters/role": "system"}


@pytest.mark.program
def test_the_inference_pool_follows_its_replicas_through_the_autoscaler() -> None:
    run = shipped_stack("inference").run
    (asg,) = [r for r in run.of_type(AUTOSCALING_GROUP) if "l40s" in r.name]
    keys = {t["key"] for t in asg.inputs["tags"]}
    assert {"k8s.io/cluster-autoscaler/enabled", "k8s.io/cluster-autoscaler/serve"} <= keys
    assert "cluster-autoscaler" in {r.inputs["name"] for r in run.of_type(HELM_RELEASE)}


# ------------------------------------------------------------------------------------------- blueprint simulate
def test_simulate_prints_the_timeline_and_writes_a_plot(
    blueprint_cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    series = tmp_path / "u.csv"
    series.write_text("minute,utilization\n" + "".join(f"{m},90\n" for m in range(20)))
    image = tmp_path / "out.png"
    result = blueprint_cli("simulate", "--stack", "inference", "--series", str(series), "--plot", str(image))
    assert result.returncode == 0, result.stderr
    assert "+8 replicas after 15 min above 85%" in result.stdout
    assert "scale-out" in result.stdout
    assert image.read_bytes().startswith(SIGNATURES["png"])


def test_the_replay_plot_fits_four_digit_counts(default_rule: ServingRule, monkeypatch: pytest.MonkeyPatch) -> None:
    """Replica counts of four digits, the widest the replay's margins (`blueprint.simulate.MARGINS`) are sized for."""
    steps = [Step(m, None if m < 2 else 90.0, "hold", 2 if m < 10 else 1200, 1 if m < 10 else 300) for m in range(20)]
    figure = built(monkeypatch, sim, lambda: sim.plot(steps, default_rule, "inference/chat", io.BytesIO(), "png"))
    assert max(len(tick) for tick in shown_y_ticks(figure.axes[1])) == 4
    assert_laid_out(figure)


def test_simulate_refuses_a_bad_series_and_a_stack_without_workloads(
    blueprint_cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    series = tmp_path / "u.csv"
    series.write_text("utilization\n50\nbusy\n")
    bad = blueprint_cli("simulate", "--stack", "inference", "--series", str(series))
    assert bad.returncode == 2 and "'busy' is not a percentage" in bad.stderr
    none = blueprint_cli("simulate", "--stack", "training")
    assert none.returncode == 2 and "no serving workload" in none.stderr


def test_pulumi_up_reads_the_workloads_key() -> None:
    """Under `pulumi up` the program gets the whole stack config as JSON text; `gpu-clusters:workloads` is read, not
    refused as an unknown key."""
    import json

    from blueprint.plan.runner import as_pulumi_config, load_stack
    from components.validation import validate_config

    files = load_stack("inference")
    config = as_pulumi_config(files.config)
    assert json.loads(config["gpu-clusters:workloads"])["serving"][0]["name"] == "chat"
    spec = validate_config(config, files.project)
    assert [w.name for w in spec.workloads.serving] == ["chat"]


def inference_on_the_gpu_utilization_rule() -> StackConfig:
    """The inference stack with its pool in `mode: gpu-utilization` (the seed rule)."""
    files = load_stack("inference")
    config = copy.deepcopy(files.config)
    (l40s,) = [p for p in config["gpu-clusters:nodePools"] if p["name"] == "l40s"]
    l40s["scaling"]["mode"] = "gpu-utilization"
    return validate_config(config, files.project)


@pytest.mark.program
def test_the_plan_summary_shows_the_rule_the_scaler_applies() -> None:
    from tests.builders import shipped_plan
    from tests.promql_expressions import plan_resources

    (chat,) = shipped_plan("inference")["summary"]["serving"]
    (scaler,) = [r for r in plan_resources("inference") if r["type"] == "kubernetes:keda.sh/v1alpha1:ScaledObject"]
    (trigger,) = scaler["inputs"]["spec"]["triggers"]
    assert chat["rule"] == "queue" and "scaleOut" not in chat
    assert float(trigger["metadata"]["threshold"]) == chat["targetInFlightPerReplica"]
    bounds = (scaler["inputs"]["spec"]["minReplicaCount"], scaler["inputs"]["spec"]["maxReplicaCount"])
    assert (chat["replicas"]["min"], chat["replicas"]["max"]) == bounds
    assert chat["endpoint"] == "http://chat.inference.svc:8000/v1"
    (seed,) = summarize(plan_stack(inference_on_the_gpu_utilization_rule()))["serving"]
    assert seed["rule"] == "gpu-utilization"
    assert seed["scaleOut"] == {"abovePercent": 85, "afterMinutes": 15, "replicas": 8}
    assert seed["scaleIn"] == {"belowPercent": 30, "afterMinutes": 30, "replicas": 4}
    assert shipped_plan("training")["summary"]["serving"] == []


def test_image_name_and_extra_args_take_effect() -> None:
    workload = {
        "name": "chat",
        "pool": "l40s",
        "model": "org/m",
        "image": "registry.example/vllm:1.2.3",
        "servedModelName": "assistant",
        "extraArgs": ["--max-model-len", "8192"],
        "startupSeconds": 600,
    }
    spec = serving_stack(workload=workload)
    plan = next(p for p in plan_pools(spec) if p.name == "l40s")
    (container,) = deployment_spec(spec.workloads.serving[0], plan, "weights")["template"]["spec"]["containers"]
    assert container["image"] == "registry.example/vllm:1.2.3"
    assert container["args"][1:3] == ["--served-model-name", "assistant"]
    assert container["args"][-2:] == ["--max-model-len", "8192"]
    assert container["startupProbe"]["failureThreshold"] == 60
    default = deployment_spec(serving_stack().workloads.serving[0], plan, "weights")["template"]["spec"]
    assert default["containers"][0]["image"] == (
        "vllm/vllm-openai:v0.31.0@sha256:c1c9f6fd5c109ba7f0546a59f5b2f15fb87f64c77782e90a27b648b42a8e67c3"
    )
