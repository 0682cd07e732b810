"""Run the real Pulumi program offline, under mocks, and collect what it registers.

`blueprint plan` and the tests share this one implementation: the stack's config is loaded the way the Pulumi CLI
would (Pulumi.yaml `config:` defaults, then the stack file), handed to the program through `pulumi.Config`, and the
program runs exactly as under `pulumi up`, with `PlanMocks` standing in for the engine and the providers.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Executor
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar, TypeVarTuple

import pulumi
import pulumi.runtime.resource as sdk_registration
from pulumi.runtime import known_types, rpc
from pulumi.runtime.mocks import test as run_under_mocks
from pulumi.runtime.proto import source_pb2

from blueprint.plan.mocks import PlanMocks
from blueprint.plan.monitor import OfflineMonitor, RecordingMonitor, Registration
from blueprint.plan.stack_yaml import read_yaml, stack_file_shape
from components import clock
from components.errors import ConfigError, Problem

PROJECT_ROOT = Path(__file__).resolve().parents[2]
#: The time an offline run reads from `components.clock`: fixed, so that values derived from the clock (an SSM
#: activation's `expirationDate`) are the same in every plan of the same config.
PLAN_TIME = datetime(2025, 1, 1, tzinfo=UTC)


@dataclass
class StackFiles:
    """Where a stack's config comes from: the project file and the stack file."""

    project: str
    stack: str
    config: dict[str, Any]
    config_file: Path


def load_project(project_dir: Path = PROJECT_ROOT) -> dict[str, Any]:
    """Pulumi.yaml, read as the CLI reads it (`stack_yaml.read_yaml`); ConfigError when it is not a mapping."""
    path = project_dir / "Pulumi.yaml"
    loaded = read_yaml(path)
    if not isinstance(loaded, dict):
        raise ConfigError([Problem(str(path), "the project file must be a mapping with `name:`")])
    return loaded


def stack_file(stack: str, project_dir: Path = PROJECT_ROOT) -> Path:
    project = load_project(project_dir)
    return project_dir / project.get("stackConfigDir", ".") / f"Pulumi.{stack}.yaml"


def list_stacks(project_dir: Path = PROJECT_ROOT) -> list[str]:
    project = load_project(project_dir)
    folder = project_dir / project.get("stackConfigDir", ".")
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in folder.glob("Pulumi.*.yaml"))


def load_stack(
    stack: str | None = None, config_file: Path | None = None, project_dir: Path = PROJECT_ROOT
) -> StackFiles:
    """Merge Pulumi.yaml config defaults with a stack file, keys fully qualified (`project:key`, `aws:region`).

    Mirrors the CLI (pulumi-testing-notes §1.3, §3): project keys may be given bare or as `<project>:key`; a
    project-level `config:` entry is either `{default: ...}`/`{value: ...}` or a shorthand value. A stack file the
    CLI would refuse or misread (invalid YAML, duplicate keys, values that are not JSON, ...) raises ConfigError.
    """
    project = load_project(project_dir)
    name = project["name"]
    path = config_file if config_file is not None else stack_file(stack or "", project_dir)
    if not path.exists():
        raise FileNotFoundError(f"no stack file {path}; stacks here: {', '.join(list_stacks(project_dir))}")
    merged: dict[str, Any] = {}
    for key, entry in (project.get("config") or {}).items():
        value = entry.get("default", entry.get("value")) if isinstance(entry, dict) else entry
        if value is not None:
            merged[_qualify(key, name)] = value
    stack_doc = read_yaml(path)
    problems = list(stack_file_shape(path, stack_doc))
    if problems:
        raise ConfigError(problems)
    for key, value in (stack_doc.get("config") or {}).items():
        merged[_qualify(key, name)] = value
    stack_name = stack or path.name.removeprefix("Pulumi.").removesuffix(".yaml")
    return StackFiles(project=name, stack=stack_name, config=merged, config_file=path)


