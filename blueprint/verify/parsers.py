"""Pure parsers of what the test pods print: `nvidia-smi topo -m`, nccl-tests' `all_reduce_perf`, `dcgmi diag -j`
and the storage probe. Each takes the pod's log as text and returns plain values; each is tested against real
samples in tests/data/verify/ (their origins in tests/data/verify/SOURCES.md).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_GPU = re.compile(r"^GPU\d+$")


class ParseError(ValueError):
    """The output is not what the tool prints: the check reports `error` with this message."""


# ----------------------------------------------------------------------------------------------- nvidia-smi topo -m
@dataclass(frozen=True)
class Topology:
    """The GPU-to-GPU part of `nvidia-smi topo -m`: `links[i][j]` is the legend code between GPU i and GPU j
    (`X` on the diagonal; `NV18`, `PIX`, `PXB`, `PHB`, `NODE`, `SYS`)."""

    gpus: tuple[str, ...]
    links: tuple[tuple[str, ...], ...]

    def pairs(self) -> list[tuple[str, str, str]]:
        """Every unordered GPU pair and its link code."""
        return [
            (self.gpus[i], self.gpus[j], self.links[i][j])
            for i in range(len(self.gpus))
            for j in range(i + 1, len(self.gpus))
        ]


def parse_topology(text: str) -> Topology:
    """The matrix's GPU rows and columns; NIC columns, affinity columns and the legend are ignored.

    The header is tab-separated and its first cell is empty; nvidia-smi underlines it with ANSI escapes when it
    writes to a terminal (the aws-k8s-tester samples keep them), so escapes are stripped first.
    """
    lines = [_ANSI.sub("", line).rstrip() for line in text.splitlines()]
    header_at = next((i for i, line in enumerate(lines) if line.split() and line.split()[0] == "GPU0"), None)
    if header_at is None:
        raise ParseError("no `GPU0 GPU1 ...` header: not the output of `nvidia-smi topo -m`")
    columns = [c.strip() for c in re.split(r"\t+| {2,}", lines[header_at].strip())]
    gpu_columns = [c for c in columns if _GPU.match(c)]
    rows: list[tuple[str, ...]] = []
    names: list[str] = []
    for line in lines[header_at + 1 :]:
        cells = line.split()
        if not cells or not _GPU.match(cells[0]):
            if names:
                break
            continue
        if len(cells) < 1 + len(gpu_columns):
            raise ParseError(f"row {cells[0]} has {len(cells) - 1} cells for {len(gpu_columns)} GPU columns")
        names.append(cells[0])
        rows.append(tuple(cells[1 : 1 + len(gpu_columns)]))
    if names != gpu_columns:
        raise ParseError(f"GPU rows {names} do not match the GPU columns {gpu_columns}")
    return Topology(tuple(names), tuple(rows))


PCIE_LINKS = frozenset({"PIX", "PXB", "PHB", "NODE", "SYS"})


def nvlink_count(code: str) -> int | None:
    """`NV18` -> 18; None for a PCIe code."""
    found = re.fullmatch(r"NV(\d+)", code)
    return int(found.group(1)) if found else None


# ------------------------------------------------------------------------------------------------ nccl-tests
@dataclass(frozen=True)
class NcclRow:
    size_bytes: int
    busbw_out: float
    busbw_in: float
    wrong: int

    @property
    def busbw(self) -> float:
        """The better of out-of-place and in-place bus bandwidth, GB/s."""
        return max(self.busbw_out, self.busbw_in)


@dataclass(frozen=True)
class NcclRun:
    rows: tuple[NcclRow, ...]
    avg_busbw: float | None
    #: aws-ofi-nccl's `NET/OFI Selected Provider is efa` seen in the NCCL log.
    ofi_efa: bool
    #: The transport NCCL says it uses (`Using network <name>`), when it says.
    network: str | None

    @property
    def peak(self) -> NcclRow:
        """The row at the largest message size: bus bandwidth is only meaningful there (the `Avg bus bandwidth`
        line averages every size, the tiny latency-bound ones included)."""
        return max(self.rows, key=lambda r: r.size_bytes)


#: A result row of `*_perf`: size count type redop root time algbw busbw #wrong time algbw busbw #wrong. Lines may
#: carry an mpirun `--tag-output` prefix (`[1,0]<stdout>:`) or a Slurm rank prefix (`0: `).
_ROW = re.compile(
    r"^\s*(?:\[\d+,\d+\]<stdout>:|\d+:)?\s*(\d+)\s+(\d+)\s+(\w+)\s+(\w+)\s+(-?\d+)\s+"
    r"([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\S+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\S+)\s*$"
)
_AVG = re.compile(r"#\s*Avg bus bandwidth\s*:\s*([\d.]+)")
_NETWORK = re.compile(r"NCCL INFO Using network (.+?)\s*$")
_OFI_EFA = re.compile(r"NET/OFI Selected [Pp]rovider is efa\b")


def _wrong(cell: str) -> int:
    return int(cell) if cell.isdigit() else 0  # `N/A` when the run does not check (-c 0)


def parse_nccl(text: str) -> NcclRun:
    """Rows, the average line and the transport evidence of an `all_reduce_perf` log (NCCL_DEBUG=INFO)."""
    rows: list[NcclRow] = []
    network: str | None = None
    ofi = False
    avg: float | None = None
    for raw in text.splitlines():
        line = raw.rstrip()
        row = _ROW.match(line)
        if row:
            g = row.groups()
            rows.append(NcclRow(int(g[0]), float(g[7]), float(g[11]), _wrong(g[8]) + _wrong(g[12])))
            continue
        if (found := _AVG.search(line)) is not None:
            avg = float(found.group(1))
        if (net := _NETWORK.search(line)) is not None:
            network = net.group(1)
        if _OFI_EFA.search(line):
            ofi = True
    if not rows:
        raise ParseError("no result rows: all_reduce_perf did not run to its table (see the log)")
    return NcclRun(tuple(rows), avg, ofi, network)


# ------------------------------------------------------------------------------------------------ dcgmi diag -j
@dataclass(frozen=True)
class DcgmTest:
    category: str
    name: str
    status: str
    gpus: str
    warnings: tuple[str, ...]
    #: DCGM's entity group of the result (`GPU`, `NvSwitch`, ...); `gpus` holds the entity's id within it.
    entity: str = "GPU"


def _json_object(text: str) -> Any:
    """The JSON document in a log that may have lines before it (dcgmi prints warnings first at times)."""
    start = text.find("{")
    if start < 0:
        raise ParseError("no JSON in the output: `dcgmi diag -j` did not run")
    try:
        return json.JSONDecoder().raw_decode(text[start:])[0]
    except json.JSONDecodeError as error:
        raise ParseError(f"the JSON of `dcgmi diag -j` does not parse: {error}") from error


def _warnings(entry: dict[str, Any]) -> tuple[str, ...]:
    warnings = entry.get("warnings") or []
    return tuple(str(w.get("warning", w) if isinstance(w, dict) else w) for w in warnings)


def _results(category: str, test: dict[str, Any]) -> list[DcgmTest]:
    """A test's per-GPU results, then its `test_summary` (gpus `summary`): DCGM 4 puts there the test's overall
    result with the failures attributed to no entity, so a test can fail with every GPU result passing or none
    listed (DCGM `dcgmi/Diag.cpp` HelperJsonAddTestSummary, `testing/python3/dcgm_diag_schema.json`)."""
    name = str(test.get("name") or test.get("test_name") or "?")
    out = []
    for result in test.get("results") or []:
        if not isinstance(result, dict):
            continue
        gpus = result.get("gpu_ids", result.get("entity_id", ""))
        status = str(result.get("status", "")).strip().lower()
        entity = str(result.get("entity_group") or "GPU")
        out.append(DcgmTest(category, name, status, str(gpus), _warnings(result), entity))
    summary = test.get("test_summary")
    if isinstance(summary, dict) and summary.get("status"):
        out.append(DcgmTest(category, name, str(summary["status"]).strip().lower(), "summary", _warnings(summary)))
    return out


def parse_dcgm(text: str) -> list[DcgmTest]:
    """Every result of `dcgmi diag -j`. DCGM 3 nests tests under `DCGM GPU Diagnostic` > `test_categories` (with
    `null` entries between tests, as DCGM's own real-output test shows); DCGM 4 under `DCGM Diagnostic`, each test
    with a `test_summary`; some builds list `tests` at the top of the document. Statuses are lower-cased (`pass`,
    `fail`, `warn`, `skip`). A `runtime_error` (the diagnostic could not run) is a ParseError with DCGM's words."""
    document = _json_object(text)
    if not isinstance(document, dict):
        raise ParseError("`dcgmi diag -j` printed JSON that is not an object")
    root = document.get("DCGM GPU Diagnostic") or document.get("DCGM Diagnostic") or document
    if root.get("runtime_error"):
        raise ParseError(f"dcgmi diag could not run: {root['runtime_error']}")
    found: list[DcgmTest] = []
    for category in root.get("test_categories") or []:
        if isinstance(category, dict):
            for test in category.get("tests") or []:
                if isinstance(test, dict):
                    found += _results(str(category.get("category", "")), test)
    for test in root.get("tests") or []:
        if isinstance(test, dict):
            found += _results(str(test.get("category", "")), test)
    if not found:
        raise ParseError("`dcgmi diag -j` reported no test results")
    return found


FAILING_DCGM = frozenset({"fail", "failed", "error"})


def dcgm_failures(tests: list[DcgmTest]) -> list[DcgmTest]:
    return [t for t in tests if t.status in FAILING_DCGM]


# ------------------------------------------------------------------------------------------------ storage probe
def parse_storage(text: str) -> dict[str, float]:
    """The storage probe's one JSON line: `{"writeMBps": ..., "readMBps": ...}`."""
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{") and "MBps" in line:
            try:
                values = json.loads(line)
            except json.JSONDecodeError as error:
                raise ParseError(f"the storage probe printed bad JSON: {error}") from error
            return {k: float(v) for k, v in values.items() if isinstance(v, int | float)}
    raise ParseError("the storage probe printed no result (see the log)")
