"""The repair path's steps and guard rails one call at a time, on the fake Kubernetes API (tests/fake_kube.py) with
the Auto Scaling and EC2 calls stubbed by botocore's Stubber (tests/stubbed_aws.py): every AWS call the path makes is
expected here, and one it makes that is not fails the test. The whole path behind the real loop (a gate failure
replaced, conditions on busy nodes within the hourly cap, managed pools, on-prem servers, Capacity Blocks) is in
tests/test_node_health_scenarios.py."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

import pytest

from components.planning import node_health
from components.tags import POOL
from programs.node_health import repair
from programs.node_health.aws_calls import AwsCalls
from programs.node_health.metrics import Metrics
from tests.fake_kube import FakeKube
from tests.stubbed_aws import BLOCK, stubbed

NOW = datetime(2026, 11, 27, 6, 0, tzinfo=UTC)


class Counts:
    """The loop's counters, as a Counter of (metric, sorted labels)."""

    def __init__(self) -> None:
        self.seen: Counter[tuple[str, tuple[tuple[str, str], ...]]] = Counter()

    def inc(self, name: str, labels: Mapping[str, str], amount: float = 1.0) -> None:
        self.seen[(name, tuple(sorted(labels.items())))] += int(amount)

    def get(self, name: str, **labels: str) -> int:
        return self.seen[(name, tuple(sorted(labels.items())))]


def config(**pools: Mapping[str, object]) -> repair.RepairConfig:
    text = json.dumps({"pools": pools, "drainTimeoutSeconds": 600, "capacityBlockLeadSeconds": 7200})
    return repair.RepairConfig.from_json(text)


TRAIN = {"kind": "aws", "management": "self-managed", "capacityBlockId": None, "maxRepairsPerHour": 3}
ONPREM = {"kind": "hybrid", "management": "self-managed", "capacityBlockId": None, "maxRepairsPerHour": 3}


def gpu_node(kube: FakeKube, name: str, pool: str = "train", instance: str = "i-0aaaaaaaaaaaaaaa1") -> None:
    kube.add_node(name, pool, provider_id=f"aws:///us-west-2a/{instance}")


def false_since(kind: str, since: datetime, reason: str = "NvidiaXID79") -> dict[str, str]:
    """An agent condition `False` since `since` (the agent's reason names what it found)."""
    return {"type": kind, "status": "False", "reason": reason, "lastTransitionTime": since.isoformat()}


def run(
    kube: FakeKube, aws: AwsCalls, name: str, reason: str, now: datetime, cfg: repair.RepairConfig, counts: Counts
) -> repair.Outcome:
    return repair.handle_failed(kube, aws, kube.nodes[name], reason, now, config=cfg, counters=counts)


def test_names_match_the_planning_constants() -> None:
    assert repair.NAMESPACE == node_health.NODE_HEALTH_NAMESPACE
    assert repair.HEALTH_STATE_LABEL == node_health.HEALTH_STATE_LABEL
    assert repair.REPAIRS_METRIC == node_health.REPAIRS_METRIC
    assert repair.REPAIRS_HELD_METRIC == node_health.REPAIRS_HELD_METRIC
    assert repair.POOL_LABEL == POOL


def test_a_drain_past_its_deadline_proceeds_and_says_so() -> None:
    kube, counts, cfg = FakeKube(), Counts(), config(train=TRAIN)
    gpu_node(kube, "gpu-1", instance="i-0ccccccccccccccc1")
    kube.add_pod("team-a", "server-0", "gpu-1", {"app": "server"})
    kube.add_budget("team-a", "server", {"app": "server"}, disruptions_allowed=0)
    with stubbed() as stub:
        assert run(kube, stub.aws, "gpu-1", "idle", NOW, cfg, counts).action == "draining"
        assert run(kube, stub.aws, "gpu-1", "idle", NOW + timedelta(seconds=599), cfg, counts).action == "draining"
    with stubbed() as stub:
        stub.expect_replacement("i-0ccccccccccccccc1")
        late = run(kube, stub.aws, "gpu-1", "idle", NOW + timedelta(seconds=600), cfg, counts)
    assert late.action == "replaced"
    assert late.pods_left == ("team-a/server-0",)
    assert "drain deadline passed with 1 pods left: team-a/server-0" in late.detail


