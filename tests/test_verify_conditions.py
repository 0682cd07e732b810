"""`blueprint verify`'s `conditions` check against a fake Kubernetes API: the EKS node monitoring agent's conditions
on every cloud GPU node, a False or missing one failing its node, on-prem servers skipped; and the agent's pods
expected by the `daemons` check where it runs."""

from __future__ import annotations

from blueprint.verify import conditions, daemons
from blueprint.verify.context import Context, Options
from blueprint.verify.pods import PodSession
from components.planning.addons.node_monitoring import AGENT_CONDITIONS
from tests.test_verify import expect, training_daemons
from tests.verify_fakes import FakeApi, daemon_pod, node

HEALTHY = dict.fromkeys(AGENT_CONDITIONS, "True")


def context(api: FakeApi, stack: str = "training") -> Context:
    return Context(api, expect(stack), PodSession(api, "abc123", "default", sleep=lambda s: None), Options())


def gpu_node(name: str, health: dict[str, str] | None = None) -> dict:
    return node(name, "h100", "p5.48xlarge", gpus=8, efa=32, health=health)


def system_nodes() -> list[dict]:
    return [node("ip-10-0-0-1", "system", "m7i.xlarge"), node("ip-10-0-0-2", "system", "m7i.xlarge")]


def test_every_gpu_node_with_all_conditions_true_passes_and_cpu_pools_are_not_judged() -> None:
    api = FakeApi([*system_nodes(), gpu_node("ip-10-0-1-0", HEALTHY), gpu_node("ip-10-0-1-1", HEALTHY)])
    results = conditions.check(context(api))
    assert [(r.target, r.status) for r in results] == [("h100/ip-10-0-1-0", "pass"), ("h100/ip-10-0-1-1", "pass")]
    assert results[0].measured == HEALTHY and results[0].detail == "5 conditions True"


def test_a_false_accelerated_hardware_condition_fails_its_node_with_the_agents_reason() -> None:
    bad = gpu_node("ip-10-0-1-1", HEALTHY)
    for condition in bad["status"]["conditions"]:
        if condition["type"] == "AcceleratedHardwareReady":
            condition.update(status="False", reason="NvidiaXID79Error", message="GPU has fallen off the bus")
    api = FakeApi([*system_nodes(), gpu_node("ip-10-0-1-0", HEALTHY), bad])
    results = {r.target: r for r in conditions.check(context(api))}
    failed = results["h100/ip-10-0-1-1"]
    assert failed.status == "fail" and failed.nodes == ("ip-10-0-1-1",)
    assert failed.detail == "AcceleratedHardwareReady False (NvidiaXID79Error: GPU has fallen off the bus)"
    assert failed.measured["AcceleratedHardwareReady"] == "False"
    assert results["h100/ip-10-0-1-0"].status == "pass"


def test_a_node_the_agent_has_not_reported_on_fails() -> None:
    """No agent conditions: the node is not watched (agent not running there yet, or its DCGM server missing)."""
    partial = {kind: "True" for kind in AGENT_CONDITIONS if kind != "AcceleratedHardwareReady"}
    api = FakeApi([gpu_node("ip-10-0-1-0", {}), gpu_node("ip-10-0-1-1", partial)])
    results = {r.target: r for r in conditions.check(context(api))}
    assert results["h100/ip-10-0-1-0"].status == "fail"
    assert "KernelReady not reported" in results["h100/ip-10-0-1-0"].detail
    assert results["h100/ip-10-0-1-1"].detail == "AcceleratedHardwareReady not reported"


def test_unknown_status_fails_too() -> None:
    api = FakeApi([gpu_node("ip-10-0-1-0", {**HEALTHY, "NetworkingReady": "Unknown"})])
    (result,) = conditions.check(context(api))
    assert result.status == "fail" and result.detail == "NetworkingReady Unknown (no reason)"


def test_on_prem_servers_are_skipped_with_the_reason_and_cloud_gpu_nodes_are_judged() -> None:
    a40 = [node(f"a40-{i}", "a40", gpus=4, hybrid=True) for i in range(2)]
    p5 = [node(f"ip-10-0-1-{i}", "h100", "p5.48xlarge", gpus=8, efa=32) for i in range(2)]
    results = {r.target: r for r in conditions.check(context(FakeApi([*system_nodes(), *p5, *a40]), "hybrid"))}
    assert results["a40"].status == "skip" and "hybrid nodes" in results["a40"].detail
    assert {t for t in results if t.startswith("h100/")} == {"h100/ip-10-0-1-0", "h100/ip-10-0-1-1"}
    assert not any(t.startswith("a40/") for t in results)


def test_the_agent_and_its_dcgm_server_must_run_on_every_cloud_gpu_node() -> None:
    names = ["ip-10-0-1-0", "ip-10-0-1-1"]
    pods = training_daemons(names)
    pods["kube-system"] = [
        p
        for p in pods["kube-system"]
        if p["metadata"]["name"] != daemon_pod("dcgm-server", names[1])["metadata"]["name"]
    ]
    api = FakeApi([*system_nodes(), gpu_node(names[0]), gpu_node(names[1])], pods)
    results = {r.target: r for r in daemons.check(context(api))}
    assert results[f"h100/{names[0]}"].status == "pass"
    bad = results[f"h100/{names[1]}"]
    assert bad.status == "fail" and "DCGM host engine (kube-system/dcgm-server)" in bad.detail


def test_expectations_name_the_agents_conditions_on_cloud_gpu_pools_only() -> None:
    def conditions_of(stack: str, pool: str) -> tuple[str, ...]:
        found = expect(stack).pool(pool)
        assert found is not None
        return found.health_conditions

    assert conditions_of("hybrid", "h100") == AGENT_CONDITIONS
    assert conditions_of("hybrid", "a40") == ()
    assert conditions_of("training", "system") == ()
