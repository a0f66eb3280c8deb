"""What the relay, the workers and the purger tell an operator: structured log lines
(structlog) at a steady rate, one warning when HBase, Kafka or the event store stops
answering, a reminder every ``REMIND_EVERY`` seconds while it stays down and one line when it
answers again (``Stall``), and Prometheus metrics served on 127.0.0.1 (prometheus-client), on
a free port by default.

While a server is down its client libraries (aiokafka, kafka, faust, happybase, thriftpy2)
log each reconnection attempt; ``LibraryRateLimit`` lets through one line per logger and
message per ``LIBRARY_WINDOW`` seconds and says how many it held back, so an outage cannot
fill the disk. ``backoff_wait``: the waits between retries, exponential with full jitter
(tenacity), capped; ``waiting_out``: the retrying of a process that waits out an outage.

Each process that serves metrics writes ``<data>/run/<role>-<pid>.json`` (role, pid,
instance, metrics port) so ``letterlog processes status`` and an operator can find the port;
the file is removed when the process exits.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

import structlog
from prometheus_client import Counter, Gauge, start_http_server

from adapters.files.filemodes import private_dir, private_file
from adapters.operations.outages import (  # noqa: F401  (their home is adapters.operations.outages)
    LIBRARY_WINDOW,
    REMIND_EVERY,
    LibraryRateLimit,
    Stall,
    _limit,
    backoff_wait,
    quiet_libraries,
    waiting_out,
    watching,
)

__all__ = ["LibraryRateLimit", "Stall", "backoff_wait", "configure_logging", "logger",
           "waiting_out",
           "pace_kafka_metadata", "quiet_libraries", "read_endpoints", "serve_metrics"]

_configured = False


_paced = False


def pace_kafka_metadata(pause: float = 1.0) -> None:
    """Makes a failed metadata update of aiokafka's client take at least ``pause`` seconds.

    With the broker gone, aiokafka's consumer fetcher asks for a metadata update and waits
    for it in a loop without a pause of its own; the update fails at once (connection
    refused), so the loop spun: measured here, about 1,750 failed connection attempts a
    second and most of a core per worker during a Kafka outage. Paced, the fetcher (and any
    other caller) tries about once a second. A successful update is not delayed. Idempotent;
    called by the relay and the workers before they connect."""
    global _paced
    if _paced:
        return

    from aiokafka.client import AIOKafkaClient  # local: rules, `stream status` need no Kafka

    original = AIOKafkaClient._metadata_update

    async def paced(self: Any, cluster_metadata: Any, topics: Any) -> Any:
        updated = await original(self, cluster_metadata, topics)
        if not updated:
            await asyncio.sleep(pause)
        return updated

    AIOKafkaClient._metadata_update = paced
    _paced = True


def configure_logging(level: int = logging.INFO) -> None:
    """structlog: one ``key=value`` line per event on stderr (timestamp, level, event, fields);
    stdlib ``logging`` lines go through the same renderer."""
    global _configured
    if _configured:
        return

    shared: list[Any] = [structlog.stdlib.add_log_level, structlog.stdlib.add_logger_name,
                         structlog.processors.TimeStamper(fmt="iso", utc=True)]
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                    structlog.dev.ConsoleRenderer(colors=False)],
        foreign_pre_chain=shared))
    handler.addFilter(_limit)
    for name in ("letterlog",):
        target = logging.getLogger(name)
        target.handlers[:] = [handler]
        target.setLevel(level)
        target.propagate = False
    # the client libraries' own lines (warnings and errors), rate-limited, in the same format
    root = logging.getLogger()
    if not root.handlers:
        root.addHandler(handler)
        root.setLevel(logging.WARNING)
    quiet_libraries()
    _configured = True


def logger(name: str) -> Any:
    return structlog.get_logger(name)


def serve_metrics(role: str, data: Path, port: int = 0, instance: str = "") -> int | None:
    """Serves the process's Prometheus registry on ``127.0.0.1:port`` (0: a free port; -1:
    none) and records the port in ``<data>/run/<role>-<pid>.json``. Returns the port."""
    if port < 0:
        return None
    server, _thread = start_http_server(port, addr="127.0.0.1")
    bound = int(server.server_port)
    run = Path(data) / "run"
    private_dir(run)
    path = private_file(run / f"{role}-{os.getpid()}.json")
    path.write_text(json.dumps({"role": role, "pid": os.getpid(), "instance": instance,
                                "metrics_port": bound, "started": time.time()}) + "\n")
    atexit.register(lambda: path.unlink(missing_ok=True))
    return bound


def read_endpoints(data: Path) -> list[dict[str, Any]]:
    """The ``run/*.json`` files of processes still alive."""
    found = []
    for path in sorted((Path(data) / "run").glob("*.json")):
        try:
            entry = json.loads(path.read_text())
            os.kill(int(entry["pid"]), 0)
        except (OSError, ValueError, KeyError):
            continue
        found.append(entry)
    return found


class RuleEventMetrics:
    """The dispatcher's metrics (event rules, docs/event-rules.md):
    ``letterlog_rule_events{status}`` (events per status in the read model, after each
    pass) and ``letterlog_rule_events_dispatched_total{outcome}`` (complete, failed)."""

    def __init__(self) -> None:
        self.by_status = Gauge("letterlog_rule_events", "rule events per status",
                               ["status"])
        self.dispatched = Counter("letterlog_rule_events_dispatched",
                                  "rule events handed to their application", ["outcome"])

    def __call__(self, counts: dict[str, int], handed: dict[str, int]) -> None:
        for status, n in counts.items():
            self.by_status.labels(status=status).set(n)
        for outcome in ("complete", "failed"):
            if handed.get(outcome):
                self.dispatched.labels(outcome=outcome).inc(handed[outcome])
