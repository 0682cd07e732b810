"""The health loop's entry point (`python -m programs.node_health.loop`): reads its settings, serves `/metrics`,
and runs a pass every `pollSeconds`. A pass that fails (the API unreachable) is logged and retried on the next tick;
the state it works from is on the cluster's objects, so a crash or a restart loses nothing."""

from __future__ import annotations

import importlib
import os
import sys
import time
from pathlib import Path
from typing import Any

from programs.node_health.checks import HandOff, HealthLoop, Resume, Settings
from programs.node_health.incluster import InClusterApi
from programs.node_health.kube import KubeApi, KubeError
from programs.node_health.metrics import Metrics, serve

#: Where the stack mounts the loop's settings (its ConfigMap's `config.json`).
CONFIG_PATH = Path(os.environ.get("NODE_HEALTH_CONFIG", "/etc/node-health/config.json"))


def _cordon_only(api: KubeApi, node: dict[str, Any], reason: str, now: float) -> None:
    print(f"node-health: no repair path shipped; {node['metadata']['name']} stays cordoned ({reason})", flush=True)


def repair_path(metrics: Metrics) -> tuple[HandOff, Resume | None]:
    """The repair module shipped beside the loop (`programs.node_health.repair`): its `RepairPath`, called with each
    failed node and resumed on every pass. Without it, or without its settings, failed nodes stay cordoned."""
    try:
        module: Any = importlib.import_module("programs.node_health.repair")
        repair = module.RepairPath.from_environment(metrics)
    except (ImportError, AttributeError, OSError, ValueError) as error:
        print(f"node-health: repair path unavailable ({error}); failed nodes stay cordoned", flush=True)
        return _cordon_only, None
    return repair, repair.resume


def main() -> int:
    settings = Settings.from_json(CONFIG_PATH.read_text())
    metrics = Metrics()
    serve(metrics, settings.metrics_port)
    hand_off, resume = repair_path(metrics)
    loop = HealthLoop(InClusterApi(), settings, hand_off, metrics, resume)
    while True:
        try:
            loop.run_once(time.time())
        except KubeError as error:
            print(f"node-health: pass failed, retrying: {error}", file=sys.stderr, flush=True)
        time.sleep(settings.poll_seconds)


if __name__ == "__main__":
    sys.exit(main())
