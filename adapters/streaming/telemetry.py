"""What the relay and the workers tell an operator: structured log lines (structlog) at a
steady rate, warnings when HBase or Kafka stop answering, and Prometheus metrics served on
127.0.0.1 (prometheus-client), on a free port by default.

Each process that serves metrics writes ``<data>/run/<role>-<pid>.json`` (role, pid,
instance, metrics port) so ``letterlog processes status`` and an operator can find the port;
the file is removed when the process exits.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from adapters.filemodes import private_dir, private_file

__all__ = ["Stall", "configure_logging", "logger", "read_endpoints", "serve_metrics"]

_configured = False


def configure_logging(level: int = logging.INFO) -> None:
    """structlog: one ``key=value`` line per event on stderr (timestamp, level, event, fields);
    stdlib ``logging`` lines go through the same renderer."""
    global _configured
    if _configured:
        return
    import structlog

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
    for name in ("letterlog",):
        target = logging.getLogger(name)
        target.handlers[:] = [handler]
        target.setLevel(level)
        target.propagate = False
    _configured = True


def logger(name: str) -> Any:
    import structlog

    return structlog.get_logger(name)


def serve_metrics(role: str, data: Path, port: int = 0, instance: str = "") -> int | None:
    """Serves the process's Prometheus registry on ``127.0.0.1:port`` (0: a free port; -1:
    none) and records the port in ``<data>/run/<role>-<pid>.json``. Returns the port."""
    if port < 0:
        return None
    from prometheus_client import start_http_server

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


class Stall:
    """Warns once when a dependency has failed for ``after`` seconds, and once when it answers
    again: ``failed(error)`` after each failed call, ``ok()`` after each good one."""

    def __init__(self, what: str, log: Any, after: float = 5.0) -> None:
        self.what = what
        self.log = log
        self.after = after
        self.since: float | None = None
        self.warned = False
        self._lock = threading.Lock()

    def failed(self, error: BaseException, started: float | None = None) -> None:
        """A call failed; ``started``: when it was made (``time.monotonic()``), so a call that
        hung for a while before failing counts from its start."""
        with self._lock:
            now = time.monotonic()
            first = started if started is not None else now
            if self.since is None or first < self.since:
                self.since = first
            if not self.warned and now - self.since >= self.after:
                self.warned = True
                self.log.warning(f"{self.what} not answering", seconds=round(now - self.since, 1),
                                 error=f"{type(error).__name__}: {error}")

    def waiting(self, started: float) -> None:
        """A call made at ``started`` has not returned yet: warn if that is ``after`` ago."""
        if time.monotonic() - started >= self.after:
            self.failed(TimeoutError(f"a call has waited {time.monotonic() - started:.0f} s"),
                        started)

    def ok(self) -> None:
        with self._lock:
            if self.warned and self.since is not None:
                self.log.warning(f"{self.what} answering again",
                                 seconds=round(time.monotonic() - self.since, 1))
            self.since, self.warned = None, False


@contextlib.contextmanager
def watching(stall: Stall) -> Any:
    try:
        yield
    except Exception as error:
        stall.failed(error)
        raise
    stall.ok()
