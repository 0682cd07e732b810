"""One pass of the health loop: gate checks on new GPU nodes, idle checks on passed ones, and the verdicts of the
check pods that ended.

Everything the loop knows lives on Kubernetes objects, so a restarted loop resumes where the last one stopped: the
startup taint marks a node not yet admitted; the node's state label says pending, passed or failed; annotations
record when it was last checked and last seen busy; a check pod in the loop's namespace is a check under way (its
labels say which node and kind, its creation time when it began). docs/operations.md, "The health loop".
"""

from __future__ import annotations

import calendar
import copy
import hashlib
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from programs.node_health import names
from programs.node_health.kube import KubeApi, KubeError
from programs.node_health.metrics import Metrics

#: What the loop calls with a node that failed its check, after cordoning and labelling it: the repair path.
HandOff = Callable[[KubeApi, dict[str, Any], str, float], None]
#: What the loop calls once per pass with every node, so the repair path takes each failed node a step further.
Resume = Callable[[KubeApi, list[dict[str, Any]], float], object]
GATE, IDLE = "gate", "idle"
CHECK_SELECTOR = names.CHECK_KIND_LABEL


@dataclass(frozen=True)
class Settings:
    """The loop's configuration (the `config.json` of its ConfigMap, planned by the stack)."""

    #: Per pool whose nodes are checked: the check pod without its name and node (its spec is planned once).
    templates: Mapping[str, dict[str, Any]]
    idle_check_seconds: float | None
    max_concurrent_checks: int
    check_timeout_seconds: float
    schedule_timeout_seconds: float
    poll_seconds: float = 30.0
    metrics_port: int = 9469

    @classmethod
    def from_json(cls, text: str) -> Settings:
        raw = json.loads(text)
        idle = raw.get("idleCheckSeconds")
        return cls(
            templates=dict(raw["pools"]),
            idle_check_seconds=float(idle) if idle else None,
            max_concurrent_checks=int(raw["maxConcurrentChecks"]),
            check_timeout_seconds=float(raw["checkTimeoutSeconds"]),
            schedule_timeout_seconds=float(raw["scheduleTimeoutSeconds"]),
            poll_seconds=float(raw.get("pollSeconds", 30)),
            metrics_port=int(raw.get("metricsPort", 9469)),
        )


@dataclass(frozen=True)
class Verdict:
    """A check pod's outcome: `passed`, `failed` (the node is faulty) or `cancelled` (the check could not judge the
    node: an idle check whose pod lost the race for the GPUs to real work)."""

    result: str
    reason: str


