"""End-to-end scenarios of node health: the real health loop (`programs.node_health.checks.HealthLoop`) with the real
repair path (`programs.node_health.repair.RepairPath`) as its hand-off and its per-pass `resume`, wired as the
loop's entry point wires them, from the settings a planned stack writes into the loop's ConfigMap, against the one
fake Kubernetes API (tests/fake_kube.py) and botocore's Stubber for the AWS calls (tests/stubbed_aws.py), with
nothing of the project's mocked in between. A scenario plays the rest of the cluster: the kubelet that registers a
node with its planned taints, the scheduler and kubelet that run the check pods, the node monitoring agent that
sets a condition, a workload's other replica that frees its PodDisruptionBudget, the Auto Scaling group that
terminates an instance marked unhealthy.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from components.planning.addons import node_health as loop_addon
from components.planning.node_health_repair import REPAIR_CONFIG_KEY, repair_config_data
from components.planning.stack_plan import plan_stack
from components.planning.tolerations import TaintLike
from programs.node_health import names, repair
from programs.node_health.checks import HealthLoop, Settings, format_time, parse_time
from programs.node_health.metrics import Metrics
from tests.builders import HYBRID_POOL, INFERENCE_POOL, SYSTEM_POOL, TRAINING_POOL, addon_stack, pool
from tests.fake_kube import CREATED, FakeKube
from tests.stubbed_aws import BLOCK, StubbedAws, stubbed

#: When the scenario's nodes registered; every pass is at T0 plus the seconds it names.
T0 = parse_time(CREATED) or 0.0
FAILED_TAINT = {"key": names.FAILED_TAINT_KEY, "value": "true", "effect": "NoSchedule"}
#: The Capacity Block's end: 50 minutes after its node fails, within the lead a replacement needs.
BLOCK_ENDS = datetime(2026, 11, 27, 5, 0, tzinfo=UTC)


def taint_dicts(taints: Iterable[TaintLike]) -> list[dict[str, str]]:
    """Planned taints as the node's `spec.taints` lists them."""
    return [{"key": t.key, "value": t.value, "effect": t.effect} for t in taints]