def _qualify(key: str, project: str) -> str:
    return key if ":" in key else f"{project}:{key}"


def as_pulumi_config(config: Mapping[str, Any]) -> dict[str, str]:
    """The CLI hands the program strings: objects and arrays as JSON, booleans as `true`/`false`."""

    def encode(value: Any) -> str:
        if isinstance(value, str):
            return value
        if isinstance(value, bool):
            return "true" if value else "false"
        return json.dumps(value, allow_nan=False)

    return {key: encode(value) for key, value in config.items()}


def in_plan_order(registrations: Iterable[Registration]) -> list[Registration]:
    """Parents before their children, siblings by URN: a stable order (registrations complete concurrently, so
    the order they arrive in changes from run to run) that still reads top-down, component by component."""
    ordered = sorted(registrations, key=lambda r: r.urn)
    known = {r.urn for r in ordered}
    children: dict[str | None, list[Registration]] = defaultdict(list)
    for r in ordered:
        children[r.parent if r.parent in known else None].append(r)
    out: list[Registration] = []
    pending = list(reversed(children[None]))
    while pending:
        r = pending.pop()
        out.append(r)
        pending.extend(reversed(children[r.urn]))
    return out


@dataclass
class ProgramRun:
    """What a mocked run registered, in plan order (`in_plan_order`), and the provider invokes it made."""

    registrations: list[Registration]
    #: The tokens of the provider invokes the program made (`aws:index/getAvailabilityZones:...`), sorted.
    invokes: list[str] = field(default_factory=list)

    def of_type(self, type_token: str) -> list[Registration]:
        return [r for r in self.registrations if r.type == type_token]

    def one(self, type_token: str, name: str | None = None) -> Registration:
        """The single registration of a type (and name, when given); fails loudly when there are 0 or several."""
        found = [r for r in self.of_type(type_token) if name is None or r.name == name]
        if len(found) != 1:
            names = [r.name for r in self.of_type(type_token)]
            raise LookupError(f"expected one {type_token} named {name!r}, found {len(found)}; names: {names}")
        return found[0]


def run_mocked(
    program: Callable[[], Any],
    config: Mapping[str, str] | None = None,
    project: str = "gpu-clusters",
    stack: str = "test",
    region: str | None = None,
) -> ProgramRun:
    """Run `program` under fresh mocks and return every registration, in plan order, once all of them completed.

    The program reads `PLAN_TIME` as the current time. Exceptions from the program (a `ConfigError` above all)
    propagate unchanged.
    """
    settings = dict(config or {})
    region = region or settings.get("aws:region", "us-east-1")
    settings.setdefault("aws:region", region)
    mocks = PlanMocks(region, stated_zone_ids(settings))
    monitor = RecordingMonitor(mocks)
    with clock.pinned(PLAN_TIME):
        run_offline(program, monitor, project, stack, settings)
    return ProgramRun(registrations=in_plan_order(monitor.registrations), invokes=sorted(mocks.invoked))


def run_offline(
    program: Callable[[], Any], monitor: OfflineMonitor, project: str, stack: str, config: Mapping[str, str]
) -> None:
    """Run `program` through the Pulumi SDK with `monitor` as the engine, on an event loop of its own that the run
    closes, and with the SDK's blocking monitor calls made in place (`_InlineLoop`).

    Each run raises the audit event `blueprint.run_mocked` (project, stack): the test suite's tier guard listens for
    it (tests/tiers.py).
    """
    sys.audit("blueprint.run_mocked", project, stack)
    loop = _InlineLoop()
    asyncio.set_event_loop(loop)
    try:
        pulumi.runtime.reset_options()
        pulumi.runtime.set_mocks(monitor.mocks, project=project, stack=stack, preview=False, monitor=monitor)
        pulumi.runtime.set_all_config(dict(config))
        with _no_source_positions(), _acyclic_unknowns_check():
            run_under_mocks(program)()
    finally:
        asyncio.set_event_loop(None)
        loop.close()