def parse_time(stamp: str | None) -> float | None:
    """Seconds since the epoch of an RFC 3339 UTC time (`2026-11-27T05:00:00Z`), as the API writes them."""
    if not stamp:
        return None
    try:
        return float(calendar.timegm(time.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S")))
    except ValueError:
        return None


def format_time(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _meta(obj: Mapping[str, Any]) -> dict[str, Any]:
    return dict(obj.get("metadata") or {})


def _labels(obj: Mapping[str, Any]) -> dict[str, str]:
    return dict(_meta(obj).get("labels") or {})


def _annotations(obj: Mapping[str, Any]) -> dict[str, str]:
    return dict(_meta(obj).get("annotations") or {})


def has_startup_taint(node: Mapping[str, Any]) -> bool:
    return any(t.get("key") == names.STARTUP_TAINT_KEY for t in (node.get("spec") or {}).get("taints") or [])


def _judged(node: Mapping[str, Any]) -> bool:
    """A node whose gate ended (passed or failed, with the time of its check) but still carries the startup taint."""
    return (
        has_startup_taint(node)
        and _labels(node).get(names.HEALTH_STATE_LABEL) in (names.PASSED, names.FAILED)
        and bool(_annotations(node).get(names.CHECKED_AT_ANNOTATION))
    )


def startup_taint_patch(node: Mapping[str, Any], state: str) -> list[dict[str, Any]]:
    """The JSON patch (RFC 6902) that takes the startup taint off `node` as listed: `test` that the taint is still at
    its index, then `remove` it (passed) or `replace` it with the failed status taint (failed). `spec.taints` is a
    list without a merge key, so a merge patch would write the whole list and drop taints added meanwhile."""
    taints = (node.get("spec") or {}).get("taints") or []
    ops: list[dict[str, Any]] = []
    # from the last index down, so each index still points at its taint when its operation runs
    for index in reversed([i for i, t in enumerate(taints) if t.get("key") == names.STARTUP_TAINT_KEY]):
        path = f"/spec/taints/{index}"
        ops.append({"op": "test", "path": path, "value": taints[index]})
        ops.append({"op": "remove", "path": path})
    if state == names.FAILED and ops:
        failed = {"key": names.FAILED_TAINT_KEY, "value": "true", "effect": "NoSchedule"}
        if not any(t.get("key") == names.FAILED_TAINT_KEY for t in taints):
            ops.append({"op": "add", "path": "/spec/taints/-", "value": failed})
    return ops


def uses_gpus(pod: Mapping[str, Any]) -> bool:
    """A pod that asks for an NVIDIA device (`nvidia.com/gpu`, or a MIG profile's `nvidia.com/mig-...`), or for
    devices through resource claims (on a DRA pool its GPUs come that way; any claim counts, to be safe)."""
    spec = pod.get("spec") or {}
    if spec.get("resourceClaims"):
        return True
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        resources = container.get("resources") or {}
        for amounts in (resources.get("limits") or {}, resources.get("requests") or {}):
            if any(str(name).startswith("nvidia.com/") for name in amounts):
                return True
    return False


def check_pod(template: Mapping[str, Any], node: str, kind: str, now: float) -> dict[str, Any]:
    """The pool's check pod pinned to `node` (node affinity on the node's name, as DaemonSets pin their pods), with
    the labels and annotations that let a restarted loop find it. The name carries a hash of the node's name, so it
    fits 63 characters whatever the node is called."""
    pod = copy.deepcopy(dict(template))
    digest = hashlib.sha256(node.encode()).hexdigest()[:10]
    meta = pod.setdefault("metadata", {})
    meta["name"] = f"{kind}-{digest}-{int(now)}"
    meta["namespace"] = names.NODE_HEALTH_NAMESPACE
    meta.setdefault("labels", {})[names.CHECK_KIND_LABEL] = kind
    meta.setdefault("annotations", {})[names.CHECK_NODE_ANNOTATION] = node
    if kind == IDLE:
        # a bare pod blocks cluster-autoscaler's scale-down; an idle check must not keep an unneeded node alive
        meta["annotations"][names.SAFE_TO_EVICT_ANNOTATION] = "true"
    spec = pod.setdefault("spec", {})
    spec["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]
            }
        }
    }
    return pod


def _terminated(pod: Mapping[str, Any]) -> dict[str, Any]:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        ended = (status.get("state") or {}).get("terminated")
        if ended:
            return dict(ended)
    return {}


def _message(ended: Mapping[str, Any]) -> str:
    """The check's one-line JSON termination message (`{"result": ..., "step": ..., "detail": ...}`), said plainly."""
    text = str(ended.get("message") or "").strip()
    try:
        found = json.loads(text)
    except ValueError:
        return text[:300] or f"exit code {ended.get('exitCode')}"
    if isinstance(found, dict):
        return f"{found.get('step', '?')}: {found.get('detail', '')}".strip()
    return text[:300]


def _unschedulable(pod: Mapping[str, Any]) -> str | None:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return str(condition.get("message") or condition.get("reason") or "not scheduled")
    return None


def judge(pod: Mapping[str, Any], kind: str, now: float, settings: Settings) -> Verdict | None:
    """The outcome of a check pod, or None while it is still within its time. A pod that never got scheduled within
    `schedule_timeout_seconds` fails a gate (the node cannot host a pod asking for its own devices: a device that
    never registered) and cancels an idle check (GPU work took the node first). A check still running past
    `check_timeout_seconds` after it started has hung: the node fails."""
    status = pod.get("status") or {}
    phase = status.get("phase") or "Pending"
    created = parse_time(_meta(pod).get("creationTimestamp")) or now
    if phase == "Succeeded":
        return Verdict(names.PASSED, _message(_terminated(pod)) or "check passed")
    if phase == "Failed":
        ended = _terminated(pod)
        refused = str(status.get("reason") or "")
        if not ended and kind == IDLE and refused.startswith("OutOf"):
            # the kubelet refused the pod: GPU work took the devices between scheduling and admission
            return Verdict("cancelled", f"idle check refused by the kubelet ({refused}): the node's GPUs are in use")
        reason = _message(ended) if ended else str(status.get("reason") or status.get("message") or "check failed")
        if status.get("reason") == "DeadlineExceeded":
            reason = f"check timed out after {settings.check_timeout_seconds:g}s"
        return Verdict(names.FAILED, reason)
    if phase == "Pending" and not (pod.get("spec") or {}).get("nodeName"):
        if now - created < settings.schedule_timeout_seconds:
            return None
        why = _unschedulable(pod) or "not scheduled"
        if kind == IDLE:
            return Verdict("cancelled", f"idle check not scheduled ({why}): the node's GPUs are in use")
        return Verdict(names.FAILED, f"check pod not scheduled after {settings.schedule_timeout_seconds:g}s: {why}")
    begun = parse_time(status.get("startTime")) or created
    if now - begun >= settings.check_timeout_seconds:
        return Verdict(names.FAILED, f"check timed out after {settings.check_timeout_seconds:g}s")
    return None


class HealthLoop:
    """The loop's passes over the cluster; `hand_off` is the repair path for failed nodes."""

    def __init__(
        self,
        api: KubeApi,
        settings: Settings,
        hand_off: HandOff,
        metrics: Metrics | None = None,
        resume: Resume | None = None,
    ) -> None:
        self.api = api
        self.settings = settings
        self.hand_off = hand_off
        self.metrics = metrics or Metrics()
        self.resume = resume

    # ------------------------------------------------------------------------------------------------ the pass
    def run_once(self, now: float) -> None:
        """Judge the running checks, then start gate checks (new nodes first) and idle checks, at most
        `max_concurrent_checks` running at once."""
        nodes = {n["metadata"]["name"]: n for n in self.api.list_nodes() if self._pool(n) in self.settings.templates}
        checks = self.api.list_pods(names.NODE_HEALTH_NAMESPACE, label_selector=CHECK_SELECTOR)
        running: dict[str, dict[str, Any]] = {}
        for pod in checks:
            node_name = _annotations(pod).get(names.CHECK_NODE_ANNOTATION, "")
            kind = _labels(pod).get(names.CHECK_KIND_LABEL, GATE)
            node = nodes.get(node_name)
            if node is None:  # the node left: its check means nothing now
                self._delete(pod)
                continue
            verdict = judge(pod, kind, now, self.settings)
            if verdict is None:
                running[node_name] = pod
                continue
            self._delete(pod)
            self._conclude(node, kind, verdict, now)
            del nodes[node_name]  # judged just now: not due again in this pass
        self._unsettled(nodes, running)
        busy = self._busy_nodes()
        due = [(GATE, n) for n in self._gate_due(nodes, running)]
        due += [(IDLE, n) for n in self._idle_due(nodes, running, busy, now)]
        for kind, node in due:
            if len(running) >= self.settings.max_concurrent_checks:
                break
            name = node["metadata"]["name"]
            try:
                self._start(node, kind, now)
            except KubeError as error:
                print(f"node-health: cannot start the {kind} check of {name}: {error}", flush=True)
                continue
            running[name] = node
        if self.resume is not None:
            self.resume(self.api, self.api.list_nodes(), now)
        self._export(now, len(running))

    def _pool(self, node: Mapping[str, Any]) -> str:
        return _labels(node).get(names.POOL_LABEL, "")

    def _gate_due(self, nodes: Mapping[str, dict[str, Any]], running: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Nodes still carrying the startup taint, not failed, with no check under way: oldest first."""
        due = [
            node
            for name, node in nodes.items()
            if name not in running
            and has_startup_taint(node)
            and not _judged(node)
            and _labels(node).get(names.HEALTH_STATE_LABEL) != names.FAILED
        ]
        return sorted(due, key=lambda n: (_meta(n).get("creationTimestamp") or "", n["metadata"]["name"]))

    def _busy_nodes(self) -> set[str]:
        """Nodes running a pod that uses GPUs (the loop's own check pods aside)."""
        pods = self.api.list_pods(None, field_selector="status.phase!=Succeeded,status.phase!=Failed")
        return {
            str((p.get("spec") or {}).get("nodeName"))
            for p in pods
            if (p.get("spec") or {}).get("nodeName")
            and _meta(p).get("namespace") != names.NODE_HEALTH_NAMESPACE
            and uses_gpus(p)
        }

    def _idle_due(
        self, nodes: Mapping[str, dict[str, Any]], running: Mapping[str, Any], busy: set[str], now: float
    ) -> list[dict[str, Any]]:
        """Passed nodes with no GPU pod and neither a GPU pod nor a check for `idle_check_seconds`, longest idle
        first. A busy node's `busy-at` annotation is refreshed (at most every tenth of the interval, so the loop does
        not write every node on every pass)."""
        interval = self.settings.idle_check_seconds
        if interval is None:
            return []
        due: list[tuple[float, dict[str, Any]]] = []
        for name, node in nodes.items():
            labels, notes = _labels(node), _annotations(node)
            if labels.get(names.HEALTH_STATE_LABEL) != names.PASSED or has_startup_taint(node):
                continue
            if (node.get("spec") or {}).get("unschedulable"):
                continue  # cordoned by someone: drained or under repair, not idle capacity
            busy_at = parse_time(notes.get(names.BUSY_AT_ANNOTATION))
            if name in busy:
                if busy_at is None or now - busy_at >= interval / 10:
                    self._annotate(name, {names.BUSY_AT_ANNOTATION: format_time(now)})
                continue
            if name in running:
                continue
            last = max(
                busy_at or 0.0,
                parse_time(notes.get(names.CHECKED_AT_ANNOTATION)) or 0.0,
                parse_time(_meta(node).get("creationTimestamp")) or 0.0,
            )
            if now - last >= interval:
                due.append((last, node))
        return [node for _, node in sorted(due, key=lambda item: (item[0], item[1]["metadata"]["name"]))]

    # ----------------------------------------------------------------------------------------------- actions
    def _start(self, node: Mapping[str, Any], kind: str, now: float) -> None:
        name = node["metadata"]["name"]
        template = self.settings.templates[self._pool(node)]
        self.api.create_pod(names.NODE_HEALTH_NAMESPACE, check_pod(template, name, kind, now))
        if _labels(node).get(names.HEALTH_STATE_LABEL) != names.PENDING:
            self.api.patch_node(name, {"metadata": {"labels": {names.HEALTH_STATE_LABEL: names.PENDING}}})
        print(f"node-health: {kind} check of {name} started", flush=True)

    def _conclude(self, node: Mapping[str, Any], kind: str, verdict: Verdict, now: float) -> None:
        name = node["metadata"]["name"]
        pool = self._pool(node)
        print(f"node-health: {kind} check of {name}: {verdict.result} ({verdict.reason})", flush=True)
        if verdict.result == "cancelled":
            # not a judgement of the node: it stays passed, and counts as checked so the next try waits its turn
            self.api.patch_node(
                name,
                {
                    "metadata": {
                        "labels": {names.HEALTH_STATE_LABEL: names.PASSED},
                        "annotations": {names.BUSY_AT_ANNOTATION: format_time(now)},
                    }
                },
            )
            return
        self.metrics.inc(names.CHECKS_METRIC, {"pool": pool, "kind": kind, "result": verdict.result})
        notes = {names.CHECKED_AT_ANNOTATION: format_time(now), names.REASON_ANNOTATION: verdict.reason[:1000]}
        if verdict.result == names.PASSED:
            labels = {names.HEALTH_STATE_LABEL: names.PASSED}
            self.api.patch_node(name, {"metadata": {"labels": labels, "annotations": notes}})
            self._settle_startup_taint(node, names.PASSED)
            return
        # failed: cordoned first, so nothing new lands on it whatever repair does next; the startup taint becomes the
        # status taint, so cluster-autoscaler no longer counts the node unready (docs/operations.md, "The health loop")
        self.api.patch_node(
            name,
            {
                "metadata": {"labels": {names.HEALTH_STATE_LABEL: names.FAILED}, "annotations": notes},
                "spec": {"unschedulable": True},
            },
        )
        self._settle_startup_taint(node, names.FAILED)
        self.hand_off(self.api, dict(node), verdict.reason, now)

    def _settle_startup_taint(self, node: Mapping[str, Any], state: str) -> None:
        """Take the startup taint off a judged node: removed when it passed, replaced by the failed status taint when
        it failed. A JSON patch that first tests the taint at its index, so a taint another controller added since
        the node was listed (cluster-autoscaler's `ToBeDeletedByClusterAutoscaler`) is never written over; a refused
        patch is tried again on the next pass (`_unsettled`)."""
        name = node["metadata"]["name"]
        try:
            self.api.json_patch_node(name, startup_taint_patch(node, state))
        except KubeError as error:
            print(f"node-health: the startup taint of {name} stays until the next pass: {error}", flush=True)

    def _unsettled(self, nodes: Mapping[str, dict[str, Any]], running: Mapping[str, Any]) -> None:
        """Judged nodes whose startup taint an earlier pass could not settle (its patch was refused)."""
        for name, node in nodes.items():
            state = _labels(node).get(names.HEALTH_STATE_LABEL)
            if name not in running and state in (names.PASSED, names.FAILED) and _judged(node):
                self._settle_startup_taint(node, state)

    def _annotate(self, name: str, notes: Mapping[str, str]) -> None:
        try:
            self.api.patch_node(name, {"metadata": {"annotations": dict(notes)}})
        except KubeError as error:
            print(f"node-health: cannot annotate {name}: {error}", flush=True)

    def _delete(self, pod: Mapping[str, Any]) -> None:
        try:
            self.api.delete_pod(names.NODE_HEALTH_NAMESPACE, pod["metadata"]["name"])
        except KubeError as error:
            if error.status != 404:
                raise

    def _export(self, now: float, running: int) -> None:
        # a gated pool's every state, and every pool's `failed`, start at 0: a series that fell to 0 says so, rather
        # than vanish and leave an alarm reading the minimum of what it sent before (docs/operations.md)
        states: dict[tuple[tuple[str, str], ...], float] = {
            (("pool", pool), ("state", state)): 0.0
            for pool in self.settings.templates
            for state in (names.PENDING, names.PASSED, names.FAILED)
        }
        conditions: dict[tuple[tuple[str, str], ...], float] = {}
        for node in self.api.list_nodes():
            pool = self._pool(node)
            if not pool:
                continue
            # every pool's nodes, gated or not: the agent runs on every EC2 node; a condition the node reports
            # True counts 0, so its pool's series falls back to 0 when the condition clears
            for condition in (node.get("status") or {}).get("conditions") or []:
                if condition.get("type") in names.AGENT_CONDITIONS:
                    key = (("condition", str(condition["type"])), ("pool", pool))
                    conditions[key] = conditions.get(key, 0.0) + (condition.get("status") == "False")
            state = _labels(node).get(names.HEALTH_STATE_LABEL) or names.PENDING
            if pool not in self.settings.templates:
                # an ungated pool's node is failed (by the agent's conditions) or not: only `failed` counts there
                states.setdefault((("pool", pool), ("state", names.FAILED)), 0.0)
                if state != names.FAILED:
                    continue
            key = (("pool", pool), ("state", state))
            states[key] = states.get(key, 0.0) + 1
        self.metrics.set_gauge(names.NODES_METRIC, states)
        self.metrics.set_gauge(names.CONDITIONS_FALSE_METRIC, conditions)
        self.metrics.set_gauge(names.CHECKS_RUNNING_METRIC, {(): float(running)})
        self.metrics.set_gauge(names.LAST_PASS_METRIC, {(): now})