def test_one_repair_at_a_time_per_pool() -> None:
    kube, counts, cfg = FakeKube(), Counts(), config(train=TRAIN)
    gpu_node(kube, "gpu-1", instance="i-0eeeeeeeeeeeeee01")
    gpu_node(kube, "gpu-2", instance="i-0eeeeeeeeeeeeee02")
    kube.add_pod("team-a", "server-0", "gpu-1", {"app": "server"})
    kube.add_budget("team-a", "server", {"app": "server"}, disruptions_allowed=0)
    with stubbed() as stub:
        assert run(kube, stub.aws, "gpu-1", "gate", NOW, cfg, counts).action == "draining"
        second = run(kube, stub.aws, "gpu-2", "gate", NOW + timedelta(minutes=1), cfg, counts)
    assert second.action == "queued"
    assert "gpu-1" in second.detail
    assert kube.nodes["gpu-2"]["spec"]["unschedulable"] is True
    assert (
        not +counts.seen
    )  # `+` drops the series started at 0  # queued is the normal pace: nothing for the storm alert
    # Once the first node is gone (scaled in meanwhile), the pool is free again.
    del kube.nodes["gpu-1"]
    with stubbed() as stub:
        stub.expect_replacement("i-0eeeeeeeeeeeeee02")
        assert run(kube, stub.aws, "gpu-2", "gate", NOW + timedelta(minutes=2), cfg, counts).action == "replaced"


def test_the_capacity_block_guard_holds_when_the_block_is_no_longer_active() -> None:
    kube, counts = FakeKube(), Counts()
    cfg = config(train={**TRAIN, "capacityBlockId": BLOCK})
    gpu_node(kube, "gpu-1", instance="i-0fffffffffffffff2")
    with stubbed() as stub:
        stub.expect_block("expired", end=NOW - timedelta(minutes=5))
        held = run(kube, stub.aws, "gpu-1", "gate", NOW, cfg, counts)
    assert held.held_reason == "capacity-block"
    assert "expired" in held.detail


def test_a_block_with_time_left_takes_the_replacement() -> None:
    kube, counts = FakeKube(), Counts()
    cfg = config(train={**TRAIN, "capacityBlockId": BLOCK})
    gpu_node(kube, "gpu-1", instance="i-0fffffffffffffff3")
    with stubbed() as stub:
        stub.expect_block("active", end=NOW + timedelta(days=3))
        stub.expect_replacement("i-0fffffffffffffff3")
        assert run(kube, stub.aws, "gpu-1", "gate", NOW, cfg, counts).action == "replaced"


def test_a_cap_of_zero_cordons_and_drains_without_a_replacement_or_a_storm_hold() -> None:
    """`maxPerHour: 0` is the operator's choice of cordon-only: no AWS call, and nothing counted as held."""
    kube, counts, cfg = FakeKube(), Counts(), config(train={**TRAIN, "maxRepairsPerHour": 0})
    gpu_node(kube, "n1")
    with stubbed() as stub:  # no AWS call at all: the stubs refuse any
        outcome = run(kube, stub.aws, "n1", "gate", NOW, cfg, counts)
    assert outcome.action == "cordoned"
    assert kube.nodes["n1"]["spec"]["unschedulable"] is True
    assert counts.get(repair.REPAIRS_HELD_METRIC, pool="train", reason="hourly-cap") == 0


