"""The test pods `blueprint verify` starts (built by `components.planning.check_pods`), and the session that
creates, waits for and always deletes them.

Every object it creates carries `app.kubernetes.io/managed-by: blueprint-verify` and `blueprint-verify/run: <id>`,
so a run's leftovers can be found (`kubectl delete pods -A -l blueprint-verify/run=<id>`) even if the process was
killed outright. `PodSession.cleanup` deletes everything the session created; the runner calls it in a `finally`,
so a failing check, a timeout and Ctrl-C (KeyboardInterrupt) all end with the pods gone.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from blueprint.verify.kube import KubeApi, KubeError
from blueprint.verify.model import CheckTimeout, PodNotRunning, PodsStopped
from components.config import LustreWorkloadDirectories

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "blueprint-verify"
RUN_LABEL = "blueprint-verify/run"
CHECK_LABEL = "blueprint-verify/check"
NODE_NAME_LABEL = "kubernetes.io/hostname"
POLL_SECONDS = 5.0


#: Container `waiting` reasons after which the kubelet will not start the container without a change to the pod or
#: the registry (Kubernetes, "Images": ImagePullBackOff, and kubelet's image and container-config errors).
NEVER_STARTS = frozenset(
    {"ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName", "CreateContainerConfigError", "CreateContainerError"}
)


@dataclass(frozen=True)
class Budget:
    """How long test pods may take: to start (scheduled, image pulled) and, once started, to run."""

    start_seconds: float
    run_seconds: float


@dataclass(frozen=True)
class PodOutcome:
    name: str
    phase: str
    log: str
    node: str | None


@dataclass
class PodSession:
    """Creates test pods in one run, waits for them with a deadline, and deletes all of them at the end."""

    api: KubeApi
    run_id: str
    namespace: str
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    created_pods: list[tuple[str, str]] = field(default_factory=list)
    created_secrets: list[tuple[str, str]] = field(default_factory=list)

    def labels(self, check: str) -> dict[str, str]:
        return {MANAGED_BY_LABEL: MANAGED_BY, RUN_LABEL: self.run_id, CHECK_LABEL: check}

    def name(self, check: str, suffix: str) -> str:
        """`bpv-<check>-<run>-<suffix>`, cut to the 63 characters a pod name's DNS label allows."""
        return f"bpv-{check}-{self.run_id}-{suffix}".lower().replace("_", "-")[:63].rstrip("-")

    def create_pod(self, body: dict[str, Any], namespace: str | None = None) -> str:
        ns = namespace or self.namespace
        name = body["metadata"]["name"]
        self.created_pods.append((ns, name))  # recorded first: a create that times out may still have happened
        self.api.create_pod(ns, body)
        return name

    def create_secret(self, body: dict[str, Any], namespace: str | None = None) -> None:
        ns = namespace or self.namespace
        self.created_secrets.append((ns, body["metadata"]["name"]))
        self.api.create_secret(ns, body)

    def wait(
        self,
        names: Sequence[str],
        budget: Budget,
        until: str = "done",
        namespace: str | None = None,
        watch: Sequence[str] = (),
    ) -> dict[str, dict[str, Any]]:
        """Poll the pods until each has finished (`until="done"`: Succeeded or Failed) or runs with its containers
        ready (`until="ready"`), while every pod in `watch` (workers a launcher needs) keeps running; raise the
        first pod's PodsStopped (`wait_each`) as soon as it happens."""
        found = self.wait_each(names, budget, until, namespace, watch, stop_early=True)
        for outcome in found.values():
            if isinstance(outcome, PodsStopped):
                raise outcome
        return {name: pod for name, pod in found.items() if not isinstance(pod, PodsStopped)}

    def wait_each(
        self,
        names: Sequence[str],
        budget: Budget,
        until: str = "done",
        namespace: str | None = None,
        watch: Sequence[str] = (),
        stop_early: bool = False,
    ) -> dict[str, dict[str, Any] | PodsStopped]:
        """Each pod's last state, or why it stopped: pods run at once and are judged one by one, so one that cannot
        start leaves the others' results standing (`stop_early`: return at the first stop).

        Each pod has `budget.start_seconds` from the start of the wait to start (be scheduled and pull its image),
        then `budget.run_seconds` from its start: CheckTimeout past either. A pod that can never start
        (`never_starts`), a pod awaited `ready` that ended, and a watched pod that ended (then every pod waited for
        stops) give PodNotRunning at once."""
        ns = namespace or self.namespace
        pending = list(names)
        watched = [w for w in watch if w not in pending]
        found: dict[str, dict[str, Any] | PodsStopped] = {}
        begun = self.clock()
        started: dict[str, float] = {}
        while True:
            now = self.clock()
            for name in [*pending, *watched]:
                pod = self.api.read_pod(ns, name)
                stopped: PodsStopped | None = self._stopped(ns, name, pod, until, name in watched)
                if stopped is not None and name in watched:
                    return {n: stopped for n in pending} | found
                if name not in started and has_started(pod):
                    started[name] = now
                if stopped is None and not _reached(pod, until):
                    if name not in started and now - begun >= budget.start_seconds:
                        stopped = CheckTimeout(
                            f"{name} not started after {budget.start_seconds:g}s (scheduling and image pull, "
                            f"--pull-timeout): {describe(pod)}"
                        )
                    elif name in started and now - started[name] >= budget.run_seconds:
                        stopped = CheckTimeout(
                            f"{name} still running after {budget.run_seconds:g}s (--timeout): {describe(pod)}"
                        )
                    else:
                        continue
                found[name] = pod if stopped is None else stopped
                pending.remove(name)
                if stopped is not None and stop_early:
                    return found
            if not pending:
                return found
            self.sleep(POLL_SECONDS)

    def _stopped(
        self, namespace: str, name: str, pod: Mapping[str, Any], until: str, watched: bool
    ) -> PodNotRunning | None:
        stuck = never_starts(pod)
        if stuck:
            return PodNotRunning(f"{name} cannot start: {stuck}")
        if (watched or until == "ready") and _phase(pod) in ("Succeeded", "Failed"):
            role = "worker " if watched else ""
            return PodNotRunning(f"{role}{name} ended {describe(pod)}: {self._tail(namespace, name)}")
        return None

    def _tail(self, namespace: str, name: str) -> str:
        try:
            return self.api.pod_log(namespace, name)[-300:].strip() or "no log"
        except KubeError:
            return "no log"

    def run(
        self, body: dict[str, Any], budget: Budget, namespace: str | None = None, watch: Sequence[str] = ()
    ) -> PodOutcome:
        """Create one pod, wait until it ends (while the `watch` pods keep running), return its phase and log."""
        ns = namespace or self.namespace
        name = self.create_pod(body, ns)
        pod = self.wait([name], budget, namespace=ns, watch=watch)[name]
        return PodOutcome(name, _phase(pod), self.api.pod_log(ns, name), pod.get("spec", {}).get("nodeName"))

    def cleanup(self) -> list[str]:
        """Delete every pod and secret this session created; returns what could not be deleted (said on stderr)."""
        failed: list[str] = []
        for ns, name in reversed(self.created_pods):
            try:
                self.api.delete_pod(ns, name)
            except KubeError as error:
                failed.append(f"pod {ns}/{name}: {error}")
        for ns, name in reversed(self.created_secrets):
            try:
                self.api.delete_secret(ns, name)
            except KubeError as error:
                failed.append(f"secret {ns}/{name}: {error}")
        self.created_pods.clear()
        self.created_secrets.clear()
        return failed


