"""The repair path of the health loop: what happens to a node that failed its gate or idle check, or that the EKS
node monitoring agent marks unhealthy.

Every failed node is cordoned and labelled `failed` first. Then, by its pool (the map the stack plans, handed over in
the loop's ConfigMap as `CONFIG_KEY`):

- a self-managed `aws` pool: drain through the Eviction API (PodDisruptionBudgets honoured; past the drain deadline
  the repair proceeds and says which pods were left), then `SetInstanceHealth Unhealthy`, so the node's Auto Scaling
  group terminates it (through the node termination handler's lifecycle hook) and launches a replacement;
- an EKS managed pool: the agent's conditions are EKS node auto-repair's, so the loop leaves them alone; a gate or
  idle failure, which EKS does not see, is drained and replaced through the group EKS created, as above;
- a `hybrid` pool (on-prem servers, no group): cordon, drain, count and alert; never replaced, never an AWS call.

Guard rails, kept across loop restarts in a ConfigMap ledger: at most one repair at a time per pool (the next
failed node is queued, cordoned), at most `maxPerHour` started per pool in any hour, and never a node of a Capacity
Block whose replacement could not land (the block is not active, or ends before a replacement would be ready). A
held node stays cordoned and is not drained, so a storm of false failures takes no work away; it is retried on every
pass and counted once per hold.

The loop holds a `RepairPath`: it calls it with a node the moment its gate or idle check fails, and `resume` on every
pass, which finds failed nodes and the agent's unhealthy ones (`pending`) and takes each one step further
(`handle_failed`). docs/operations.md, "Repairing failed nodes", describes it for operators.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from programs.node_health import names
from programs.node_health.aws_calls import AwsCalls, AwsError, Boto3Calls
from programs.node_health.kube import KubeApi, KubeError

LOG = logging.getLogger("node_health.repair")

# Names shared with components.planning.node_health and components.tags (a test holds them equal).
NAMESPACE = "node-health"
HEALTH_STATE_LABEL = "gpu-clusters/node-health"
POOL_LABEL = "gpu-clusters/pool"
REPAIRS_METRIC = "gpu_clusters_node_health_repairs_total"
REPAIRS_HELD_METRIC = "gpu_clusters_node_health_repairs_held_total"

#: The key of the loop's ConfigMap that holds the repair settings (`components.planning.node_health_repair`).
CONFIG_KEY = "repair.json"
#: Where the loop's Deployment mounts that key.
CONFIG_PATH = Path(os.environ.get("NODE_HEALTH_REPAIR_CONFIG", f"/etc/node-health/{CONFIG_KEY}"))
#: The ConfigMap (in NAMESPACE) the loop keeps its ledger of repairs and holds in, so a restart keeps the caps.
LEDGER_CONFIG_MAP = "node-health-repairs"
LEDGER_KEY = "ledger.json"
#: Why the node failed (`gate`, `idle`, `condition:<type>`) and where its repair stands.
REASON_ANNOTATION = "gpu-clusters/node-health-reason"
REPAIR_ANNOTATION = "gpu-clusters/node-health-repair"
#: The node conditions the EKS node monitoring agent sets, one per category; `False` means a problem was found.
AGENT_CONDITIONS = names.AGENT_CONDITIONS
CONDITION_PREFIX = "condition:"
#: A condition reason that says the agent lost its DCGM host process, not that a GPU is bad: a restart of the DCGM
#: DaemonSet raises it on every GPU node at once. Alerted (the node condition is on the dashboards), never repaired.
ALERT_ONLY_REASONS = frozenset({"DCGMError"})
#: How long a condition must stay `False` before the loop acts, when the settings name none: EKS node auto-repair's
#: own waits (10 minutes for accelerated hardware, 30 for the other categories; docs/operations.md cites them).
DEFAULT_CONDITION_WAITS = {"AcceleratedHardwareReady": timedelta(minutes=10)}
DEFAULT_CONDITION_WAIT = timedelta(minutes=30)
#: A pool of at most this many nodes is never held by its unhealthy percentage (EKS node auto-repair's rule).
SMALL_POOL = 5
#: Repair states in which the node is already out of service: the threshold and the recovery leave it alone.
STARTED_STATES = frozenset({"draining", "replacing", "cordon-only"})
#: The cap's window.
CAP_WINDOW = timedelta(hours=1)
#: Where an on-prem server's repair continues by hand.
RUNBOOK = "docs/operations.md#on-prem-servers-the-runbook"


class Counters(Protocol):
    """Where the repair path counts (the loop's metrics endpoint)."""

    def inc(self, name: str, labels: Mapping[str, str], amount: float = 1.0) -> None: ...


@dataclass(frozen=True)
class PoolSettings:
    """One pool as the repair path sees it."""

    name: str
    kind: str  # "aws" or "hybrid"
    management: str  # "self-managed" or "managed" (EKS managed node group)
    capacity_block_id: str | None
    max_per_hour: int
    #: More than this many of the pool's nodes unhealthy at once, or more than this percentage, and the loop stops
    #: repairing the pool: a fault that broad is the stack's (a driver, a network), not the nodes'.
    max_unhealthy: int | None = None
    max_unhealthy_percent: int | None = None

    def over_threshold(self, unhealthy: int, total: int) -> bool:
        """Whether `unhealthy` of the pool's `total` nodes is more than the pool allows at once; one node alone is
        never over (a small pool's one failure is repaired whatever its percentage)."""
        if unhealthy <= 1:
            return False
        if self.max_unhealthy is not None and unhealthy > self.max_unhealthy:
            return True
        # As EKS node auto-repair's default: the percentage counts only in a pool of more than five nodes.
        percent = self.max_unhealthy_percent
        return percent is not None and total > SMALL_POOL and unhealthy * 100 > percent * total


@dataclass(frozen=True)
class RepairConfig:
    """The settings the stack plans for the loop (components.planning.node_health_repair.repair_settings)."""

    pools: Mapping[str, PoolSettings]
    drain_timeout: timedelta
    capacity_block_lead: timedelta
    condition_waits: Mapping[str, timedelta] = field(default_factory=lambda: dict(DEFAULT_CONDITION_WAITS))
    default_condition_wait: timedelta = DEFAULT_CONDITION_WAIT

    def wait_for(self, condition: str) -> timedelta:
        """How long the condition must stay `False` before the loop acts on it."""
        return self.condition_waits.get(condition, self.default_condition_wait)

    @classmethod
    def from_json(cls, text: str) -> RepairConfig:
        raw = json.loads(text)
        pools = {
            name: PoolSettings(
                name=name,
                kind=str(p["kind"]),
                management=str(p.get("management", "self-managed")),
                capacity_block_id=p.get("capacityBlockId"),
                max_per_hour=int(p["maxRepairsPerHour"]),
                max_unhealthy=_optional_int(p.get("maxUnhealthy")),
                max_unhealthy_percent=_optional_int(p.get("maxUnhealthyPercent")),
            )
            for name, p in raw["pools"].items()
        }
        waits = raw.get("conditionWaitSeconds") or {}
        return cls(
            pools=pools,
            drain_timeout=timedelta(seconds=int(raw["drainTimeoutSeconds"])),
            capacity_block_lead=timedelta(seconds=int(raw["capacityBlockLeadSeconds"])),
            condition_waits={
                **DEFAULT_CONDITION_WAITS,
                **{k: timedelta(seconds=int(v)) for k, v in waits.items() if k != "default"},
            },
            default_condition_wait=timedelta(seconds=int(waits.get("default", DEFAULT_CONDITION_WAIT.total_seconds()))),
        )


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


@dataclass(frozen=True)
class Outcome:
    """What one call did: `replaced`, `draining`, `queued` (another node of the pool first), `held` (a guard: the
    hourly cap, the Capacity Block or the pool's unhealthy threshold), `recovered` (its condition cleared before a
    repair started), `cordoned` (no replacement for this pool), `replacing` (already handed to the
    group), `left-to-eks` or `unknown-pool`, with the why."""

    action: str
    detail: str
    held_reason: str | None = None
    pods_left: tuple[str, ...] = field(default_factory=tuple)


# ------------------------------------------------------------------------------------------------------ detection
def failed_conditions(node: Mapping[str, Any]) -> list[str]:
    """The agent's conditions that are `False` on the node for a reason the loop repairs (not `ALERT_ONLY_REASONS`)."""
    return [c["type"] for c in _false_conditions(node)]


def _false_conditions(node: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    conditions = node.get("status", {}).get("conditions", []) or []
    return [
        c
        for c in conditions
        if c.get("type") in AGENT_CONDITIONS
        and c.get("status") == "False"
        and c.get("reason") not in ALERT_ONLY_REASONS
    ]


def due_conditions(node: Mapping[str, Any], now: datetime, config: RepairConfig) -> list[str]:
    """The repairable `False` conditions that have stayed so past their wait (`lastTransitionTime` is when the
    condition last changed status; a condition without one is taken as new)."""
    due = []
    for condition in _false_conditions(node):
        since = condition.get("lastTransitionTime")
        if since and now - _parse(str(since)) >= config.wait_for(condition["type"]):
            due.append(str(condition["type"]))
    return due


def pending(
    nodes: Iterable[Mapping[str, Any]], now: datetime, config: RepairConfig
) -> list[tuple[dict[str, Any], str]]:
    """Nodes the repair path has to act on, with the reason: labelled `failed` (reason from its annotation), or
    with an agent condition `False` past its wait. Called every pass, so a repair resumes after a restart."""
    out: list[tuple[dict[str, Any], str]] = []
    for node in nodes:
        metadata = node.get("metadata", {})
        if metadata.get("labels", {}).get(HEALTH_STATE_LABEL) == "failed":
            out.append((dict(node), metadata.get("annotations", {}).get(REASON_ANNOTATION, "gate")))
        elif conditions := due_conditions(node, now, config):
            out.append((dict(node), CONDITION_PREFIX + conditions[0]))
    return out


def recovered(node: Mapping[str, Any]) -> bool:
    """A node failed by an agent condition whose repair has not started, and whose condition is no longer `False`
    (gate and idle failures never recover by themselves: only a replacement or a person clears them)."""
    metadata = node.get("metadata", {})
    annotations = metadata.get("annotations") or {}
    reason = str(annotations.get(REASON_ANNOTATION, ""))
    if metadata.get("labels", {}).get(HEALTH_STATE_LABEL) != "failed" or not reason.startswith(CONDITION_PREFIX):
        return False
    if annotations.get(REPAIR_ANNOTATION, "") in STARTED_STATES:
        return False
    return reason.removeprefix(CONDITION_PREFIX) not in failed_conditions(node)


def unhealthy(node: Mapping[str, Any]) -> bool:
    """Whether the node counts against its pool's unhealthy threshold: labelled `failed`, or a repairable agent
    condition `False` (waiting or not)."""
    labels = node.get("metadata", {}).get("labels", {}) or {}
    return labels.get(HEALTH_STATE_LABEL) == "failed" or bool(failed_conditions(node))


def instance_id(node: Mapping[str, Any]) -> str | None:
    """The EC2 instance id from the node's providerID (`aws:///us-west-2a/i-0123456789abcdef0`)."""
    provider_id = str(node.get("spec", {}).get("providerID", ""))
    if not provider_id.startswith("aws://"):
        return None
    last = provider_id.rstrip("/").rsplit("/", 1)[-1]
    return last if last.startswith("i-") else None


# ---------------------------------------------------------------------------------------------------------- ledger
@dataclass
class Ledger:
    """Repairs started in the last hour per pool (and the one in progress), and the current holds per node."""

    repairs: list[dict[str, Any]]
    held: dict[str, str]

    @classmethod
    def load(cls, api: KubeApi) -> Ledger:
        config_map = api.read_config_map(NAMESPACE, LEDGER_CONFIG_MAP)
        text = ((config_map or {}).get("data") or {}).get(LEDGER_KEY)
        if not text:
            return cls(repairs=[], held={})
        raw = json.loads(text)
        return cls(repairs=list(raw.get("repairs", [])), held=dict(raw.get("held", {})))

    def save(self, api: KubeApi, now: datetime) -> None:
        self.repairs = [r for r in self.repairs if not r["done"] or _parse(r["started"]) > now - CAP_WINDOW]
        body = json.dumps({"repairs": self.repairs, "held": self.held}, sort_keys=True)
        api.write_config_map(NAMESPACE, LEDGER_CONFIG_MAP, {LEDGER_KEY: body})

    def in_progress(self, pool: str) -> dict[str, Any] | None:
        return next((r for r in self.repairs if r["pool"] == pool and not r["done"]), None)

    def started_within(self, pool: str, now: datetime) -> int:
        return sum(1 for r in self.repairs if r["pool"] == pool and _parse(r["started"]) > now - CAP_WINDOW)


def _parse(moment: str) -> datetime:
    return datetime.fromisoformat(moment)


# ----------------------------------------------------------------------------------------------- node operations
def _mark(api: KubeApi, node: str, reason: str, state: str) -> None:
    """Cordon, label `failed`, and record why and where the repair stands."""
    api.patch_node(
        node,
        {
            "metadata": {
                "labels": {HEALTH_STATE_LABEL: "failed"},
                "annotations": {REASON_ANNOTATION: reason, REPAIR_ANNOTATION: state},
            },
            "spec": {"unschedulable": True},
        },
    )


def _drained_already(pod: Mapping[str, Any]) -> bool:
    """Pods a drain leaves: DaemonSet pods (their controller ignores cordons), mirror pods of static manifests, and
    pods that have finished."""
    metadata = pod.get("metadata", {})
    if any(owner.get("kind") == "DaemonSet" for owner in metadata.get("ownerReferences", []) or []):
        return True
    if "kubernetes.io/config.mirror" in (metadata.get("annotations") or {}):
        return True
    return pod.get("status", {}).get("phase") in ("Succeeded", "Failed")


def drain(api: KubeApi, node: str) -> list[str]:
    """One round of evictions; returns the pods still on the node (`namespace/name`): refused by a
    PodDisruptionBudget (429), evicted but not gone yet, or terminating."""
    left: list[str] = []
    for pod in api.list_pods(field_selector=f"spec.nodeName={node}"):
        if _drained_already(pod):
            continue
        namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        key = f"{namespace}/{name}"
        if pod["metadata"].get("deletionTimestamp"):
            left.append(key)
            continue
        try:
            api.evict_pod(namespace, name)
        except KubeError as error:
            if error.status == 404:
                continue
            if error.status != 429:
                raise
        left.append(key)
    return left


# ----------------------------------------------------------------------------------------------------- the repair
def handle_failed(
    api: KubeApi,
    aws: AwsCalls,
    node: Mapping[str, Any],
    reason: str,
    now: datetime,
    *,
    config: RepairConfig,
    counters: Counters,
) -> Outcome:
    """Take the failed node's repair one step further (see the module docstring); safe to call on every pass."""
    name = node["metadata"]["name"]
    labels = node["metadata"].get("labels", {}) or {}
    state = (node["metadata"].get("annotations") or {}).get(REPAIR_ANNOTATION, "")
    pool = config.pools.get(labels.get(POOL_LABEL, ""))
    if pool is None:
        _mark(api, name, reason, "unknown-pool")
        return _log(Outcome("unknown-pool", f"{name}: no pool the loop knows; cordoned, nothing else"))
    if pool.kind == "aws" and pool.management == "managed" and reason.startswith(CONDITION_PREFIX):
        # Not logged: the node is listed on every pass until EKS has repaired it.
        return Outcome("left-to-eks", f"{name}: {reason} on managed pool {pool.name}: EKS node auto-repair's")
    if state == "replacing":
        return Outcome("replacing", f"{name}: handed to its Auto Scaling group already")
    if state not in STARTED_STATES:
        listed = api.list_nodes(label_selector=f"{POOL_LABEL}={pool.name}")
        count = sum(1 for n in listed if unhealthy(n) or n["metadata"]["name"] == name)
        if pool.over_threshold(count, len(listed)):
            detail = f"{count} of the pool's {len(listed)} nodes are unhealthy at once: more than it allows"
            failed = labels.get(HEALTH_STATE_LABEL) == "failed"
            return _hold(
                api, Ledger.load(api), name, reason, now, pool, ("unhealthy-threshold", detail), counters, mark=failed
            )
    if pool.kind == "hybrid" or pool.max_per_hour == 0:
        # On-prem servers are never replaced; a cap of 0 is the operator's choice of cordon-only, not a storm.
        return _cordon_only(api, name, reason, state, pool, counters)
    return _replace(api, aws, node, reason, now, pool, config, counters)


def _cordon_only(api: KubeApi, name: str, reason: str, state: str, pool: PoolSettings, counters: Counters) -> Outcome:
    """On-prem servers (and pools whose cap is 0): cordon, drain, count once, alert; never replaced."""
    if state != "cordon-only":
        counters.inc(REPAIRS_METRIC, {"pool": pool.name, "action": "cordon-only"})
    _mark(api, name, reason, "cordon-only")
    left = drain(api, name)
    detail = f"{name} ({pool.name}, {reason}): cordoned and drained, not replaced; follow {RUNBOOK}"
    if left:
        detail += f"; {len(left)} pods still leaving: {', '.join(left)}"
    return _log(Outcome("cordoned", detail, pods_left=tuple(left)))


def _replace(
    api: KubeApi,
    aws: AwsCalls,
    node: Mapping[str, Any],
    reason: str,
    now: datetime,
    pool: PoolSettings,
    config: RepairConfig,
    counters: Counters,
) -> Outcome:
    name = node["metadata"]["name"]
    ledger = Ledger.load(api)
    current = ledger.in_progress(pool.name)
    if current is not None and current["node"] != name and not _still_there(api, pool.name, current["node"]):
        current["done"] = True
        current = None
    if current is None:
        hold = _hold_reason(aws, now, pool, ledger, config)
        if hold is not None:
            return _hold(api, ledger, name, reason, now, pool, hold, counters)
        current = {"pool": pool.name, "node": name, "reason": reason, "started": now.isoformat(), "done": False}
        ledger.repairs.append(current)
    elif current["node"] != name:
        # Queued, not held: one repair at a time is the normal pace, not a guard tripping (no storm alert).
        _mark(api, name, reason, "queued")
        detail = f"{name}: queued, another node of pool {pool.name}, {current['node']}, is being repaired"
        return _log(Outcome("queued", detail))
    ledger.held.pop(name, None)
    _mark(api, name, reason, "draining")
    ledger.save(api, now)
    left = drain(api, name)
    deadline = _parse(current["started"]) + config.drain_timeout
    if left and now < deadline:
        detail = f"{name}: draining, {len(left)} pods left until {deadline.isoformat()}: {', '.join(left)}"
        return _log(Outcome("draining", detail, pods_left=tuple(left)))
    instance = instance_id(node)
    if instance is None:
        return _log(Outcome("held", f"{name}: no EC2 instance id in its providerID; cordoned only", "no-instance"))
    try:
        aws.mark_unhealthy(instance)
    except AwsError as error:
        return _log(Outcome("draining", f"{name}: drained; {error}; retried on the next pass"))
    _mark(api, name, reason, "replacing")
    current["done"] = True
    ledger.save(api, now)
    counters.inc(REPAIRS_METRIC, {"pool": pool.name, "action": "replace"})
    detail = f"{name} ({instance}, {pool.name}, {reason}): its Auto Scaling group replaces it"
    if left:
        detail += f"; the drain deadline passed with {len(left)} pods left: {', '.join(left)}"
    return _log(Outcome("replaced", detail, pods_left=tuple(left)))


def _still_there(api: KubeApi, pool: str, node: str) -> bool:
    """Whether the node a pool's repair was started on still exists (a scale-in may have taken it meanwhile)."""
    return any(n["metadata"]["name"] == node for n in api.list_nodes(label_selector=f"{POOL_LABEL}={pool}"))


def _hold_reason(
    aws: AwsCalls, now: datetime, pool: PoolSettings, ledger: Ledger, config: RepairConfig
) -> tuple[str, str] | None:
    """Why a new repair may not start now, or None: the hourly cap, or a Capacity Block that cannot take a
    replacement (not active, or ending before one would be ready)."""
    started = ledger.started_within(pool.name, now)
    if started >= pool.max_per_hour:
        return "hourly-cap", f"{started} repairs started in the last hour, the cap is {pool.max_per_hour}"
    if pool.capacity_block_id:
        try:
            block = aws.capacity_block(pool.capacity_block_id)
        except AwsError as error:
            return "capacity-block", f"could not read the Capacity Block: {error}"
        if block is None or block.state != "active":
            state = "unknown to EC2" if block is None else block.state
            return "capacity-block", f"Capacity Block {pool.capacity_block_id} is {state}: no replacement can land"
        if block.end is not None and block.end - now < config.capacity_block_lead:
            return "capacity-block", (
                f"Capacity Block {pool.capacity_block_id} ends {block.end.isoformat()}, before a replacement would "
                "be ready: the node is kept"
            )
    return None


def _hold(
    api: KubeApi,
    ledger: Ledger,
    name: str,
    reason: str,
    now: datetime,
    pool: PoolSettings,
    hold: tuple[str, str],
    counters: Counters,
    *,
    mark: bool = True,
) -> Outcome:
    """Keep the node as it is, cordoned (no drain) when `mark`, and count the hold once. The unhealthy threshold
    does not cordon a node the agent flagged: a pool-wide fault would otherwise cordon the whole pool."""
    held_reason, detail = hold
    if ledger.held.get(name) != held_reason:
        counters.inc(REPAIRS_HELD_METRIC, {"pool": pool.name, "reason": held_reason})
        ledger.held[name] = held_reason
    if mark:
        _mark(api, name, reason, f"held:{held_reason}")
    ledger.save(api, now)
    return _log(Outcome("held", f"{name} ({pool.name}, {reason}): held, {detail}", held_reason))


def _log(outcome: Outcome) -> Outcome:
    LOG.info("repair %s: %s", outcome.action, outcome.detail)
    return outcome


def counter_series(config: RepairConfig) -> list[tuple[str, dict[str, str]]]:
    """Every series the repair path may count, per pool: the loop starts them at 0, so the first repair or hold is
    an increase PromQL sees (`increase` over a series that appears at 1 reads 0)."""
    series: list[tuple[str, dict[str, str]]] = []
    for pool in config.pools.values():
        action = "cordon-only" if pool.kind == "hybrid" else "replace"
        series.append((REPAIRS_METRIC, {"pool": pool.name, "action": action}))
        holds = ["unhealthy-threshold"]
        if pool.kind != "hybrid":
            holds += ["hourly-cap"] + (["capacity-block"] if pool.capacity_block_id else [])
        series += [(REPAIRS_HELD_METRIC, {"pool": pool.name, "reason": reason}) for reason in holds]
    return series


# ------------------------------------------------------------------------------------------------- the hand-off
class RepairPath:
    """What the loop holds: called with a node the moment its gate or idle check fails (the loop's hand-off,
    `(api, node, reason, now)` with `now` in Unix seconds), and `resume` on every pass, which takes each failed node
    (and each node the agent marks unhealthy) one step further. One node's error is logged and retried next pass."""

    def __init__(self, aws: AwsCalls, config: RepairConfig, counters: Counters) -> None:
        self.aws, self.config, self.counters = aws, config, counters
        for labels in counter_series(config):
            counters.inc(labels[0], labels[1], 0)

    @classmethod
    def from_environment(cls, counters: Counters, path: Path = CONFIG_PATH) -> RepairPath:
        """Settings from the mounted ConfigMap, AWS clients from the pod's Pod Identity credentials."""
        return cls(Boto3Calls.from_environment(), RepairConfig.from_json(path.read_text()), counters)

    def __call__(self, api: KubeApi, node: dict[str, Any], reason: str, now: float) -> None:
        self._step(api, node, reason, now)

    def resume(self, api: KubeApi, nodes: Iterable[Mapping[str, Any]], now: float) -> list[Outcome]:
        listed = list(nodes)
        moment = datetime.fromtimestamp(now, UTC)
        outcomes = [self._recover(api, node, moment) for node in listed if recovered(node)]
        back = {o.detail.split(":", 1)[0] for o in outcomes}
        due = [
            (node, reason)
            for node, reason in pending(listed, moment, self.config)
            if node["metadata"]["name"] not in back
        ]
        outcomes += [o for node, reason in due if (o := self._step(api, node, reason, now)) is not None]
        self._forget_gone(api, {n["metadata"]["name"] for n in listed}, now)
        return outcomes

    def _recover(self, api: KubeApi, node: Mapping[str, Any], now: datetime) -> Outcome:
        """The condition that failed the node cleared before its repair started: uncordon it, label it passed."""
        name = node["metadata"]["name"]
        reason = (node["metadata"].get("annotations") or {}).get(REASON_ANNOTATION, "")
        api.patch_node(
            name,
            {
                "metadata": {
                    "labels": {HEALTH_STATE_LABEL: "passed"},
                    "annotations": {REASON_ANNOTATION: None, REPAIR_ANNOTATION: None},
                },
                "spec": {"unschedulable": False},
            },
        )
        ledger = Ledger.load(api)
        if ledger.held.pop(name, None) is not None:
            ledger.save(api, now)
        return _log(Outcome("recovered", f"{name}: {reason} cleared before a repair started; uncordoned, passed"))

    def _forget_gone(self, api: KubeApi, names: set[str], now: float) -> None:
        """Drop the holds of nodes that no longer exist, so the ledger does not grow with every node ever held."""
        ledger = Ledger.load(api)
        if any(name not in names for name in ledger.held):
            ledger.held = {name: why for name, why in ledger.held.items() if name in names}
            ledger.save(api, datetime.fromtimestamp(now, UTC))

    def _step(self, api: KubeApi, node: Mapping[str, Any], reason: str, now: float) -> Outcome | None:
        moment = datetime.fromtimestamp(now, UTC)
        try:
            return handle_failed(api, self.aws, node, reason, moment, config=self.config, counters=self.counters)
        except KubeError as error:
            LOG.warning("repair of %s failed this pass, retrying: %s", node["metadata"]["name"], error)
            return None
