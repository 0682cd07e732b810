"""The reference training job: a small model on synthetic data, trained with DDP under torchrun, checkpointed
asynchronously with torch.distributed.checkpoint (DCP) and resumed from its latest complete checkpoint after a
restart, so that a job the controller restarts continues the same loss curve (docs/training.md, "The reference
script").

Standalone: shipped to the pods as a ConfigMap of this file, it imports only the standard library and torch.

    torchrun --nnodes N --nproc-per-node G ... train_reference.py --checkpoint-dir /lustre/ckpt/job --steps 1000

Determinism is what makes a resumed curve equal the uninterrupted one: the model is initialised from `--seed`, each
step's batch is drawn from a generator seeded by (seed, step, rank), and nothing else draws random numbers. The only
RNG state is therefore the step number, which the checkpoint carries; no wall-clock or global RNG state is lost on a
restart.

Each node's first process (local rank 0) serves the run's metrics at `/metrics` on `--metrics-port`, in Prometheus's
text exposition format, from a thread of the standard library's HTTP server (`METRICS`; docs/training.md, "Metrics").
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import re
import sys
import threading
import time
from concurrent.futures import Future
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.nn.parallel import DistributedDataParallel

log = logging.getLogger("train_reference")

#: A checkpoint's directory under --checkpoint-dir: the step it holds, zero-padded so that names sort by step.
CHECKPOINT_NAME = "step-{:09d}"
_CHECKPOINT_DIR = re.compile(r"^step-(\d{9})$")
#: The file DCP's FileSystemWriter.finish writes last, on the coordinator rank, once every rank's data is written
#: (it writes `.metadata.tmp`, then renames it): a directory without it is a save that did not finish.
METADATA_FILE = ".metadata"
#: The model's input and output features (the target is a fixed random map between them).
INPUT_SIZE = 64
OUTPUT_SIZE = 8

#: What `/metrics` serves, each `train_reference_<key>` (key, Prometheus type, help). Every node's endpoint reports
#: the whole job's step and loss (the loss is averaged over all ranks) and its own ranks' work, so a sum over the
#: job's pods is the job's throughput.
METRIC_PREFIX = "train_reference_"
METRICS: tuple[tuple[str, str, str], ...] = (
    ("step", "gauge", "The last training step completed (counted from 1)."),
    ("loss", "gauge", "The loss at the last step, averaged over all ranks."),
    ("steps_total", "counter", "Steps this process completed since it started."),
    ("step_seconds_total", "counter", "Seconds this process spent in the steps it completed."),
    ("samples_total", "counter", "Samples trained by this node's ranks since the process started."),
    ("checkpoint_saves_total", "counter", "Checkpoint saves this process completed."),
    ("checkpoint_save_seconds", "gauge", "Seconds the last completed checkpoint save took, from its start."),
    ("resumed_step", "gauge", "The step this run resumed from (0: no checkpoint, started from scratch)."),
    ("restarts", "gauge", "The JobSet's restart attempt this run belongs to (0: its first run)."),
)
#: Prometheus's text format, version 0.0.4 (the format every Prometheus scrapes).
METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: The environment variable the JobSet's pods set to their restart attempt label (0 when unset: a run by hand).
RESTART_ATTEMPT_ENV = "JOBSET_RESTART_ATTEMPT"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint-dir", type=Path, required=True, help="where checkpoints are written and found")
    parser.add_argument("--steps", type=int, default=1000, help="train until this step (counted from 1)")
    parser.add_argument("--checkpoint-interval", type=int, default=100, help="save every this many steps")
    parser.add_argument("--hidden-size", type=int, default=1024, help="width of the model's hidden layers")
    parser.add_argument("--layers", type=int, default=4, help="number of hidden layers")
    parser.add_argument("--batch-size", type=int, default=64, help="samples per rank per step")
    parser.add_argument("--seed", type=int, default=0, help="seeds the model, the target and every batch")
    parser.add_argument(
        "--loss-log", type=Path, default=None, help="rank 0's JSON lines log (default: CHECKPOINT_DIR/loss.jsonl)"
    )
    parser.add_argument(
        "--metrics-port", type=int, default=0, help="each node's first process serves /metrics here (0: none)"
    )
    args = parser.parse_args(argv)
    if not 0 <= args.metrics_port <= 65535:
        parser.error(f"--metrics-port must be a port number (0 for none), not {args.metrics_port}")
    for name in ("steps", "checkpoint_interval", "hidden_size", "layers", "batch_size"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1, not {getattr(args, name)}")
    if args.loss_log is None:
        args.loss_log = args.checkpoint_dir / "loss.jsonl"
    return args


def latest_checkpoint(checkpoint_dir: Path) -> tuple[int, Path] | None:
    """The highest-step checkpoint whose metadata file exists, or None. A save killed part-way leaves its directory
    with data files but no metadata (DCP writes it last, by rename), so it is skipped, not loaded half-written."""
    complete = [
        (int(match[1]), path)
        for path in checkpoint_dir.glob("step-*")
        if (match := _CHECKPOINT_DIR.match(path.name)) and (path / METADATA_FILE).is_file()
    ]
    return max(complete, default=None)


def build_model(args: argparse.Namespace) -> nn.Module:
    """An MLP from `--seed` alone, so that every rank and every restart starts from the same weights."""
    torch.manual_seed(args.seed)
    width = args.hidden_size
    layers: list[nn.Module] = [nn.Linear(INPUT_SIZE, width), nn.ReLU()]
    for _ in range(args.layers - 1):
        layers += [nn.Linear(width, width), nn.ReLU()]
    layers.append(nn.Linear(width, OUTPUT_SIZE))
    return nn.Sequential(*layers)


def batch(args: argparse.Namespace, step: int, rank: int, target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The batch of `rank` at `step` (from 1): drawn on the CPU from a generator seeded by both, so a resumed run
    sees the same data on any device."""
    generator = torch.Generator().manual_seed(args.seed * 2**40 + step * 2**16 + rank)
    inputs = torch.randn(args.batch_size, INPUT_SIZE, generator=generator)
    return inputs, torch.tanh(inputs @ target)