class Cluster:
    """The fake API and the loop with its repair path, built from the stack's planned ConfigMap data as
    `programs.node_health.loop.main` builds them."""

    def __init__(self, *pools: dict[str, Any], stub: StubbedAws, kube: FakeKube | None = None) -> None:
        spec = addon_stack(SYSTEM_POOL, *pools)
        self.plans = {p.name: p for p in plan_stack(spec).pools}
        plans = list(self.plans.values())
        managed = {p.name for p in plans if p.management == "managed"}
        drain = spec.addons.node_termination_handler.drain_timeout_seconds
        data = {
            "config.json": loop_addon.settings_file(spec.addons.node_health, plans),
            **repair_config_data(plans, drain, managed),
        }
        self.kube = kube or FakeKube()
        self.metrics = Metrics()
        self.repair = repair.RepairPath(stub.aws, repair.RepairConfig.from_json(data[REPAIR_CONFIG_KEY]), self.metrics)
        settings = Settings.from_json(data["config.json"])
        self.loop = HealthLoop(self.kube, settings, self.repair, self.metrics, self.repair.resume)

    def restarted(self, *pools: dict[str, Any], stub: StubbedAws) -> Cluster:
        """A new loop process over the same cluster: nothing in memory, everything on the API's objects."""
        return Cluster(*pools, stub=stub, kube=self.kube)

    def register(
        self, name: str, pool_name: str, instance: str, labels: dict[str, str] | None = None
    ) -> dict[str, Any]:
        """A node of the pool as the kubelet registers it: the planned labels and taints (the startup taint with
        them), and a DaemonSet pod that tolerates them."""
        plan = self.plans[pool_name]
        labels = {**plan.labels, **(labels or {})}
        provider = f"aws:///us-east-1a/{instance}" if plan.kind == "aws" else f"eks-hybrid:///us-east-1/gpu/{instance}"
        node = self.kube.add_node(
            name, pool_name, taint_dicts(plan.registration_taints), labels=labels, provider_id=provider
        )
        self.kube.add_pod("kube-system", f"dcgm-exporter-{name}", name, owner_kind="DaemonSet")
        return node

    def admitted(self, name: str, pool_name: str, instance: str) -> dict[str, Any]:
        """A node that passed its gate earlier: the work taints only, labelled `passed`."""
        node = self.register(name, pool_name, instance, labels={names.HEALTH_STATE_LABEL: names.PASSED})
        node["spec"]["taints"] = self.work_taints(pool_name)
        return node

    def work_taints(self, pool_name: str) -> list[dict[str, str]]:
        return taint_dicts(self.plans[pool_name].taints)

    def pass_at(self, seconds: float) -> None:
        self.kube.now = format_time(T0 + seconds)
        self.loop.run_once(T0 + seconds)

    def check_ends(self, seconds: float, exit_code: int, step: str, detail: str) -> None:
        """The one check pod is bound, runs and ends with the check's termination message."""
        [pod] = self.kube.check_pods()
        self.kube.bind(pod, format_time(T0 + seconds - 30))
        result = "passed" if exit_code == 0 else "failed"
        self.kube.end(pod, exit_code, json.dumps({"result": result, "step": step, "detail": detail}))

    def condition(self, node: str, kind: str, since: float, reason: str = "NvidiaXID79") -> None:
        """The node monitoring agent sets one of its conditions `False` at T0 + `since`."""
        stamp = format_time(T0 + since)
        condition = {"type": kind, "status": "False", "reason": reason, "lastTransitionTime": stamp}
        self.kube.nodes[node]["status"]["conditions"] = [condition]

    def terminated(self, node: str) -> None:
        """The Auto Scaling group terminated the instance: its node and pods leave the API."""
        del self.kube.nodes[node]
        for key in [k for k, p in self.kube.pods.items() if p["spec"].get("nodeName") == node]:
            del self.kube.pods[key]

    def state(self, node: str) -> tuple[str | None, str | None, bool]:
        """The node's health label, repair annotation and whether it is cordoned."""
        metadata, spec = self.kube.nodes[node]["metadata"], self.kube.nodes[node]["spec"]
        label = metadata["labels"].get(names.HEALTH_STATE_LABEL)
        return label, metadata["annotations"].get(repair.REPAIR_ANNOTATION), bool(spec.get("unschedulable"))

    def counted(self, metric: str, **labels: str) -> float:
        return self.metrics.value(metric, labels)

    def ledger(self) -> dict[str, Any]:
        data = self.kube.config_maps[(repair.NAMESPACE, repair.LEDGER_CONFIG_MAP)]
        return dict(json.loads(data[repair.LEDGER_KEY]))


def evictions(kube: FakeKube) -> list[tuple[str, str]]:
    return [call for call in kube.calls if call[0] in ("evict_pod", "evict_refused")]


def busy(kube: FakeKube, node: str, app: str, gpus: int = 8) -> None:
    """A workload pod using the node's GPUs."""
    kube.add_pod("team-a", f"{app}-{node}", node, {"app": app}, owner_kind="StatefulSet", gpus=gpus)


@contextmanager
def cluster(*pools: dict[str, Any]) -> Iterator[tuple[Cluster, StubbedAws]]:
    with stubbed() as stub:
        yield Cluster(*pools, stub=stub), stub


# ---------------------------------------------------------------------------------------------------- the gate
def test_a_new_node_passes_the_gate_loses_the_startup_taint_and_takes_work() -> None:
    with cluster(TRAINING_POOL) as (c, stub):  # no AWS call at all
        c.register("gpu-1", "h100", "i-0aaaaaaaaaaaaaa01")
        c.pass_at(0)
        [pod] = c.kube.check_pods()
        assert pod["metadata"]["labels"][names.CHECK_KIND_LABEL] == "gate"
        terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert terms["nodeSelectorTerms"][0]["matchFields"] == [
            {"key": "metadata.name", "operator": "In", "values": ["gpu-1"]}
        ]
        assert c.state("gpu-1") == (names.PENDING, None, False)
        c.check_ends(120, 0, "all", "8 GPUs, 18 NVLinks, 32 EFA devices")
        c.pass_at(120)
    node = c.kube.nodes["gpu-1"]
    assert node["spec"]["taints"] == c.work_taints("h100")  # the startup taint is gone, the pool's own stay
    assert c.state("gpu-1") == (names.PASSED, None, False)
    assert node["metadata"]["annotations"][names.REASON_ANNOTATION] == "all: 8 GPUs, 18 NVLinks, 32 EFA devices"
    assert c.kube.check_pods() == []
    assert evictions(c.kube) == [] and stub.made == []
    assert c.counted(names.CHECKS_METRIC, pool="h100", kind="gate", result="passed") == 1
    assert c.counted(names.NODES_METRIC, pool="h100", state=names.PASSED) == 1
    assert c.counted(names.REPAIRS_METRIC, pool="h100", action="replace") == 0