def test_pending_finds_checked_failures_and_agent_conditions_past_their_wait_only() -> None:
    kube, cfg = FakeKube(), config(train=TRAIN)
    minutes = lambda n: NOW - timedelta(minutes=n)  # noqa: E731
    kube.add_node("ok", "train", conditions=[{"type": "KernelReady", "status": "True"}])
    kube.add_node("gate", "train", labels={repair.HEALTH_STATE_LABEL: "failed"})
    kube.nodes["gate"]["metadata"]["annotations"][repair.REASON_ANNOTATION] = "idle"
    kube.add_node("net", "train", conditions=[false_since("NetworkingReady", minutes(30))])
    kube.add_node("net-new", "train", conditions=[false_since("NetworkingReady", minutes(29))])
    kube.add_node("gpu", "train", conditions=[false_since("AcceleratedHardwareReady", minutes(10))])
    kube.add_node("gpu-new", "train", conditions=[false_since("AcceleratedHardwareReady", minutes(9))])
    kube.add_node("no-time", "train", conditions=[{"type": "KernelReady", "status": "False"}])
    kube.add_node("dcgm", "train", conditions=[false_since("AcceleratedHardwareReady", minutes(60), "DCGMError")])
    kube.add_node("ready", "train", conditions=[{"type": "Ready", "status": "False"}])
    found = {n["metadata"]["name"]: reason for n, reason in repair.pending(kube.list_nodes(), NOW, cfg)}
    assert found == {"gate": "idle", "net": "condition:NetworkingReady", "gpu": "condition:AcceleratedHardwareReady"}


def test_the_waits_come_from_the_settings() -> None:
    text = json.dumps(
        {
            "pools": {"train": TRAIN},
            "drainTimeoutSeconds": 600,
            "capacityBlockLeadSeconds": 7200,
            "conditionWaitSeconds": {"AcceleratedHardwareReady": 120, "default": 300},
        }
    )
    cfg = repair.RepairConfig.from_json(text)
    assert cfg.wait_for("AcceleratedHardwareReady") == timedelta(minutes=2)
    assert cfg.wait_for("KernelReady") == timedelta(minutes=5)


def test_a_transient_dcgm_error_on_every_node_cordons_nothing() -> None:
    """A restart of the DCGM DaemonSet: every GPU node's AcceleratedHardwareReady goes False with `DCGMError`."""
    kube, counts, cfg = FakeKube(), Counts(), config(train=TRAIN)
    for i in range(8):
        gpu_node(kube, f"gpu-{i}", instance=f"i-0aaaaaaaaaaaaaa{i:02d}")
        lost = false_since("AcceleratedHardwareReady", NOW - timedelta(hours=1), "DCGMError")
        kube.nodes[f"gpu-{i}"]["status"]["conditions"] = [lost]
    with stubbed() as stub:
        assert repair.RepairPath(stub.aws, cfg, counts).resume(kube, kube.list_nodes(), NOW.timestamp()) == []
    assert not any(n["spec"].get("unschedulable") for n in kube.nodes.values())
    assert not +counts.seen  # `+` drops the series started at 0


def test_a_condition_that_clears_within_its_wait_is_never_acted_on_and_one_past_it_is_repaired() -> None:
    kube, counts, cfg = FakeKube(), Counts(), config(train=TRAIN)
    gpu_node(kube, "gpu-1", instance="i-0aaaaaaaaaaaaaa01")
    kube.nodes["gpu-1"]["status"]["conditions"] = [false_since("AcceleratedHardwareReady", NOW)]
    with stubbed() as stub:
        path = repair.RepairPath(stub.aws, cfg, counts)
        assert path.resume(kube, kube.list_nodes(), (NOW + timedelta(minutes=9)).timestamp()) == []
        assert not kube.nodes["gpu-1"]["spec"].get("unschedulable")
        stub.expect_replacement("i-0aaaaaaaaaaaaaa01")
        [outcome] = path.resume(kube, kube.list_nodes(), (NOW + timedelta(minutes=10)).timestamp())
    assert outcome.action == "replaced"
    assert counts.get(repair.REPAIRS_METRIC, pool="train", action="replace") == 1


def test_many_nodes_unhealthy_at_once_are_held_not_cordoned() -> None:
    kube, counts = FakeKube(), Counts()
    cfg = config(train={**TRAIN, "maxUnhealthyPercent": 20})
    for i in range(10):
        gpu_node(kube, f"gpu-{i}", instance=f"i-0aaaaaaaaaaaaaa{i:02d}")
    for i in range(3):  # 3 of 10 is over 20 %
        kube.nodes[f"gpu-{i}"]["status"]["conditions"] = [false_since("NetworkingReady", NOW - timedelta(hours=1))]
    with stubbed() as stub:  # no AWS call: nothing is repaired
        path = repair.RepairPath(stub.aws, cfg, counts)
        first = path.resume(kube, kube.list_nodes(), NOW.timestamp())
        again = path.resume(kube, kube.list_nodes(), NOW.timestamp() + 60)
    assert {o.action for o in first + again} == {"held"}
    assert {o.held_reason for o in first} == {"unhealthy-threshold"}
    assert not any(n["spec"].get("unschedulable") for n in kube.nodes.values())
    assert counts.get(repair.REPAIRS_HELD_METRIC, pool="train", reason="unhealthy-threshold") == 3  # once per node


