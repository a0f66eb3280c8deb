"""A stream worker's metrics and its web page (``LETTERLOG_STREAM_WEB_PORT``).

The metrics are prometheus-client's: two counters (``letterlog_stream_events_applied_total``,
``letterlog_stream_dead_letters_total``) and a lag collector that reports, on each scrape,
the lag the worker last published per partition (``letterlog_stream_lag_events`` and
``letterlog_stream_lag_seconds``, labelled ``topic`` and ``partition``; a partition keeps its
last figures, as a gauge's labels do). The page is prometheus-client's own HTTP handler
(``MetricsHandler``, ``/metrics/``) on the standard library's threading HTTP server, plus
``/lag/``: the worker's lag as JSON, computed in the worker's event loop.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Coroutine, Iterator, Mapping
from http.server import ThreadingHTTPServer
from typing import Any

from prometheus_client import REGISTRY, Counter, MetricsHandler
from prometheus_client.core import GaugeMetricFamily

__all__ = ["LagCollector", "WebPage", "count_batch", "publish_lag", "serve_web"]

_lock = threading.Lock()
_counters: dict[str, Any] = {}


class LagCollector:
    """The lag gauges, collected on scrape from what ``publish`` was last given per
    partition (a prometheus-client custom collector)."""

    def __init__(self) -> None:
        self._parts: dict[tuple[str, str], tuple[float, float]] = {}

    def publish(self, lag: Mapping[str, Any]) -> None:
        """Takes ``StreamProjector.lag``'s dict: its partitions' events and seconds."""
        found = {}
        for name, part in lag.get("partitions", {}).items():
            topic, _, partition = name.rpartition("/")
            found[(topic, partition)] = (float(part["events"]), float(part["seconds"]))
        with _lock:
            self._parts = {**self._parts, **found}

    def collect(self) -> Iterator[Any]:
        labels = ["topic", "partition"]
        events = GaugeMetricFamily("letterlog_stream_lag_events",
                                   "Records in Kafka not yet applied", labels=labels)
        seconds = GaugeMetricFamily("letterlog_stream_lag_seconds",
                                    "Age of the last applied event while records wait",
                                    labels=labels)
        for (topic, partition), (behind, age) in sorted(self._parts.items()):
            events.add_metric([topic, partition], behind)
            seconds.add_metric([topic, partition], age)
        yield events
        yield seconds


def _metrics() -> dict[str, Any]:
    """The process's worker metrics, registered once in prometheus-client's registry."""
    with _lock:
        if not _counters:
            _counters["applied"] = Counter("letterlog_stream_events_applied",
                                           "Events applied to the tables")
            _counters["dead"] = Counter("letterlog_stream_dead_letters",
                                        "Records written to dead_letters")
            _counters["lag"] = collector = LagCollector()
            REGISTRY.register(collector)
        return _counters


def publish_lag(lag: Mapping[str, Any]) -> None:
    """Sets the lag gauges from ``StreamProjector.lag``'s dict."""
    _metrics()["lag"].publish(lag)


def count_batch(applied: int, dead_letters: int) -> None:
    """Counts a written batch's events and dead letters."""
    metrics = _metrics()
    metrics["applied"].inc(applied)
    metrics["dead"].inc(dead_letters)


class WebPage:
    """The running page: ``close()`` stops serving."""

    def __init__(self, server: ThreadingHTTPServer, thread: threading.Thread) -> None:
        self.server, self.thread = server, thread

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


def serve_web(port: int, lag: Callable[[], Coroutine[Any, Any, dict[str, Any]]],
              loop: asyncio.AbstractEventLoop) -> WebPage | None:
    """``/metrics/`` (Prometheus) and ``/lag/`` (JSON: ``lag()`` run in ``loop``, the
    worker's) on 127.0.0.1:``port``, in a thread; None when ``port`` is 0."""
    if not port:
        return None
    _metrics()

    class Page(MetricsHandler):
        def do_GET(self) -> None:
            path = self.path.split("?")[0].rstrip("/")
            if path == "/metrics":
                super().do_GET()
            elif path == "/lag":
                found = asyncio.run_coroutine_threadsafe(lag(), loop).result(10.0)
                self._send(200, "application/json", json.dumps(found).encode())
            else:
                self._send(404, "text/plain", b"not found\n")

        def _send(self, status: int, kind: str, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", port), Page)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="stream-web", daemon=True)
    thread.start()
    return WebPage(server, thread)