def gate_failure_is_repaired(pool_config: dict[str, Any], pool_name: str, instance: str) -> Cluster:
    """A new node fails its gate while a pod that tolerates every taint (an `operator: Exists` toleration) runs on
    it under a PodDisruptionBudget: the loop fails it, the repair path drains it through the budget and has its Auto
    Scaling group replace it, with one `SetInstanceHealth`."""
    reason = "efa: 31 EFA devices, expected 32"
    with cluster(pool_config) as (c, stub):
        c.register("gpu-1", pool_name, instance)
        c.kube.add_pod("tools", "agent-0", "gpu-1", {"app": "agent"}, owner_kind="ReplicaSet")
        budget = c.kube.add_budget("tools", "agent", {"app": "agent"}, disruptions_allowed=0)
        c.pass_at(0)
        c.check_ends(60, 1, "efa", "31 EFA devices, expected 32")
        c.pass_at(60)
        node = c.kube.nodes["gpu-1"]
        # never admitted, and not counted unready by cluster-autoscaler: the startup taint became the status taint
        assert node["spec"]["taints"] == [*c.work_taints(pool_name), FAILED_TAINT]
        assert node["metadata"]["annotations"][names.REASON_ANNOTATION] == reason
        # handed to repair in the same pass: cordoned, draining, the budget refusing, no AWS call yet
        assert c.state("gpu-1") == (names.FAILED, "draining", True)
        [started] = c.ledger()["repairs"]
        assert (started["node"], started["reason"], started["started"]) == (
            "gpu-1",
            reason,
            "2026-11-27T04:01:00+00:00",
        )
        assert ("evict_refused", "tools/agent-0") in evictions(c.kube)
        assert ("evict_pod", "tools/agent-0") not in evictions(c.kube)
        assert c.counted(names.CHECKS_METRIC, pool=pool_name, kind="gate", result="failed") == 1
        c.pass_at(90)
        assert c.state("gpu-1")[1] == "draining" and stub.made == []
        budget["disruptionsAllowed"] = 1  # the agent's other replica is ready elsewhere
        c.pass_at(120)
        assert ("evict_pod", "tools/agent-0") in evictions(c.kube)
        assert c.kube.pods_on("gpu-1") == ["kube-system/dcgm-exporter-gpu-1"]  # a DaemonSet pod is not evicted
        stub.expect_replacement(instance)
        c.pass_at(150)
        assert c.state("gpu-1") == (names.FAILED, "replacing", True)
        c.pass_at(180)  # handed over already: no second SetInstanceHealth (the Stubber's record says so on exit)
        c.pass_at(210)
    assert c.kube.check_pods() == []  # a failed node is not checked again
    assert c.counted(names.REPAIRS_METRIC, pool=pool_name, action="replace") == 1
    assert c.counted(names.NODES_METRIC, pool=pool_name, state=names.FAILED) == 1
    return c


def test_a_node_failing_the_gate_is_cordoned_drained_through_its_budget_and_replaced_by_its_group() -> None:
    gate_failure_is_repaired(TRAINING_POOL, "h100", "i-0bbbbbbbbbbbbbb01")


def test_a_managed_pool_leaves_the_agents_conditions_to_eks_and_has_its_group_replace_a_gate_failure() -> None:
    managed = pool(INFERENCE_POOL, management="managed")
    with cluster(managed) as (c, stub):
        c.admitted("gpu-0", "l40s", "i-0ccccccccccccccc0")
        busy(c.kube, "gpu-0", "server", gpus=4)
        c.condition("gpu-0", "AcceleratedHardwareReady", since=-3600)
        for seconds in (0, 30, 60):
            c.pass_at(seconds)
    # EKS node auto-repair acts on the agent's conditions of a managed node group: the loop touches nothing
    assert c.state("gpu-0") == (names.PASSED, None, False)
    assert c.kube.pods_on("gpu-0") == ["kube-system/dcgm-exporter-gpu-0", "team-a/server-gpu-0"]
    assert evictions(c.kube) == [] and stub.made == []
    # a gate failure, which EKS does not see, goes through the group EKS created like a self-managed pool's
    c = gate_failure_is_repaired(managed, "l40s", "i-0ccccccccccccccc1")
    assert c.counted(names.REPAIRS_HELD_METRIC, pool="l40s", reason="hourly-cap") == 0


