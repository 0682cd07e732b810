"""The reference training script (programs/train_reference.py) on CPU: two processes under torchrun with gloo, killed
after a checkpoint completed, resume from the latest complete checkpoint with the uninterrupted run's loss curve.

These tests need torch (the `train` extra, requirements-train.lock) and take tens of seconds, so they are marked
`training`: the everyday run leaves them out and CI's `training` step runs them with BLUEPRINT_REQUIRE_TORCH=1, where a
missing torch fails them instead of skipping.
"""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import select
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from components.planning.training_job import TRAINING_METRICS

REQUIRED = os.environ.get("BLUEPRINT_REQUIRE_TORCH") == "1"
SCRIPT = Path(__file__).resolve().parent.parent / "programs" / "train_reference.py"

pytestmark = [
    pytest.mark.training,
    pytest.mark.skipif(
        importlib.util.find_spec("torch") is None and not REQUIRED,
        reason="torch is not installed (requirements-train.lock); `.ci/run training` installs and runs these tests",
    ),
]

STEPS, INTERVAL = 200, 10
#: Small enough to train fast on two shared cores; the curve is what is compared, not the model.
MODEL = ["--hidden-size", "32", "--layers", "2", "--batch-size", "16"]


@pytest.fixture(scope="module")
def script() -> ModuleType:
    from programs import train_reference

    return train_reference


def torchrun(checkpoint_dir: Path, loss_log: Path, metrics_port: int = 0) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--standalone", str(SCRIPT)]
    arguments = ["--checkpoint-dir", str(checkpoint_dir), "--loss-log", str(loss_log)]
    arguments += ["--metrics-port", str(metrics_port)]
    arguments += ["--steps", str(STEPS), "--checkpoint-interval", str(INTERVAL), *MODEL]
    environment = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        command + arguments, env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def finish(run: subprocess.Popen[str]) -> None:
    output, _ = run.communicate(timeout=300)
    assert run.returncode == 0, output


def records(loss_log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in loss_log.read_text().splitlines()]


def curve(lines: list[dict[str, Any]]) -> dict[int, float]:
    return {line["step"]: line["loss"] for line in lines if line["event"] == "step"}


def kill_tree(root: int) -> None:
    """SIGKILL torchrun and its workers, as a node failure or a container's end would. Killing torchrun's process
    group is not enough: torchrun starts each worker in a session of its own."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])  # the fields after the command's name
        except OSError:
            continue  # ended meanwhile
        children.setdefault(parent, []).append(int(stat.parent.name))
    tree, queue = [], [root]
    while queue:
        tree.append(queue.pop())
        queue += children.get(tree[-1], [])
    for pid in tree:
        with suppress(ProcessLookupError):  # a process that ended on its own meanwhile
            os.kill(pid, signal.SIGKILL)


@contextmanager
def one_page_fifo(fifo: Path) -> Iterator[int]:
    """The read end of a FIFO whose buffer is one page (4 KiB, some 70 log lines). Once the test stops reading,
    the writer blocks when the page is full, so a run logging into it cannot get far ahead of the test, let alone
    finish before the test kills it: no timing involved."""
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    fcntl.fcntl(reader, fcntl.F_SETPIPE_SZ, 4096)
    os.set_blocking(reader, True)
    keeper = os.open(fifo, os.O_WRONLY)  # until rank 0 opens the FIFO, reads wait instead of seeing end of file
    try:
        yield reader
    finally:
        os.close(keeper)
        os.close(reader)


def read_until_step(run: subprocess.Popen[str], reader: int, step: int) -> list[dict[str, Any]]:
    """Rank 0's log lines up to the one of `step` and not a byte further (an unbuffered readline reads byte by byte),
    so that everything logged after it is still in the pipe, holding the run back."""
    lines: list[dict[str, Any]] = []
    with open(reader, "rb", buffering=0, closefd=False) as pipe:
        while not lines or lines[-1].get("step", 0) < step:
            ready, _, _ = select.select([reader], [], [], 1.0)
            assert run.poll() is None, f"the run ended before step {step}:\n{run.communicate()[0]}"
            if ready:  # rank 0 writes each line whole (one write of less than PIPE_BUF, atomic on a pipe)
                lines.append(json.loads(pipe.readline()))
    return lines


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def scrape(port: int) -> tuple[str, dict[str, float]]:
    """`/metrics` of the run's first process: its content type and each sample's value by name."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
        content_type, text = response.headers["Content-Type"], response.read().decode()
    samples = (line.split(" ") for line in text.splitlines() if not line.startswith("#"))
    return content_type, {name: float(value) for name, value in samples}