_T = TypeVar("_T")
_Args = TypeVarTuple("_Args")


class _InlineLoop(asyncio.SelectorEventLoop):
    """An event loop that makes the SDK's monitor calls in place instead of on a worker thread.

    The SDK calls the engine through `run_in_executor` because a real engine is a gRPC server that blocks; the
    offline monitor answers at once without touching the loop, so the thread hand-off (a worker thread, a wake-up
    of the loop per call, the two threads taking turns on the interpreter lock) bought nothing. A call that raises
    fails the awaiting registration as the executor would.
    """

    def run_in_executor(
        self, executor: Executor | None, func: Callable[[*_Args], _T], *args: *_Args
    ) -> asyncio.Future[_T]:
        future = self.create_future()
        try:
            future.set_result(func(*args))
        except Exception as error:  # the awaiting task gets it, as from an executor
            future.set_exception(error)
        return future


@contextmanager
def _swapped(module: Any, name: str, replacement: Any) -> Iterator[None]:
    """`module.name` is `replacement` for the block, then the SDK's own again; nothing is swapped when the SDK no
    longer has `name` (the swaps below touch the SDK's internals: should one move, plans only get slower)."""
    original = getattr(module, name, None)
    if original is None:
        yield
        return
    setattr(module, name, replacement)
    try:
        yield
    finally:
        setattr(module, name, original)


def _no_source_positions() -> AbstractContextManager[None]:
    """Skip the SDK's capture of each registration's Python stack (the source position it reports to the engine).

    The mock monitor never reads it, and walking the stack and turning every file path into a URI was about a
    tenth of a large plan's registration time.
    """
    return _swapped(sdk_registration, "_get_stack_trace", source_pb2.StackTrace)


def _acyclic_unknowns_check() -> AbstractContextManager[None]:
    """The SDK's `rpc.contains_unknowns` answered by `contains_unknowns`, which leaves no garbage behind.

    The SDK's defines a recursive inner function on each call, a reference cycle that only the cyclic collector
    frees; it runs for every output the SDK makes, and a plan runs with the collector off (`blueprint plan`). On
    the 200-pool benchmark those cycles were about 20 MiB of the peak. An everyday test holds the answers to the
    installed SDK's own (`tests/test_plan_monitor.py`), so an SDK that changes its rules fails it.
    """
    return _swapped(rpc, "contains_unknowns", contains_unknowns)


#: What a finished iterator of `contains_unknowns`' stack gives.
_WALKED = object()


def contains_unknowns(value: Any) -> bool:
    """Whether an unknown is inside `value`, through the values of its maps and the items of its lists: the SDK's
    `rpc.contains_unknowns`, the same walk in the same order, with a stack of iterators instead of a recursive
    closure."""
    seen: set[int] = set()
    pending: list[Iterator[Any]] = [iter((value,))]
    while pending:
        current = next(pending[-1], _WALKED)
        if current is _WALKED:
            pending.pop()
        elif known_types.is_unknown(current):
            return True
        elif id(current) not in seen:
            seen.add(id(current))
            if isinstance(current, dict):
                pending.append(map(current.__getitem__, current))
            elif isinstance(current, list):
                pending.append(iter(current))
    return False


def stated_zone_ids(settings: Mapping[str, str]) -> dict[str, str]:
    """The config's `network.availabilityZoneIds` (the CLI's JSON string), for the mocks to answer as that account;
    empty when absent or unreadable (validation reports the latter)."""
    try:
        network = json.loads(settings.get("gpu-clusters:network", "{}"))
        stated = network.get("availabilityZoneIds", {}) if isinstance(network, dict) else {}
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in stated.items()} if isinstance(stated, dict) else {}


def run_program(program: Callable[[], Any], files: StackFiles) -> ProgramRun:
    """Run the stack's program offline with its config, as `pulumi up` would with the CLI."""
    return run_mocked(program, as_pulumi_config(files.config), project=files.project, stack=files.stack)