# ---------------------------------------------------------------------------------------- the agent's conditions
def test_conditions_on_busy_nodes_drain_and_replace_one_at_a_time_within_the_hourly_cap_and_hold_the_next() -> None:
    capped = pool(TRAINING_POOL, repair={"maxPerHour": 2})
    accelerated = "AcceleratedHardwareReady"
    with stubbed() as stub:
        c = Cluster(capped, stub=stub)
        for i in (1, 2, 3):
            c.admitted(f"gpu-{i}", "h100", f"i-0ddddddddddddd0{i}")
            busy(c.kube, f"gpu-{i}", "trainer")
        c.kube.add_pod("team-a", "server-0", "gpu-1", {"app": "server"}, owner_kind="ReplicaSet")
        server = c.kube.add_budget("team-a", "server", {"app": "server"}, disruptions_allowed=0)
        c.condition("gpu-1", accelerated, since=0)
        c.condition("gpu-2", accelerated, since=60)
        c.pass_at(599)  # within the condition's wait (10 minutes for accelerated hardware): nothing yet
        assert c.state("gpu-1") == (names.PASSED, None, False) and evictions(c.kube) == []
        c.pass_at(600)
        assert c.state("gpu-1") == (names.FAILED, "draining", True)
        assert evictions(c.kube) == [("evict_refused", "team-a/server-0"), ("evict_pod", "team-a/trainer-gpu-1")]
        reason = c.kube.nodes["gpu-1"]["metadata"]["annotations"][names.REASON_ANNOTATION]
        assert reason == "condition:AcceleratedHardwareReady"
        c.pass_at(660)  # gpu-2 is due now, but gpu-1's repair comes first
        assert c.state("gpu-2") == (names.FAILED, "queued", True)
        assert "team-a/trainer-gpu-2" in c.kube.pods_on("gpu-2")  # queued: cordoned, not drained
        server["disruptionsAllowed"] = 1
        c.pass_at(690)
        assert c.kube.pods_on("gpu-1") == ["kube-system/dcgm-exporter-gpu-1"] and stub.made == []
        stub.expect_replacement("i-0ddddddddddddd01")
        c.pass_at(720)  # gpu-1 is handed to its group; gpu-2's repair starts in the same pass
        assert c.state("gpu-1")[1] == "replacing" and c.state("gpu-2")[1] == "draining"
        c.terminated("gpu-1")
        stub.expect_replacement("i-0ddddddddddddd02")
        c.pass_at(750)
        assert c.state("gpu-2")[1] == "replacing"
        c.terminated("gpu-2")
        c.condition("gpu-3", accelerated, since=1200)
        c.pass_at(1800)  # gpu-3 is due: the pool's two repairs of this hour are spent
        c.pass_at(1830)
        assert c.state("gpu-3") == (names.FAILED, "held:hourly-cap", True)
        assert "team-a/trainer-gpu-3" in c.kube.pods_on("gpu-3")  # held: cordoned, its work left alone
        assert c.counted(names.REPAIRS_HELD_METRIC, pool="h100", reason="hourly-cap") == 1  # once per hold
        assert c.counted(names.REPAIRS_METRIC, pool="h100", action="replace") == 2
        assert c.ledger()["held"] == {"gpu-3": "hourly-cap"}
        # The ledger holds the cap, not the process: a restarted loop still holds, and counts nothing new.
        c = c.restarted(capped, stub=stub)
        c.pass_at(1860)
        assert c.state("gpu-3")[1] == "held:hourly-cap"
        assert c.counted(names.REPAIRS_HELD_METRIC, pool="h100", reason="hourly-cap") == 0
        # An hour after the first repair started, the window has room again.
        c.pass_at(4201)
        assert c.state("gpu-3")[1] == "draining"
        stub.expect_replacement("i-0ddddddddddddd03")
        c.pass_at(4231)
    assert c.state("gpu-3") == (names.FAILED, "replacing", True)
    assert c.counted(names.REPAIRS_METRIC, pool="h100", action="replace") == 1