@pytest.mark.timeout(600)  # three torchrun launches, each importing torch in three processes on two shared cores
def test_a_killed_run_resumes_from_its_latest_complete_checkpoint_with_the_same_loss_curve(tmp_path: Path) -> None:
    uninterrupted = tmp_path / "uninterrupted"
    finish(torchrun(uninterrupted, uninterrupted / "loss.jsonl"))
    expected = curve(records(uninterrupted / "loss.jsonl"))
    assert sorted(expected) == list(range(1, STEPS + 1))

    checkpoints, fifo = tmp_path / "checkpoints", tmp_path / "first-run.fifo"
    with one_page_fifo(fifo) as reader:
        port = free_port()
        first = torchrun(checkpoints, fifo, port)
        # the save at 2*INTERVAL starts only once the one at INTERVAL completed: step 2*INTERVAL + 1 proves it
        before_kill = read_until_step(first, reader, 2 * INTERVAL + 1)
        # rank 0 is held by the full pipe, at some step after the one read, and serves its metrics meanwhile
        content_type, metrics = scrape(port)
        kill_tree(first.pid)
        first.communicate()
    assert before_kill[0] == {"event": "start", "step": 0, "world_size": 2}
    assert {step: expected[step] for step in curve(before_kill)} == curve(before_kill)
    assert content_type.startswith("text/plain; version=0.0.4")
    step = int(metrics["train_reference_step"])
    assert 2 * INTERVAL + 1 <= step < STEPS
    assert metrics["train_reference_loss"] == expected[step]  # the logged mean, to the last bit
    assert metrics["train_reference_steps_total"] == step
    assert metrics["train_reference_samples_total"] == step * 16 * 2  # --batch-size 16, two ranks on the node
    assert (
        metrics["train_reference_checkpoint_saves_total"] >= 1
        and metrics["train_reference_checkpoint_save_seconds"] > 0
    )
    assert metrics["train_reference_resumed_step"] == 0 and metrics["train_reference_restarts"] == 0

    complete = sorted(int(path.parent.name.split("-")[1]) for path in checkpoints.glob("step-*/.metadata"))
    assert complete and complete[0] == INTERVAL and complete[-1] < STEPS
    # a save cut off later than every complete one: data written, no metadata
    (checkpoints / "step-000009999").mkdir()
    (checkpoints / "step-000009999" / "__0_0.distcp").write_bytes(b"cut off")

    finish(torchrun(checkpoints, checkpoints / "loss.jsonl"))
    resumed = records(checkpoints / "loss.jsonl")
    latest = checkpoints / f"step-{complete[-1]:09d}"
    assert resumed[0] == {"event": "start", "step": complete[-1], "world_size": 2, "checkpoint": str(latest)}
    assert min(curve(resumed)) == complete[-1] + 1
    assert curve(resumed) == {step: loss for step, loss in expected.items() if step > complete[-1]}
    assert resumed[-1] == {"event": "done", "step": STEPS}


def test_the_latest_checkpoint_is_the_highest_step_with_metadata(tmp_path: Path, script: ModuleType) -> None:
    for step, files in [(10, [".metadata", "__0_0.distcp"]), (20, [".metadata"]), (30, ["__0_0.distcp"])]:
        (tmp_path / f"step-{step:09d}").mkdir()
        for name in files:
            (tmp_path / f"step-{step:09d}" / name).write_bytes(b"")
    (tmp_path / "step-000000040.tmp").mkdir()  # not a checkpoint's name
    (tmp_path / "step-000000040.tmp" / ".metadata").write_bytes(b"")
    assert script.latest_checkpoint(tmp_path) == (20, tmp_path / "step-000000020")


def test_an_interrupted_save_only_or_nothing_is_no_checkpoint(tmp_path: Path, script: ModuleType) -> None:
    assert script.latest_checkpoint(tmp_path) is None
    (tmp_path / "step-000000010").mkdir()
    (tmp_path / "step-000000010" / ".metadata.tmp").write_bytes(b"")  # DCP's metadata before its rename
    assert script.latest_checkpoint(tmp_path) is None


def test_steps_compare_numerically_not_by_name(tmp_path: Path, script: ModuleType) -> None:
    for step in (9, 10, 100):
        (tmp_path / f"step-{step:09d}").mkdir()
        (tmp_path / f"step-{step:09d}" / ".metadata").write_bytes(b"")
    assert script.latest_checkpoint(tmp_path) == (100, tmp_path / "step-000000100")


@pytest.mark.parametrize("flag", ["--steps", "--checkpoint-interval", "--hidden-size", "--layers", "--batch-size"])
def test_a_size_below_one_is_a_usage_error(tmp_path: Path, script: ModuleType, flag: str) -> None:
    with pytest.raises(SystemExit) as exit_info:
        script.parse_args(["--checkpoint-dir", str(tmp_path), flag, "0"])
    assert exit_info.value.code == 2


def test_metrics_are_the_planned_ones_in_the_text_format(script: ModuleType) -> None:
    metrics = script.Metrics()
    metrics.set(step=3, loss=0.25)
    metrics.add(samples_total=64, checkpoint_saves_total=1)
    metrics.add(samples_total=64)
    text = metrics.exposition()
    samples = dict(line.split(" ") for line in text.splitlines() if not line.startswith("#"))
    assert set(samples) == set(TRAINING_METRICS)
    assert samples["train_reference_step"] == "3.0" and samples["train_reference_loss"] == "0.25"
    assert samples["train_reference_samples_total"] == "128.0"
    assert "# TYPE train_reference_samples_total counter" in text.splitlines()
    with pytest.raises(KeyError, match="tokens"):
        metrics.set(tokens=1)


@pytest.mark.parametrize(("value", "text"), [(float("nan"), "NaN"), (float("inf"), "+Inf"), (-float("inf"), "-Inf")])
def test_special_values_are_written_as_the_text_format_spells_them(script: ModuleType, value: float, text: str) -> None:
    assert script.sample_value(value) == text


@pytest.mark.parametrize(("value", "attempt"), [("3", 3), ("", 0), ("x", 0)])
def test_the_restart_attempt_comes_from_the_pod_label(
    script: ModuleType, monkeypatch: pytest.MonkeyPatch, value: str, attempt: int
) -> None:
    monkeypatch.setenv(script.RESTART_ATTEMPT_ENV, value)
    assert script.restart_attempt() == attempt


def test_a_metrics_port_out_of_range_is_a_usage_error(tmp_path: Path, script: ModuleType) -> None:
    with pytest.raises(SystemExit) as exit_info:
        script.parse_args(["--checkpoint-dir", str(tmp_path), "--metrics-port", "70000"])
    assert exit_info.value.code == 2
