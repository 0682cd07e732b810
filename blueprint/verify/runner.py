"""Run the selected checks in order, and always delete the test pods. Each pool's (or file system's) test pods
get their own time (`Context.budget`); a check keeps the results of the pools before one that timed out.

Clean-up runs after each check that started pods and once more in a `finally`: a failing check, a timeout, an
API error and Ctrl-C (KeyboardInterrupt, re-raised after the clean-up) all end with no test pod left behind.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence

from blueprint.verify import allocatable, conditions, daemons, dcgm, drivers, nccl, nodes, storage, topology
from blueprint.verify.context import Context, Options
from blueprint.verify.expectations import Expectations
from blueprint.verify.kube import KubeApi, KubeError
from blueprint.verify.model import CHECKS, PodsStopped, Result
from blueprint.verify.pods import PodSession

CHECK_FUNCTIONS: dict[str, Callable[[Context], list[Result]]] = {
    "nodes": nodes.check,
    "allocatable": allocatable.check,
    "daemons": daemons.check,
    "conditions": conditions.check,
    "drivers": drivers.check,
    "topology": topology.check,
    "dcgm": dcgm.check,
    "nccl": nccl.check,
    "storage": storage.check,
}
assert tuple(CHECK_FUNCTIONS) == CHECKS


#: Where progress lines go (stderr in the CLI).
Progress = Callable[..., None]


def selected(only: Sequence[str], skip: Sequence[str]) -> list[str]:
    """The checks to run, in their fixed order: `--only` ones if given, minus `--skip` ones."""
    chosen = [c for c in CHECKS if not only or c in only]
    return [c for c in chosen if c not in skip]


def new_run_id() -> str:
    return secrets.token_hex(3)


def run_checks(
    api: KubeApi,
    expect: Expectations,
    checks: Sequence[str],
    options: Options,
    progress: Progress,
    namespace: str = "default",
    session: PodSession | None = None,
) -> list[Result]:
    session = session or PodSession(api, new_run_id(), namespace)
    ctx = Context(api, expect, session, options)
    results: list[Result] = []
    try:
        for i, name in enumerate(checks, 1):
            progress(f"[{i}/{len(checks)}] {name} ...")
            try:
                found = CHECK_FUNCTIONS[name](ctx)
            except PodsStopped as error:  # checks catch their own per pool; this is the last resort
                found = [Result(name, "-", "error", str(error))]
            except KubeError as error:
                found = [Result(name, "-", "error", str(error))]
            finally:
                _clean(session, progress)
            results += found
            failed = sum(r.status in ("fail", "error") for r in found)
            progress(f"[{i}/{len(checks)}] {name}: {len(found) - failed} ok, {failed} failed")
    finally:
        _clean(session, progress)
    return results


def _clean(session: PodSession, progress: Progress) -> None:
    count = len(session.created_pods) + len(session.created_secrets)
    if not count:
        return
    leftovers = session.cleanup()
    progress(f"deleted {count - len(leftovers)} test object(s) of run {session.run_id}")
    for line in leftovers:
        selector = f"blueprint-verify/run={session.run_id}"
        progress(f"could not delete {line}: delete it with `kubectl delete pods,secrets -A -l {selector}`")
