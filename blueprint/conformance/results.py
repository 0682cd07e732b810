"""The evidence of one run of the upstream suite: `go test -json`'s events ([GOTEST]) turned into the three files
the conformance programs collect: results.json (the events as the test binary printed them), e2e.log (the tests'
output, in order) and junit.xml (one test case per test and subtest).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any
from xml.etree import ElementTree

#: The files a run leaves in its evidence folder.
RESULTS_JSON = "results.json"
E2E_LOG = "e2e.log"
JUNIT_XML = "junit.xml"

_OUTCOMES = ("pass", "fail", "skip")


@dataclass
class TestResult:
    """One test or subtest: its outcome (pass, fail, skip; `unfinished` when the run ended first), seconds taken
    and output."""

    name: str
    outcome: str = "unfinished"
    seconds: float = 0.0
    output: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Results:
    """Every test of the run, in the order they started, and the lines that were not JSON events (a build error)."""

    tests: tuple[TestResult, ...]
    stray: tuple[str, ...]

    @property
    def failed(self) -> list[TestResult]:
        return [t for t in self.tests if t.outcome in ("fail", "unfinished")]


def _decoded(lines: Iterable[str]) -> Iterator[tuple[str, dict[str, Any] | None]]:
    """Each non-blank line with its test2json event, or None where the line is not one (go's own build output)."""
    for line in lines:
        text = line.rstrip("\n")
        if not text.strip():
            continue
        try:
            event = json.loads(text)
        except json.JSONDecodeError:
            event = None
        yield text, event if isinstance(event, dict) else None


def parse_events(lines: Iterable[str]) -> Results:
    """Read test2json events; a line that is not one (go's own build output) is kept as stray text."""
    tests: dict[str, TestResult] = {}
    stray: list[str] = []
    for text, event in _decoded(lines):
        if event is None:
            stray.append(text)
            continue
        name = event.get("Test")
        if not name:
            continue
        test = tests.setdefault(str(name), TestResult(str(name)))
        action = event.get("Action")
        if action == "output":
            test.output.append(str(event.get("Output", "")))
        elif action in _OUTCOMES:
            test.outcome = str(action)
            test.seconds = float(event.get("Elapsed") or 0.0)
    return Results(tuple(tests.values()), tuple(stray))


def e2e_log(lines: Iterable[str]) -> str:
    """The run's output as `go test -v` prints it: every event's Output in order, and stray lines as they came."""
    out: list[str] = []
    for text, event in _decoded(lines):
        if event is None:
            out.append(text + "\n")
        elif event.get("Action") == "output":
            out.append(str(event.get("Output", "")))
    return "".join(out)


def junit_xml(results: Results, suite: str) -> str:
    """One <testsuite> named `suite`, a <testcase> per test with <failure> or <skipped>; stray lines (a build
    failure) are the suite's system-out and count as one failure."""
    build_failed = bool(results.stray) and not results.tests
    failures = len(results.failed) + (1 if build_failed else 0)
    root = ElementTree.Element(
        "testsuite",
        name=suite,
        tests=str(len(results.tests)),
        failures=str(failures),
        skipped=str(sum(t.outcome == "skip" for t in results.tests)),
        time=f"{sum(t.seconds for t in results.tests if '/' not in t.name):.3f}",
    )
    for test in results.tests:
        case = ElementTree.SubElement(root, "testcase", classname=suite, name=test.name, time=f"{test.seconds:.3f}")
        if test.outcome == "fail":
            ElementTree.SubElement(case, "failure", message="failed").text = "".join(test.output)
        elif test.outcome == "unfinished":
            ElementTree.SubElement(case, "failure", message="did not finish").text = "".join(test.output)
        elif test.outcome == "skip":
            ElementTree.SubElement(case, "skipped").text = "".join(test.output)
    if results.stray:
        ElementTree.SubElement(root, "system-out").text = "\n".join(results.stray)
    ElementTree.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ElementTree.tostring(root, encoding="unicode") + "\n"
