"""The health loop alone on the fake Kubernetes API (tests/fake_kube.py), its hand-off to repair recorded: an idle
node is checked again; a hung or unschedulable check ends; a restarted loop resumes the checks under way; concurrency
is capped; the startup taint is settled without writing over another controller's taints. A gate that passes and one
that fails, with the real repair path behind the loop, are in tests/test_node_health_scenarios.py."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from http.server import ThreadingHTTPServer
from typing import Any

from components.planning import node_health as planned
from programs.node_health import names
from programs.node_health.checks import HealthLoop, Settings, format_time, parse_time
from programs.node_health.metrics import Metrics
from tests.fake_kube import FakeKube

T0 = parse_time("2026-11-27T04:00:00Z") or 0.0
TAINT = {"key": names.STARTUP_TAINT_KEY, "value": "true", "effect": "NoSchedule"}
FAILED_TAINT = {"key": names.FAILED_TAINT_KEY, "value": "true", "effect": "NoSchedule"}
#: What cluster-autoscaler adds to a node it is about to delete (utils/taints ToBeDeletedTaint).
TO_BE_DELETED = {"key": "ToBeDeletedByClusterAutoscaler", "value": "1700000000", "effect": "NoSchedule"}
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
TEMPLATE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"labels": {"app.kubernetes.io/managed-by": "node-health"}},
    "spec": {"restartPolicy": "Never", "containers": [{"name": "check", "image": "dcgm"}]},
}


def settings(**overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "templates": {"h100": TEMPLATE},
        "idle_check_seconds": 3600.0,
        "max_concurrent_checks": 2,
        "check_timeout_seconds": 900.0,
        "schedule_timeout_seconds": 300.0,
    }
    values.update(overrides)
    return Settings(**values)


class Repair:
    def __init__(self) -> None:
        self.handed: list[tuple[str, str, float]] = []

    def __call__(self, api: Any, node: dict[str, Any], reason: str, now: float) -> None:
        self.handed.append((node["metadata"]["name"], reason, now))


def loop(api: FakeKube, repair: Repair, **overrides: Any) -> HealthLoop:
    return HealthLoop(api, settings(**overrides), repair, Metrics())


def at(api: FakeKube, seconds: float) -> float:
    api.now = format_time(T0 + seconds)
    return T0 + seconds


def state(api: FakeKube, node: str) -> str | None:
    return api.nodes[node]["metadata"]["labels"].get(names.HEALTH_STATE_LABEL)


def test_the_program_names_are_the_planned_ones() -> None:
    for name in ("STARTUP_TAINT_KEY", "HEALTH_STATE_LABEL", "NODE_HEALTH_NAMESPACE", "METRIC_PREFIX", "CHECKS_METRIC"):
        assert getattr(names, name) == getattr(planned, name), name
    for name in ("CHECKS_RUNNING_METRIC", "NODES_METRIC", "LAST_PASS_METRIC", "POOL_LABEL", "REPAIRS_METRIC"):
        assert getattr(names, name) == getattr(planned, name), name
    for name in ("FAILED_TAINT_KEY",):
        assert getattr(names, name) == getattr(planned, name), name


def test_a_check_that_hangs_times_out_and_fails_the_node() -> None:
    api, repair = FakeKube(), Repair()
    api.add_node("n1", "h100", [TAINT])
    health = loop(api, repair)
    health.run_once(at(api, 0))
    [pod] = api.check_pods()
    api.bind(pod, format_time(T0 + 5))
    health.run_once(at(api, 800))
    assert len(api.check_pods()) == 1 and repair.handed == []
    health.run_once(at(api, 906))
    assert api.check_pods() == []
    assert repair.handed == [("n1", "check timed out after 900s", T0 + 906)]
    assert state(api, "n1") == names.FAILED


def test_a_gate_check_that_cannot_schedule_fails_the_node() -> None:
    api, repair = FakeKube(), Repair()
    api.add_node("n1", "h100", [TAINT])
    health = loop(api, repair)
    health.run_once(at(api, 0))
    [pod] = api.check_pods()
    api.unschedulable(pod, "0/3 nodes are available: 1 Insufficient nvidia.com/gpu")
    health.run_once(at(api, 299))
    assert repair.handed == []
    health.run_once(at(api, 301))
    [(node, reason, _)] = repair.handed
    assert node == "n1" and "not scheduled after 300s" in reason and "Insufficient nvidia.com/gpu" in reason


def test_a_restarted_loop_resumes_the_check_under_way() -> None:
    api, repair = FakeKube(), Repair()
    api.add_node("n1", "h100", [TAINT])
    loop(api, repair).run_once(at(api, 0))
    [pod] = api.check_pods()
    api.bind(pod, format_time(T0 + 10))
    restarted = loop(api, repair)  # a new process: nothing in memory
    restarted.run_once(at(api, 30))
    assert [p["metadata"]["name"] for p in api.check_pods()] == [pod["metadata"]["name"]]  # no second check
    api.end(api.check_pods()[0], 0, "{}")
    restarted.run_once(at(api, 60))
    assert state(api, "n1") == names.PASSED and api.nodes["n1"]["spec"]["taints"] == []


def test_an_idle_node_is_checked_again_and_a_busy_one_is_not() -> None:
    api, repair = FakeKube(), Repair()
    api.add_node("idle", "h100", labels={names.HEALTH_STATE_LABEL: names.PASSED})
    api.add_node("busy", "h100", labels={names.HEALTH_STATE_LABEL: names.PASSED})
    api.add_pod("team-a", "trainer", "busy", gpus=8)
    health = loop(api, repair)
    health.run_once(at(api, 1800))  # idle for half the interval
    assert api.check_pods() == []
    health.run_once(at(api, 3600))
    [pod] = api.check_pods()
    assert pod["metadata"]["labels"][names.CHECK_KIND_LABEL] == "idle"
    assert pod["metadata"]["annotations"][names.CHECK_NODE_ANNOTATION] == "idle"
    api.bind(pod, format_time(T0 + 3610))
    api.end(pod, 1, json.dumps({"result": "failed", "step": "dcgm", "detail": "level 1: Memory fail"}))
    health.run_once(at(api, 3700))
    assert repair.handed == [("idle", "dcgm: level 1: Memory fail", T0 + 3700)]
    assert api.nodes["idle"]["spec"]["unschedulable"] is True
    assert health.metrics.value(names.CHECKS_METRIC, {"pool": "h100", "kind": "idle", "result": "failed"}) == 1
    assert (
        state(api, "busy") == names.PASSED and names.BUSY_AT_ANNOTATION in api.nodes["busy"]["metadata"]["annotations"]
    )


def test_an_idle_check_that_loses_the_gpus_to_work_is_cancelled_not_failed() -> None:
    api, repair = FakeKube(), Repair()
    api.add_node("n1", "h100", labels={names.HEALTH_STATE_LABEL: names.PASSED})
    health = loop(api, repair)
    health.run_once(at(api, 3600))
    [pod] = api.check_pods()
    api.unschedulable(pod, "Insufficient nvidia.com/gpu")
    health.run_once(at(api, 3600 + 301))
    assert repair.handed == [] and api.check_pods() == []
    assert state(api, "n1") == names.PASSED
    health.run_once(at(api, 3600 + 400))  # counted as busy just now: not checked again at once
    assert api.check_pods() == []


def test_checks_run_at_most_n_at_once_new_nodes_first() -> None:
    api, repair = FakeKube(), Repair()
    api.add_node("old", "h100", labels={names.HEALTH_STATE_LABEL: names.PASSED})
    for index in range(3):
        api.add_node(f"new{index}", "h100", [TAINT])
    api.add_node("cpu", "system", [TAINT])  # not a checked pool
    health = loop(api, repair)
    health.run_once(at(api, 7200))
    kinds = sorted(p["metadata"]["labels"][names.CHECK_KIND_LABEL] for p in api.check_pods())
    assert kinds == ["gate", "gate"]
    for pod in api.check_pods():
        api.bind(pod, format_time(T0 + 7210))
        api.end(pod, 0, "{}")
    health.run_once(at(api, 7300))
    kinds = sorted(p["metadata"]["labels"][names.CHECK_KIND_LABEL] for p in api.check_pods())
    assert kinds == ["gate", "idle"]
    assert "cpu" not in {p["metadata"]["annotations"][names.CHECK_NODE_ANNOTATION] for p in api.check_pods()}


def test_a_check_of_a_node_that_left_is_deleted() -> None:
    api, repair = FakeKube(), Repair()
    api.add_node("n1", "h100", [TAINT])
    health = loop(api, repair)
    health.run_once(at(api, 0))
    del api.nodes["n1"]
    health.run_once(at(api, 30))
    assert api.check_pods() == [] and repair.handed == []


def test_idle_checks_can_be_turned_off() -> None:
    api, repair = FakeKube(), Repair()
    api.add_node("n1", "h100", labels={names.HEALTH_STATE_LABEL: names.PASSED})
    loop(api, repair, idle_check_seconds=None).run_once(at(api, 10 * 86400))
    assert api.check_pods() == []


def test_settings_are_read_from_the_planned_config() -> None:
    text = json.dumps(
        {
            "pools": {"h100": TEMPLATE},
            "idleCheckSeconds": 21600,
            "maxConcurrentChecks": 3,
            "checkTimeoutSeconds": 1200,
            "scheduleTimeoutSeconds": 600,
            "pollSeconds": 15,
            "metricsPort": 9469,
        }
    )
    read = Settings.from_json(text)
    assert (read.idle_check_seconds, read.max_concurrent_checks, read.poll_seconds) == (21600.0, 3, 15.0)


def stop(server: ThreadingHTTPServer) -> None:
    """Stop `serve`'s thread and close its socket. `shutdown()` waits until `serve_forever` sees the request, which
    it looks for whenever its `select` returns: at the latest after its half-second poll, at once when a connection
    arrives (CPython `socketserver.BaseServer.serve_forever`). So connect until the loop has ended: however the
    connections and the request interleave, the loop ends within that poll, as a bare `shutdown()` would."""
    stopping = threading.Thread(target=server.shutdown)
    stopping.start()
    while stopping.is_alive():
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", server.server_address[1]), 1):
            pass
        stopping.join(0.002)
    server.server_close()


def test_the_metrics_endpoint_speaks_prometheus_text() -> None:
    import urllib.request

    from programs.node_health.metrics import serve

    metrics = Metrics()
    metrics.inc(names.CHECKS_METRIC, {"pool": "h100", "kind": "gate", "result": "passed"})
    server = serve(metrics, 0)
    try:
        port = server.server_address[1]
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    finally:
        stop(server)
    assert f"# TYPE {names.CHECKS_METRIC} counter" in body
    assert f'{names.CHECKS_METRIC}{{kind="gate",pool="h100",result="passed"}} 1' in body


def test_the_repair_path_is_resumed_on_every_pass_with_every_node() -> None:
    api, repair = FakeKube(), Repair()
    api.add_node("n1", "h100", [TAINT])
    seen: list[tuple[list[str], float]] = []
    health = HealthLoop(
        api,
        settings(),
        repair,
        Metrics(),
        lambda _, nodes, now: seen.append(([n["metadata"]["name"] for n in nodes], now)),
    )
    health.run_once(at(api, 0))
    health.run_once(at(api, 30))
    assert seen == [(["n1"], T0), (["n1"], T0 + 30)]
    health.metrics.inc(names.REPAIRS_METRIC, {"pool": "h100", "action": "replace"})  # the repair path counts here
    assert f'{names.REPAIRS_METRIC}{{action="replace",pool="h100"}} 1' in health.metrics.render()


def test_an_idle_check_the_kubelet_refuses_for_lack_of_gpus_is_cancelled() -> None:
    api, repair = FakeKube(), Repair()
    api.add_node("n1", "h100", labels={names.HEALTH_STATE_LABEL: names.PASSED})
    health = loop(api, repair)
    health.run_once(at(api, 3600))
    [pod] = api.check_pods()
    pod["status"] = {"phase": "Failed", "reason": "OutOfnvidia.com/gpu"}
    health.run_once(at(api, 3630))
    assert repair.handed == [] and state(api, "n1") == names.PASSED


def test_the_failed_taint_is_a_status_taint_cluster_autoscaler_does_not_count_unready() -> None:
    assert names.FAILED_TAINT_KEY.startswith(planned.STATUS_TAINT_PREFIX)
    assert not names.FAILED_TAINT_KEY.startswith(planned.STARTUP_TAINT_PREFIX)


def _passed_gate(api: FakeKube, health: HealthLoop, seconds: float) -> None:
    [pod] = api.check_pods()
    api.bind(pod, format_time(T0 + 10))
    api.end(pod, 0, json.dumps({"result": "passed", "step": "all", "detail": "ok"}))
    health.run_once(at(api, seconds))


def test_a_taint_cluster_autoscaler_adds_while_the_gate_passes_survives() -> None:
    api, repair = FakeKube(), Repair()
    api.add_node("n1", "h100", [GPU_TAINT, TAINT])
    health = loop(api, repair)
    health.run_once(at(api, 0))
    # cluster-autoscaler appends its taint after the loop listed the node and before it writes the node
    api.before_write = lambda node: node["spec"]["taints"].append(dict(TO_BE_DELETED))
    _passed_gate(api, health, 120)
    assert api.nodes["n1"]["spec"]["taints"] == [GPU_TAINT, TO_BE_DELETED]
    assert state(api, "n1") == names.PASSED


def test_a_refused_taint_patch_changes_nothing_and_the_next_pass_settles_the_taint() -> None:
    api, repair = FakeKube(), Repair()
    api.add_node("n1", "h100", [GPU_TAINT, TAINT])
    health = loop(api, repair)
    health.run_once(at(api, 0))
    # another controller puts its taint first: the startup taint moved, so the patch's test fails
    api.before_write = lambda node: node["spec"]["taints"].insert(0, dict(TO_BE_DELETED))
    _passed_gate(api, health, 120)
    assert api.nodes["n1"]["spec"]["taints"] == [TO_BE_DELETED, GPU_TAINT, TAINT]
    health.run_once(at(api, 150))
    assert api.nodes["n1"]["spec"]["taints"] == [TO_BE_DELETED, GPU_TAINT]
    assert api.check_pods() == [] and state(api, "n1") == names.PASSED  # settled, not checked again


def test_a_failed_node_keeps_a_taint_added_meanwhile_and_gets_the_status_taint() -> None:
    api, repair = FakeKube(), Repair()
    api.add_node("n1", "h100", [TAINT])
    health = loop(api, repair)
    health.run_once(at(api, 0))
    [pod] = api.check_pods()
    api.bind(pod, format_time(T0 + 10))
    api.end(pod, 1, json.dumps({"result": "failed", "step": "dcgm", "detail": "diag level 2 failed"}))
    api.before_write = lambda node: node["spec"]["taints"].append(dict(TO_BE_DELETED))
    health.run_once(at(api, 60))
    assert api.nodes["n1"]["spec"]["taints"] == [TO_BE_DELETED, FAILED_TAINT]
    assert api.nodes["n1"]["spec"]["unschedulable"] is True


def test_idle_checks_let_cluster_autoscaler_evict_them_and_gate_checks_do_not() -> None:
    api, repair = FakeKube(), Repair()
    api.add_node("n1", "h100", [TAINT])
    api.add_node("n2", "h100", [], labels={names.HEALTH_STATE_LABEL: names.PASSED})
    health = loop(api, repair)
    health.run_once(at(api, 7200))
    kinds = {p["metadata"]["labels"][names.CHECK_KIND_LABEL]: p for p in api.check_pods()}
    assert kinds["idle"]["metadata"]["annotations"][names.SAFE_TO_EVICT_ANNOTATION] == "true"
    assert names.SAFE_TO_EVICT_ANNOTATION not in kinds["gate"]["metadata"]["annotations"]


def test_a_pod_with_gpus_through_a_claim_keeps_its_node_busy() -> None:
    """On a DRA pool a pod's GPUs come through `resourceClaims`, not `nvidia.com/gpu`: the node is still busy."""
    api, repair = FakeKube(), Repair()
    api.add_node("dra", "h100", labels={names.HEALTH_STATE_LABEL: names.PASSED})
    api.add_pod("inference", "server", "dra")
    api.pods[("inference", "server")]["spec"]["resourceClaims"] = [
        {"name": "gpus", "resourceClaimTemplateName": "chat-gpus"}
    ]
    health = loop(api, repair)
    health.run_once(at(api, 3600))
    assert api.check_pods() == []
    assert names.BUSY_AT_ANNOTATION in api.nodes["dra"]["metadata"]["annotations"]