# --------------------------------------------------------------------------------------------- on-prem servers
def test_an_on_prem_server_is_cordoned_drained_and_alerted_and_never_replaced(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="node_health.repair")
    with cluster(HYBRID_POOL) as (c, stub):  # no AWS call may be made, and none is
        c.admitted("site-a40-1", "a40", "site-a40-1")
        c.kube.add_pod("serving", "llm-0", "site-a40-1", {"app": "llm"}, owner_kind="ReplicaSet", gpus=4)
        budget = c.kube.add_budget("serving", "llm", {"app": "llm"}, disruptions_allowed=0)
        c.condition("site-a40-1", "AcceleratedHardwareReady", since=0)
        c.pass_at(600)
        assert c.state("site-a40-1") == (names.FAILED, "cordon-only", True)
        assert evictions(c.kube) == [("evict_refused", "serving/llm-0")]
        budget["disruptionsAllowed"] = 1
        for seconds in (630, 660, 3600):
            c.pass_at(seconds)
    assert c.state("site-a40-1") == (names.FAILED, "cordon-only", True)
    assert c.kube.pods_on("site-a40-1") == ["kube-system/dcgm-exporter-site-a40-1"]
    assert stub.made == []
    # the alert: the loop's counter (its metrics endpoint) and the node's `failed` label, which the shipped rules
    # read; the log line sends the operator to the runbook
    text = c.metrics.render()
    assert f'{names.REPAIRS_METRIC}{{action="cordon-only",pool="a40"}} 1' in text
    assert f'{names.NODES_METRIC}{{pool="a40",state="failed"}} 1' in text
    assert any(repair.RUNBOOK in record.getMessage() for record in caplog.records)


# ---------------------------------------------------------------------------------------------- Capacity Blocks
def test_the_last_nodes_of_a_capacity_block_ending_soon_are_held_not_replaced(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="node_health.repair")
    blocked = pool(TRAINING_POOL, capacity={"type": "capacity-block", "reservationId": BLOCK})
    with stubbed() as stub:
        c = Cluster(blocked, stub=stub)
        for i in (1, 2):  # the block's two instances, both in use, none free to launch
            c.admitted(f"gpu-{i}", "h100", f"i-0eeeeeeeeeeeee0{i}")
            busy(c.kube, f"gpu-{i}", "trainer")
        c.condition("gpu-1", "AcceleratedHardwareReady", since=0)
        for seconds in (600, 630):  # the block ends within the lead (scale-in lead plus an hour): held every pass
            stub.expect_block("active", end=BLOCK_ENDS, available=0, total=2)
            c.pass_at(seconds)
    assert c.state("gpu-1") == (names.FAILED, "held:capacity-block", True)
    assert c.state("gpu-2") == (names.PASSED, None, False)
    assert "team-a/trainer-gpu-1" in c.kube.pods_on("gpu-1")  # neither drained nor replaced
    assert evictions(c.kube) == []
    assert c.counted(names.REPAIRS_HELD_METRIC, pool="h100", reason="capacity-block") == 1
    assert any("before a replacement would be ready" in record.getMessage() for record in caplog.records)
    assert c.counted(names.REPAIRS_METRIC, pool="h100", action="replace") == 0


def test_a_node_of_a_full_capacity_block_with_time_left_is_replaced_its_slot_comes_back() -> None:
    """Every instance of the block in use and none free: the repair still goes ahead, because a terminated
    instance's capacity returns to the block and the group's replacement launches into it while the block lasts
    ([EC2CB]); only the block's state and end can make a repair take a node it cannot get back."""
    blocked = pool(TRAINING_POOL, capacity={"type": "capacity-block", "reservationId": BLOCK})
    with stubbed() as stub:
        c = Cluster(blocked, stub=stub)
        for i in (1, 2):
            c.admitted(f"gpu-{i}", "h100", f"i-0eeeeeeeeeeeee0{i}")
            busy(c.kube, f"gpu-{i}", "trainer")
        c.condition("gpu-1", "AcceleratedHardwareReady", since=0)
        stub.expect_block("active", end=BLOCK_ENDS + timedelta(days=2), available=0, total=2)
        c.pass_at(600)  # the block read once, as the repair starts: it drains
        assert c.state("gpu-1") == (names.FAILED, "draining", True)
        stub.expect_replacement("i-0eeeeeeeeeeeee01")
        c.pass_at(630)  # drained: handed to its group
    assert c.state("gpu-1") == (names.FAILED, "replacing", True)
    assert evictions(c.kube) == [("evict_pod", "team-a/trainer-gpu-1")]
    assert c.counted(names.REPAIRS_METRIC, pool="h100", action="replace") == 1
    assert c.counted(names.REPAIRS_HELD_METRIC, pool="h100", reason="capacity-block") == 0