def _phase(pod: Mapping[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def _reached(pod: Mapping[str, Any], until: str) -> bool:
    phase = _phase(pod)
    if until == "done":
        return phase in ("Succeeded", "Failed")
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return phase == "Running" and bool(statuses) and all(s.get("ready") for s in statuses)


def has_started(pod: Mapping[str, Any]) -> bool:
    """Past scheduling and the image pull: the pod runs or ended, or a container has run."""
    if _phase(pod) != "Pending":
        return True
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return any({"running", "terminated"} & set(s.get("state") or {}) for s in statuses)


def never_starts(pod: Mapping[str, Any]) -> str | None:
    """Why a Pending pod will never start, or None: a container waiting for good (`NEVER_STARTS`), or the scheduler
    finding no node (`PodScheduled` False, `Unschedulable`: verify's pods name their node, so no scale-up helps)."""
    if _phase(pod) != "Pending":
        return None
    status = pod.get("status") or {}
    for container in status.get("containerStatuses") or []:
        waiting = (container.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in NEVER_STARTS:
            return f"{waiting['reason']}: {waiting.get('message') or ''}".rstrip(": ")
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("reason") == "Unschedulable":
            return f"Unschedulable: {condition.get('message') or ''}".rstrip(": ")
    return None


def describe(pod: Mapping[str, Any]) -> str:
    """`Pending (Unschedulable: 0/3 nodes are available: ...)`: the phase and why, for error messages."""
    status = pod.get("status") or {}
    reasons = [
        f"{c.get('reason')}: {c.get('message')}"
        for c in status.get("conditions") or []
        if c.get("status") == "False" and c.get("reason")
    ]
    for container in status.get("containerStatuses") or []:
        waiting = (container.get("state") or {}).get("waiting")
        if waiting:
            reasons.append(f"{waiting.get('reason')}: {waiting.get('message') or ''}".rstrip(": "))
    return _phase(pod) + (f" ({'; '.join(reasons)})" if reasons else "")


#: The user and group verify's pods run as when they need no root: the defaults of
#: `storage.lustre.workloadDirectories`, the owner of each namespace's directory on Lustre.
DEFAULT_RUN_AS = (
    int(LustreWorkloadDirectories.model_fields["uid"].default),
    int(LustreWorkloadDirectories.model_fields["gid"].default),
)
