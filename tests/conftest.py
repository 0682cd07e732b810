"""Fixtures over `tests.builders` (the shipped stacks built once per session, the CLI run in-process), and session
settings that make the run cheaper: fewer garbage collections, bytecode kept. (Runs under mocks skip the SDK's
source positions on their own: `blueprint.plan.runner.run_offline`.)

Builders live in `tests.builders`; components run under mocks through its `run_with_context` (fresh mocks per call).
The builders are imported inside the fixtures, so a test module that needs none of them never imports the program.
"""

from __future__ import annotations

import atexit
import datetime as dt
import gc
import sys
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from components import clock
from tests import tiers

if TYPE_CHECKING:
    from tests.builders import CliResult, ShippedStack

# pytest rewrites the asserts of every test module as it imports it, and keeps the result as bytecode only when
# bytecode may be written: under PYTHONDONTWRITEBYTECODE each run redid it, a third of collection. __pycache__/ is
# ignored by git.
sys.dont_write_bytecode = False


#: Collect less often, from the start: a run under mocks allocates hundreds of thousands of short-lived objects
#: (futures, outputs): at the default thresholds a whole-stack run set the collector off 580 times, 4 of them full;
#: and collection (importing the SDK, the providers, every test module) set it off 500 times, a quarter of a second
#: of each worker's start. Cycles are still freed.
GC_THRESHOLDS = (100_000, 50, 1000)
gc.set_threshold(*GC_THRESHOLDS)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Move everything imported so far (the SDK, the providers' thousands of classes) out of the collector's reach."""
    gc.freeze()


#: At exit, once pytest is done (its unraisable-exception plugin collects at unconfigure and again at cleanup, and
#: reports what a `__del__` raised), what is left is frozen too: the interpreter's finalization clears the modules,
#: then collects the whole heap, garbage by then, twice (CPython's `finalize_modules`, `finalize_interp_clear`), the
#: longest part of a worker's exit, which xdist's controller waits for (`NodeManager.teardown_nodes`). Atexit
#: handlers still run and objects still go with their last reference; only cycles left at exit are not collected.
atexit.register(gc.freeze)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """A run whose `-m` leaves out the `charts` tier (the everyday run) does not collect tests/charts/: importing its
    modules and conftest (the program, every stack's variants) was a second of each worker's start, for tests that
    are then deselected."""
    if collection_path == tiers.CHARTS_DIR and tiers.leaves_out(config.getoption("markexpr"), "charts"):
        return True
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark `program` every test that takes a run of the program from a conftest fixture (`tiers.PROGRAM_FIXTURES`),
    before `-m` selects: the everyday run leaves them out."""
    for item in items:
        if tiers.PROGRAM_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(tiers.MARKER)


#: Fails a test of the everyday tier that runs the program, or the CLI in a process (tests/tiers.py).
TIER_GUARD = tiers.install()


def _guarded(item: pytest.Item) -> Generator[None, None, None]:
    """A test's setup or call, watched by the tier guard."""
    with TIER_GUARD.watching(tiers.watched_id(item)):
        result = yield
    _fail_on_swallowed_violations()
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    return (yield from _guarded(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    return (yield from _guarded(item))


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(
    collector: pytest.Collector,
) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    """A module that runs the program while it is collected (at import, in `pytest_generate_tests`) fails to
    collect: collection comes before `-m` selects, so every run would pay for it."""
    with TIER_GUARD.watching(collector.nodeid or None, collecting=True):
        report = yield
    if TIER_GUARD.violations and report.passed:
        report.outcome, report.longrepr = "failed", TIER_GUARD.violations[0]
    return report


def _fail_on_swallowed_violations() -> None:
    """The guard's failure, should the test have caught it (`except BaseException`, `pytest.raises(Failed)`)."""
    if TIER_GUARD.violations:
        pytest.fail(TIER_GUARD.violations[0], pytrace=False)


#: The day the support calendars read in tests: which Kubernetes versions EKS supports moves with the date, and the
#: docs' examples print the list of that day. Pinned so that a fresh clone passes on any day; tests of the calendar
#: itself pass their own days (tests/test_versions.py).
SUPPORT_CALENDAR_DAY = dt.date(2026, 11, 26)


@pytest.fixture(scope="session", autouse=True)
def support_calendar_pinned() -> Iterator[None]:
    with clock.calendar_pinned(SUPPORT_CALENDAR_DAY):
        yield


@pytest.fixture(scope="session")
def training_stack() -> ShippedStack:
    from tests.builders import shipped_stack

    return shipped_stack("training")


@pytest.fixture(scope="session")
def inference_stack() -> ShippedStack:
    from tests.builders import shipped_stack

    return shipped_stack("inference")


@pytest.fixture(scope="session")
def hybrid_stack() -> ShippedStack:
    from tests.builders import shipped_stack

    return shipped_stack("hybrid")


@pytest.fixture(scope="session")
def each_shipped_plan(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The offline plan of every stack in `stacks/`, one test per stack (the stacks: `pytest_generate_tests`)."""
    from tests.builders import shipped_plan

    return shipped_plan(request.param)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """`each_shipped_plan`'s stacks, listed where tests are collected: the runner imports the Pulumi SDK, a second
    of start-up that xdist's controller, which collects nothing, would otherwise spend before starting workers."""
    if "each_shipped_plan" in metafunc.fixturenames:
        from blueprint.plan.runner import list_stacks

        metafunc.parametrize("each_shipped_plan", list_stacks(), indirect=True, scope="session")


@pytest.fixture
def blueprint_cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Callable[..., CliResult]:
    """`blueprint ARGS...` in this process: exit code and output as the console script gives them.

    The stack's program runs under mocks once per session for each stack, config and policy config
    (`tests.builders.stack_run`), so a test of the CLI's formats, `check`, `deployer-policy` or `preflight` pays for
    its own command only; a file that does not load or validate raises each time, as without the cache.
    """
    from blueprint import cli
    from blueprint.plan import plan as plan_module
    from tests.builders import CliResult, stack_run

    monkeypatch.setattr(plan_module, "run_stack_under_mocks", stack_run)

    def run(*args: str) -> CliResult:
        capsys.readouterr()
        code = cli.main(list(args))
        out, err = capsys.readouterr()
        return CliResult(code, out, err)

    return run