def test_the_threshold_by_count_and_never_for_one_node() -> None:
    pool = repair.PoolSettings("p", "aws", "self-managed", None, 3, max_unhealthy=2, max_unhealthy_percent=50)
    assert not pool.over_threshold(1, 1)  # one node of a one-node pool is 100 %, still repaired
    assert not pool.over_threshold(2, 10)
    assert pool.over_threshold(3, 10)  # more than the count
    assert pool.over_threshold(4, 6)  # more than the percentage
    assert not pool.over_threshold(2, 3)  # the percentage counts only in a pool of more than five nodes


def test_a_node_whose_condition_clears_before_its_repair_starts_is_uncordoned() -> None:
    kube, counts, cfg = FakeKube(), Counts(), config(train=TRAIN)
    gpu_node(kube, "gpu-1", instance="i-0aaaaaaaaaaaaaa01")
    gpu_node(kube, "gpu-2", instance="i-0aaaaaaaaaaaaaa02")
    for name in ("gpu-1", "gpu-2"):
        kube.nodes[name]["status"]["conditions"] = [false_since("KernelReady", NOW - timedelta(hours=1))]
    kube.add_pod("team-a", "server-0", "gpu-1", {"app": "server"})
    kube.add_budget("team-a", "server", {"app": "server"}, disruptions_allowed=0)
    with stubbed() as stub:
        path = repair.RepairPath(stub.aws, cfg, counts)
        actions = {o.detail.split(":")[0]: o.action for o in path.resume(kube, kube.list_nodes(), NOW.timestamp())}
        assert actions == {"gpu-1": "draining", "gpu-2": "queued"}
        for name in ("gpu-1", "gpu-2"):
            kube.nodes[name]["status"]["conditions"] = [{"type": "KernelReady", "status": "True"}]
        outcomes = path.resume(kube, kube.list_nodes(), NOW.timestamp() + 60)
    assert (outcomes[0].detail.split(":")[0], outcomes[0].action) == ("gpu-2", "recovered")
    assert kube.nodes["gpu-2"]["spec"]["unschedulable"] is False
    assert kube.nodes["gpu-2"]["metadata"]["labels"][repair.HEALTH_STATE_LABEL] == "passed"
    assert repair.REASON_ANNOTATION not in kube.nodes["gpu-2"]["metadata"]["annotations"]
    # The repair already under way (drained, the budget still refusing) goes on: its node is out of service.
    assert kube.nodes["gpu-1"]["metadata"]["labels"][repair.HEALTH_STATE_LABEL] == "failed"


def test_a_gate_failure_does_not_recover_by_itself() -> None:
    kube = FakeKube()
    kube.add_node("gpu-1", "train", labels={repair.HEALTH_STATE_LABEL: "failed"})
    kube.nodes["gpu-1"]["metadata"]["annotations"].update(
        {repair.REASON_ANNOTATION: "gate", repair.REPAIR_ANNOTATION: "queued"}
    )
    assert not repair.recovered(kube.nodes["gpu-1"])


@pytest.mark.parametrize(
    ("provider_id", "expected"),
    [
        ("aws:///us-west-2a/i-0123456789abcdef0", "i-0123456789abcdef0"),
        ("eks-hybrid:///us-west-2/c/server-1", None),
        ("", None),
    ],
)
def test_instance_id_comes_from_the_provider_id(provider_id: str, expected: str | None) -> None:
    assert repair.instance_id({"spec": {"providerID": provider_id}}) == expected


def test_an_unknown_pool_is_cordoned_and_nothing_else() -> None:
    kube, counts = FakeKube(), Counts()
    gpu_node(kube, "gpu-1", pool="gone")
    with stubbed() as stub:
        assert run(kube, stub.aws, "gpu-1", "gate", NOW, config(train=TRAIN), counts).action == "unknown-pool"
    assert kube.nodes["gpu-1"]["spec"]["unschedulable"] is True
    assert not +counts.seen  # `+` drops the series started at 0


