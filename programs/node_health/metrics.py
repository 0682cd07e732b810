"""The loop's metrics in the Prometheus text exposition format, served on `/metrics` by a standard-library HTTP
server: counters of checks by pool, kind and result, gauges of running checks, nodes by state and the last pass."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from programs.node_health import names

HELP = {
    names.CHECKS_METRIC: ("counter", "Gate and idle checks finished, by pool, kind (gate, idle) and result."),
    names.REPAIRS_METRIC: ("counter", "Repairs started, by pool and action (the repair path counts them)."),
    names.REPAIRS_HELD_METRIC: ("counter", "Repairs held back, by pool and reason (hourly cap, Capacity Block)."),
    names.CHECKS_RUNNING_METRIC: ("gauge", "Check pods running now."),
    names.NODES_METRIC: ("gauge", "GPU nodes by pool and health state (pending, passed, failed)."),
    names.LAST_PASS_METRIC: ("gauge", "Unix time of the loop's last complete pass over the nodes."),
    names.CONDITIONS_FALSE_METRIC: (
        "gauge",
        "The node monitoring agent's conditions by pool and condition: how many nodes report it False now.",
    ),
}

Labels = tuple[tuple[str, str], ...]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


class Metrics:
    """Thread-safe samples: counters only grow; gauges are replaced on every pass."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._samples: dict[str, dict[Labels, float]] = {name: {} for name in HELP}

    def inc(self, name: str, labels: Mapping[str, str], amount: float = 1.0) -> None:
        key = tuple(sorted(labels.items()))
        with self._lock:
            series = self._samples[name]
            series[key] = series.get(key, 0.0) + amount

    def set_gauge(self, name: str, values: Mapping[Labels, float]) -> None:
        with self._lock:
            self._samples[name] = dict(values)

    def value(self, name: str, labels: Mapping[str, str]) -> float:
        with self._lock:
            return self._samples[name].get(tuple(sorted(labels.items())), 0.0)

    def snapshot(self, name: str) -> dict[Labels, float]:
        """A copy of one metric's samples, for a publisher that reads them between passes."""
        with self._lock:
            return dict(self._samples[name])

    def render(self) -> str:
        lines: list[str] = []
        with self._lock:
            for name, (kind, help_text) in HELP.items():
                lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
                for labels, value in sorted(self._samples[name].items()):
                    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in labels)
                    lines.append(f"{name}{{{inner}}} {value:g}" if inner else f"{name} {value:g}")
        return "\n".join(lines) + "\n"


def serve(metrics: Metrics, port: int) -> ThreadingHTTPServer:
    """Serve `/metrics` on `port` in a daemon thread; other paths answer 404."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?")[0] != "/metrics":
                self.send_error(404)
                return
            body = metrics.render().encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
