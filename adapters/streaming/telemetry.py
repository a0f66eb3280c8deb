"""What the relay, the workers and the purger tell an operator: structured log lines
(structlog) at a steady rate, one warning when HBase, Kafka or the event store stops
answering, a reminder every ``REMIND_EVERY`` seconds while it stays down and one line when it
answers again (``Stall``), and Prometheus metrics served on 127.0.0.1 (prometheus-client), on
a free port by default.

While a server is down its client libraries (aiokafka, kafka, faust, happybase, thriftpy2)
log each reconnection attempt; ``LibraryRateLimit`` lets through one line per logger and
message per ``LIBRARY_WINDOW`` seconds and says how many it held back, so an outage cannot
fill the disk. ``Backoff``: the waits between retries, exponential with full jitter
(tenacity), capped.

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

__all__ = ["Backoff", "LibraryRateLimit", "Stall", "configure_logging", "logger",
           "pace_kafka_metadata", "quiet_libraries", "read_endpoints", "serve_metrics"]

_configured = False
#: while a dependency stays down, its ``Stall`` says so again this often (seconds)
REMIND_EVERY = 60.0
#: a library logger repeats the same message at most once per this many seconds
LIBRARY_WINDOW = 60.0


class LibraryRateLimit(logging.Filter):
    """Passes every ``letterlog.*`` record; of any other logger's, the first of each (logger,
    level, message template) per ``window`` seconds, with how many like it were held back
    since the last one that passed."""

    def __init__(self, window: float = LIBRARY_WINDOW,
                 clock: Any = time.monotonic) -> None:
        super().__init__()
        self.window = window
        self.clock = clock
        self._seen: dict[tuple[str, int, str], tuple[float, int]] = {}
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == "letterlog" or record.name.startswith("letterlog."):
            return True
        key = (record.name, record.levelno, str(record.msg))
        now = self.clock()
        with self._lock:
            since, held = self._seen.get(key, (None, 0))
            if since is not None and now - since < self.window:
                self._seen[key] = (since, held + 1)
                return False
            if len(self._seen) > 10_000:  # messages built without a template: forget them
                self._seen.clear()
            self._seen[key] = (now, 0)
        if held:
            record.msg = f"{record.msg} [{held} more like it in the last {self.window:.0f} s]"
        return True


_limit = LibraryRateLimit()


def quiet_libraries() -> None:
    """Puts the rate limit on every handler of the root logger and of ``letterlog`` (call it
    again after a framework installed its own handlers, as faust's worker does)."""
    for name in ("", "letterlog"):
        for handler in logging.getLogger(name).handlers:
            if _limit not in handler.filters:
                handler.addFilter(_limit)
    last = logging.lastResort  # what prints a record no handler took
    if last is not None and _limit not in last.filters:
        last.addFilter(_limit)


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
    import asyncio

    from aiokafka.client import AIOKafkaClient

    original = AIOKafkaClient._metadata_update

    async def paced(self: Any, cluster_metadata: Any, topics: Any) -> Any:
        updated = await original(self, cluster_metadata, topics)
        if not updated:
            await asyncio.sleep(pause)
        return updated

    AIOKafkaClient._metadata_update = paced  # type: ignore[method-assign]
    _paced = True


class Backoff:
    """Waits between retries of a call to a server that does not answer: exponential from
    ``first`` seconds, capped at ``cap``, each wait drawn at random below its bound (full
    jitter: processes that lost the same server do not come back in step)."""

    def __init__(self, first: float = 0.2, cap: float = 30.0) -> None:
        from tenacity import wait_random_exponential

        self._wait = wait_random_exponential(multiplier=first, max=cap, min=first)
        self.attempt = 0

    def next(self) -> float:
        from types import SimpleNamespace

        self.attempt += 1
        return float(self._wait(SimpleNamespace(attempt_number=self.attempt)))  # type: ignore[arg-type]

    def reset(self) -> None:
        self.attempt = 0


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
    """Warns once when a dependency has failed for ``after`` seconds, again every
    ``remind_every`` seconds while it keeps failing (``... still not answering``), and once
    when it answers again: ``failed(error)`` after each failed call, ``ok()`` after each good
    one."""

    def __init__(self, what: str, log: Any, after: float = 5.0,
                 remind_every: float = REMIND_EVERY) -> None:
        self.what = what
        self.log = log
        self.after = after
        self.remind_every = remind_every
        self.since: float | None = None
        self.warned = False
        self._said = 0.0  # when the last warning was logged
        self._lock = threading.Lock()

    @property
    def down(self) -> bool:
        return self.warned

    def failed(self, error: BaseException, started: float | None = None) -> None:
        """A call failed; ``started``: when it was made (``time.monotonic()``), so a call that
        hung for a while before failing counts from its start."""
        with self._lock:
            now = time.monotonic()
            first = started if started is not None else now
            if self.since is None or first < self.since:
                self.since = first
            if not self.warned and now - self.since >= self.after:
                self.warned, self._said = True, now
                self.log.warning(f"{self.what} not answering", seconds=round(now - self.since, 1),
                                 error=_short(error))
            elif self.warned and now - self._said >= self.remind_every:
                self._said = now
                self.log.warning(f"{self.what} still not answering",
                                 seconds=round(now - self.since, 1), error=_short(error))

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


def _short(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text[:300]}"


@contextlib.contextmanager
def watching(stall: Stall) -> Any:
    try:
        yield
    except Exception as error:
        stall.failed(error)
        raise
    stall.ok()
