"""Waiting out a server that does not answer, quietly: capped, jittered back-off
(``backoff_wait``, and ``waiting_out``, tenacity's retrying of a process that never gives up
on an outage), one warning when a dependency stops answering, a reminder at a bounded rate
and one line when it answers again (``Stall``), and a rate limit on the client libraries'
own log lines (``quiet_libraries``). Shared by every long-running process: the relay and
the stream workers, the purger (ADR 0048), the event rules' dispatcher (ADR 0070)."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from tenacity import Retrying, after_nothing, wait_random_exponential

from projections.tablestore import TableStoreError

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


def backoff_wait(first: float = 0.2, cap: float = 30.0) -> Any:
    """Tenacity's wait between retries of a call to a server that does not answer:
    exponential from ``first`` seconds, capped at ``cap``, each wait drawn at random below its
    bound (full jitter: processes that lost the same server do not come back in step)."""
    return wait_random_exponential(multiplier=first, max=cap, min=first)


def waiting_out(stop: threading.Event, *, first: float, cap: float, retry: Any,
                after: Callable[[Any], None] | None = None,
                before_sleep: Callable[[Any], None] | None = None,
                wake: threading.Event | None = None) -> Any:
    """Tenacity's ``Retrying`` as a long-running process waits out a server's outage: a
    failure ``retry`` accepts is tried again after ``backoff_wait(first, cap)``, for ever;
    the wait ends early when ``stop`` is set, and the attempts end once it is (the call then
    returns None, an attempt's function is expected to return None at once when ``stop`` is
    set). What ``retry`` refuses is raised as it is. ``after``: called with tenacity's
    ``RetryCallState`` after each failed attempt it retries; ``before_sleep``: before each
    wait (``state.next_action.sleep`` is the wait); ``wake``: set (by a readiness probe) to
    end the wait now, the server being back (it is cleared as the wait ends)."""
    def sleep(seconds: float) -> None:
        if wake is None:
            stop.wait(seconds)
            return
        # the wait on ``stop`` in slices of at most a second, ending after the slice in
        # which ``wake`` was set
        whole, rest = divmod(seconds, 1.0)
        for part in [1.0] * int(whole) + ([rest] if rest else []):
            if stop.wait(part) or wake.is_set():
                break
        wake.clear()

    return Retrying(retry=retry, wait=backoff_wait(first, cap), sleep=sleep,
                    stop=lambda state: stop.is_set(), after=after or after_nothing,
                    before_sleep=before_sleep, retry_error_callback=lambda state: None)


class KeyValueLog:
    """A stdlib logger behind the ``warning(event, **fields)`` of a structlog logger (what
    ``Stall`` calls): ``event key=value ...``."""

    def __init__(self, target: logging.Logger) -> None:
        self.target = target

    def _line(self, event: str, fields: dict[str, Any]) -> str:
        return " ".join([event, *(f"{k}={v}" for k, v in fields.items())])

    def info(self, event: str, **fields: Any) -> None:
        self.target.info("%s", self._line(event, fields))

    def warning(self, event: str, **fields: Any) -> None:
        self.target.warning("%s", self._line(event, fields))


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


def _chain(error: BaseException) -> list[BaseException]:
    found: list[BaseException] = []
    seen: BaseException | None = error
    while seen is not None and seen not in found and len(found) < 10:
        found.append(seen)
        seen = seen.__cause__ or seen.__context__
    return found


def dependency_of(error: BaseException, table_store: str = "hbase",
                  fallback: str = "the purge run") -> str:
    """Which server a failed run was waiting on, from the error and its causes
    (``fallback`` when none of them names one)."""
    modules = [type(e).__module__ for e in _chain(error)]
    if any(isinstance(e, TableStoreError) for e in _chain(error)) or any(
            m.startswith(("thriftpy2", "happybase")) for m in modules):
        return "hbase" if table_store == "hbase" else "the table store"
    if any(m.startswith(("psycopg", "eventsourcing", "sqlite3")) for m in modules):
        return "the event store"
    if any(m.startswith(("aiokafka", "kafka")) for m in modules):
        return "kafka"
    return fallback