class Metrics:
    """The values behind `METRICS`: set by the training loop and the saving thread, read by the HTTP server's."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values = {key: 0.0 for key, _, _ in METRICS}

    def set(self, **values: float) -> None:
        with self._lock:
            for key, value in values.items():
                self._check(key)
                self._values[key] = float(value)

    def add(self, **increments: float) -> None:
        with self._lock:
            for key, value in increments.items():
                self._check(key)
                self._values[key] += value

    def _check(self, key: str) -> None:
        if key not in self._values:
            raise KeyError(f"no metric {key!r}")

    def exposition(self) -> str:
        """Every metric with its HELP and TYPE lines, in Prometheus's text format."""
        with self._lock:
            values = dict(self._values)
        lines = []
        for key, kind, text in METRICS:
            name = METRIC_PREFIX + key
            lines += [f"# HELP {name} {text}", f"# TYPE {name} {kind}", f"{name} {sample_value(values[key])}"]
        return "\n".join(lines) + "\n"


def sample_value(value: float) -> str:
    """A float as the text format writes it: `NaN`, `+Inf`, `-Inf` or Python's shortest round-tripping repr."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(value)


def serve_metrics(metrics: Metrics, port: int) -> ThreadingHTTPServer:
    """`GET /metrics` on every address of the pod, from a daemon thread (it ends with the process)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?", 1)[0] != "/metrics":
                self.send_error(404)
                return
            body = metrics.exposition().encode()
            self.send_response(200)
            self.send_header("Content-Type", METRICS_CONTENT_TYPE)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # a line per scrape would bury the training log

    server = ThreadingHTTPServer(("", port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return server


def restart_attempt() -> int:
    """The JobSet's restart attempt from the pod's label (`RESTART_ATTEMPT_ENV`); 0 when absent or not a number."""
    value = os.environ.get(RESTART_ATTEMPT_ENV, "")
    return int(value) if value.isdigit() else 0


class Checkpointer:
    """Asynchronous DCP saves, one in flight at a time, over a gloo group of their own: the save's collectives run
    in a background thread, and sharing the training group would interleave them with DDP's all-reduces."""

    def __init__(self, directory: Path, metrics: Metrics) -> None:
        self.directory = directory
        self.metrics = metrics
        self.group = dist.new_group(backend="gloo")
        self.pending: Future[Any] | None = None

    def save(self, step: int, loss: float, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
        self.wait()  # the previous save must finish before the next starts: at most one copy in memory and in flight
        path = self.directory / CHECKPOINT_NAME.format(step)
        log.info("step %d, loss %.6f: saving checkpoint to %s", step, loss, path)
        started = time.monotonic()
        saving = dcp.async_save(state(step, model, optimizer), checkpoint_id=path, process_group=self.group)
        # a Future, or (with a stager that stages asynchronously) an AsyncSaveResponse holding the save's Future
        self.pending = saving if isinstance(saving, Future) else saving.upload_completion

        def report(done: Future[Any]) -> None:  # in the saving thread, when the metadata is written
            if done.exception() is None:
                self.metrics.set(checkpoint_save_seconds=time.monotonic() - started)
                self.metrics.add(checkpoint_saves_total=1)
                log.info("checkpoint %s complete", path)

        self.pending.add_done_callback(report)

    def wait(self) -> None:
        if self.pending is not None:
            self.pending.result()
            self.pending = None

    def load(self, path: Path, model: nn.Module, optimizer: torch.optim.Optimizer) -> int:
        """Loads model and optimizer in place and returns the step the checkpoint holds."""
        loaded = state(0, model, optimizer)
        dcp.load(loaded, checkpoint_id=path, process_group=self.group)
        set_state_dict(model, optimizer, model_state_dict=loaded["model"], optim_state_dict=loaded["optimizer"])
        return int(loaded["step"].item())


def state(step: int, model: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """What a checkpoint holds: model, optimizer (Adam's moments and its step count) and the training step, which
    is also the only random state (see the module's docstring)."""
    model_state, optimizer_state = get_state_dict(model, optimizer)
    return {"model": model_state, "optimizer": optimizer_state, "step": torch.tensor(step)}


def train(args: argparse.Namespace) -> None:
    rank, local_rank = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    node_ranks = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))  # torchrun's processes on this node
    metrics = Metrics()
    metrics.set(restarts=restart_attempt())
    if local_rank == 0 and args.metrics_port:
        serve_metrics(metrics, args.metrics_port)
    if torch.cuda.is_available():
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        dist.init_process_group(backend="cpu:gloo,cuda:nccl", device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group(backend="gloo")
    world_size = dist.get_world_size()
    log.info("rank %d of %d on %s (%s)", rank, world_size, device, dist.get_backend())

    model = build_model(args).to(device)
    target = torch.randn(INPUT_SIZE, OUTPUT_SIZE, generator=torch.Generator().manual_seed(args.seed))  # on the CPU
    ddp = DistributedDataParallel(model, device_ids=[local_rank] if device.type == "cuda" else None)
    optimizer = torch.optim.Adam(ddp.parameters(), lr=1e-3)
    checkpointer = Checkpointer(args.checkpoint_dir, metrics)

    start = 0
    # rank 0 picks the checkpoint for all: ranks listing a shared file system apart could otherwise disagree
    found = [latest_checkpoint(args.checkpoint_dir) if rank == 0 else None]
    dist.broadcast_object_list(found, src=0, group=checkpointer.group)
    latest = found[0]
    if latest is not None:
        start = checkpointer.load(latest[1], ddp, optimizer)
        log.info("resumed from %s at step %d", latest[1], start)
    else:
        log.info("no complete checkpoint in %s: starting from scratch", args.checkpoint_dir)
    metrics.set(step=start, resumed_step=start)

    # rank 0 logs the mean loss, a line a step, each line written whole and at once (line-buffered)
    loss_log = open(args.loss_log, "a", buffering=1) if rank == 0 else None  # noqa: SIM115 (open for the whole run)
    if loss_log is not None:
        record = {"event": "start", "step": start, "world_size": world_size}
        if latest is not None:
            record["checkpoint"] = str(latest[1])
        loss_log.write(json.dumps(record) + "\n")
    for step in range(start + 1, args.steps + 1):
        began = time.monotonic()
        inputs, labels = batch(args, step, rank, target)
        loss = nn.functional.mse_loss(ddp(inputs.to(device)), labels.to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total = loss.detach()
        dist.all_reduce(total)  # the loss over all ranks' batches, for the log
        mean = total.item() / world_size
        metrics.set(step=step, loss=mean)
        metrics.add(
            steps_total=1, step_seconds_total=time.monotonic() - began, samples_total=args.batch_size * node_ranks
        )
        if loss_log is not None:
            loss_log.write(json.dumps({"event": "step", "step": step, "loss": mean}) + "\n")
        if step % args.checkpoint_interval == 0 or step == args.steps:
            checkpointer.save(step, mean, ddp, optimizer)
    checkpointer.wait()
    if loss_log is not None:
        loss_log.write(json.dumps({"event": "done", "step": args.steps}) + "\n")
        loss_log.close()
    log.info("trained to step %d", args.steps)
    dist.destroy_process_group()


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(
        level=logging.INFO,
        format=f"%(asctime)s rank {os.environ.get('RANK', '?')} %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    args.checkpoint_dir.mkdir(parents=True, exist_ok=True)
    train(args)


if __name__ == "__main__":
    main()