def test_the_loops_hand_off_and_its_pass_resume_a_repair_where_it_stood() -> None:
    """The loop hands a gate failure over once (Unix seconds); its later passes call `resume` with every node."""
    kube, counts, cfg = FakeKube(), Counts(), config(train=TRAIN)
    gpu_node(kube, "gpu-1", instance="i-0aaaaaaaaaaaaaa77")
    kube.add_pod("team-a", "server-0", "gpu-1", {"app": "server"})
    server = kube.add_budget("team-a", "server", {"app": "server"}, disruptions_allowed=0)
    start = NOW.timestamp()
    with stubbed() as stub:
        path = repair.RepairPath(stub.aws, cfg, counts)
        path(kube, kube.nodes["gpu-1"], "gate: 7 of 8 GPUs visible", start)
    assert kube.nodes["gpu-1"]["metadata"]["annotations"][repair.REPAIR_ANNOTATION] == "draining"
    server["disruptionsAllowed"] = 1
    with stubbed() as stub:
        path = repair.RepairPath(stub.aws, cfg, counts)  # a restarted loop: the node's labels and the ledger carry on
        stub.expect_replacement("i-0aaaaaaaaaaaaaa77")
        assert [o.action for o in path.resume(kube, kube.list_nodes(), start + 60)] == ["draining"]
        assert [o.action for o in path.resume(kube, kube.list_nodes(), start + 120)] == ["replaced"]
    assert kube.nodes["gpu-1"]["metadata"]["annotations"][repair.REASON_ANNOTATION] == "gate: 7 of 8 GPUs visible"


def test_a_pass_forgets_the_holds_of_nodes_that_are_gone() -> None:
    kube, counts, cfg = FakeKube(), Counts(), config(train={**TRAIN, "maxRepairsPerHour": 1})
    gpu_node(kube, "gpu-1")
    # the pool's one repair this hour is spent already, so gpu-1 is held by the cap
    spent = {"pool": "train", "node": "gpu-0", "reason": "gate", "started": NOW.isoformat(), "done": True}
    kube.write_config_map(
        repair.NAMESPACE, repair.LEDGER_CONFIG_MAP, {repair.LEDGER_KEY: json.dumps({"repairs": [spent], "held": {}})}
    )
    with stubbed() as stub:
        path = repair.RepairPath(stub.aws, cfg, counts)
        path(kube, kube.nodes["gpu-1"], "gate", NOW.timestamp())
        ledger = json.loads(kube.config_maps[(repair.NAMESPACE, repair.LEDGER_CONFIG_MAP)][repair.LEDGER_KEY])
        assert ledger["held"] == {"gpu-1": "hourly-cap"}
        del kube.nodes["gpu-1"]
        assert path.resume(kube, kube.list_nodes(), NOW.timestamp() + 30) == []
    ledger = json.loads(kube.config_maps[(repair.NAMESPACE, repair.LEDGER_CONFIG_MAP)][repair.LEDGER_KEY])
    assert ledger["held"] == {}


def test_the_loop_starts_every_pools_repair_counters_at_zero() -> None:
    """`increase` needs a sample before the first repair, or the storm alert misses the first hold."""
    metrics = Metrics()
    block = {**TRAIN, "capacityBlockId": BLOCK}
    with stubbed() as stub:
        repair.RepairPath(stub.aws, config(train=TRAIN, blocked=block, onprem=ONPREM), metrics)
    text = metrics.render()
    for series in (
        'gpu_clusters_node_health_repairs_total{action="replace",pool="train"} 0',
        'gpu_clusters_node_health_repairs_total{action="cordon-only",pool="onprem"} 0',
        'gpu_clusters_node_health_repairs_held_total{pool="train",reason="hourly-cap"} 0',
        'gpu_clusters_node_health_repairs_held_total{pool="train",reason="unhealthy-threshold"} 0',
        'gpu_clusters_node_health_repairs_held_total{pool="blocked",reason="capacity-block"} 0',
    ):
        assert series in text
    assert 'pool="train",reason="capacity-block"' not in text
