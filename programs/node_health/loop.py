"""The health loop's entry point (`python -m programs.node_health.loop`): reads its settings, serves `/metrics`,
and runs a pass every `pollSeconds`. A pass that fails (the API unreachable) is logged and retried on the next tick;
the state it works from is on the cluster's objects, so a crash or a restart loses nothing."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from programs.node_health import cloudwatch
from programs.node_health.checks import HealthLoop, Settings
from programs.node_health.incluster import InClusterApi
from programs.node_health.kube import KubeError
from programs.node_health.metrics import Metrics, serve
from programs.node_health.repair import RepairPath

#: Where the stack mounts the loop's settings (its ConfigMap's `config.json`).
CONFIG_PATH = Path(os.environ.get("NODE_HEALTH_CONFIG", "/etc/node-health/config.json"))


def tick(loop: HealthLoop, publisher: cloudwatch.CloudWatchPublisher | None, now: float) -> bool:
    """One pass, then, when the settings ask for CloudWatch, its heartbeat and counters: only a finished pass beats,
    so the heartbeat alarm pages for a loop that runs but cannot finish a pass as for one that is down. What a failed
    publish could not send goes with the next one (the publisher counts a delta as sent only once CloudWatch took
    it). Whether the pass finished."""
    try:
        loop.run_once(now)
    except KubeError as error:
        print(f"node-health: pass failed, retrying: {error}", file=sys.stderr, flush=True)
        return False
    if publisher is not None:
        try:
            publisher.publish(loop.metrics)
        except Exception as error:  # boto's errors are many; the loop must keep gating
            print(f"node-health: CloudWatch publish failed: {error}", file=sys.stderr, flush=True)
    return True


def main() -> int:
    text = CONFIG_PATH.read_text()
    settings = Settings.from_json(text)
    publisher = cloudwatch.from_settings(json.loads(text), os.environ.get("AWS_REGION"))
    metrics = Metrics()
    serve(metrics, settings.metrics_port)
    # The repair path is part of the loop: if its settings or AWS clients cannot load, the pod fails and says why
    # rather than run a loop that cordons failed nodes and never repairs them.
    repair = RepairPath.from_environment(metrics)
    loop = HealthLoop(InClusterApi(), settings, repair, metrics, repair.resume)
    while True:
        tick(loop, publisher, time.time())
        time.sleep(settings.poll_seconds)


if __name__ == "__main__":
    sys.exit(main())
