"""The dispatcher: hands each pending rule event to its processing application and records
the outcome in the log, at least once.

For each pending event: append ``Processing``, call the application (a webhook; a Kafka
topic), append ``Completed`` or ``Failed`` (reason, attempts). Status is in the log, so a
rebuild or a replay never dispatches again. A dispatcher that dies between the call and its
record leaves the event ``processing``: one dispatcher runs at a time per store (an ``flock``
on ``<data>/dispatcher.lock``, freed by the kernel when the holder dies), so the next one to
take the lock finds such events orphaned and hands them over again; the event id, sent as
the idempotency key, lets the application drop the repeat.

``run_dispatcher`` (``letterlog dispatcher``) waits out the outage of a server it needs
(HBase or another table store for the rule events, PostgreSQL for the log) as the relay,
the workers and the purger do (ADR 0048, ADR 0070): a pass that fails is tried again with
capped, jittered back-off on a store opened afresh, for ever; it says once that the server
is not answering (after 5 s), reminds every minute, says once when it answers again, and
exits only on a mistake no retry fixes (``FATAL``). An application's own failure (a webhook
or Kafka that does not answer) is the event's, recorded as before.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from uuid import UUID

from tenacity import RetryCallState, retry_if_exception_type, retry_if_not_exception_type

from adapters.files.filemodes import private_file
from adapters.operations.outages import (
    KeyValueLog,
    Stall,
    dependency_of,
    quiet_libraries,
    waiting_out,
)
from adapters.rules.kafka import KafkaTopic
from adapters.rules.webhook import Outcome, Webhook
from domain.errors import SettingsError, StoreBusy, StoreUnavailable
from domain.rules import PENDING, PROCESSING

if TYPE_CHECKING:
    from adapters.face import Store

LOCK_NAME = "dispatcher.lock"

log = logging.getLogger("letterlog.dispatcher")


class DispatcherRunning(StoreBusy):
    """Another dispatcher holds the store's dispatcher lock; nothing was done."""


#: mistakes no retry fixes: the dispatcher exits on them (one line, exit status 2)
FATAL: tuple[type[BaseException], ...] = (SettingsError, StoreUnavailable, DispatcherRunning)


class Application(Protocol):
    def deliver(self, application: dict[str, Any], document: dict[str, Any],
                secret: str) -> Outcome: ...


@contextlib.contextmanager
def dispatcher_lock(data: str | os.PathLike[str]) -> Iterator[None]:
    path = private_file(Path(data) / LOCK_NAME)
    with open(path, "r+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = path.read_text().strip()
            raise DispatcherRunning(
                f"{path.parent}: a dispatcher is running ({holder or 'pid unknown'}); one at "
                "a time per store: `letterlog processes stop` or wait for it") from None
        fh.truncate(0)
        fh.write(f"pid {os.getpid()}\n")
        fh.flush()
        try:
            yield
        finally:
            fh.truncate(0)
            fcntl.flock(fh, fcntl.LOCK_UN)


def document(event: Mapping[str, Any]) -> dict[str, Any]:
    """What the application receives (no personal data of the message: ids and names)."""
    keys = ("id", "rule", "rule_id", "rule_version", "trigger", "message_id", "account_id",
            "mailbox", "mailbox_id", "uid", "raised_at", "properties")
    return {k: event[k] for k in keys}


class Dispatcher:
    def __init__(self, store: Store, applications: Mapping[str, Application] | None = None,
                 *, where: str | None = None) -> None:
        settings = store.settings
        self.store = store
        self.where = where or f"{socket.gethostname()}:{os.getpid()}"
        self._owned: list[Any] = []
        if applications is None:
            hook = Webhook(timeout=settings.dispatch_timeout_seconds,
                           attempts=settings.dispatch_attempts,
                           backoff=settings.dispatch_backoff_seconds)
            self._owned.append(hook)
            applications = {"webhook": hook, "kafka": _LazyKafka(settings, self._owned)}
        self.applications = dict(applications)

    def close(self) -> None:
        for owned in self._owned:
            owned.close()

    def run_once(self) -> dict[str, int]:
        """Hands over every pending (and orphaned processing) event; returns counts."""
        with dispatcher_lock(self.store.settings.data):
            return self._pass()

    def _pass(self) -> dict[str, int]:
        counts = {"dispatched": 0, "complete": 0, "failed": 0}
        todo = [e for e in self.store.rule_events() if e["status"] in (PENDING, PROCESSING)]
        book = self.store.rule_book()
        secrets: dict[str, str] = dict(book.secrets) if book is not None else {}
        for event in todo:
            outcome = self.dispatch(event, secrets.get(event["rule_id"], ""))
            counts["dispatched"] += 1
            counts["complete" if outcome.ok else "failed"] += 1
        return counts

    def dispatch(self, event: Mapping[str, Any], secret: str) -> Outcome:
        event_id = UUID(event["id"])
        current = self.store.rule_event_record(event_id)  # the log's word, not the read model's
        if current.status not in (PENDING, PROCESSING):
            return Outcome(current.status == "complete", 0)
        self.store.rule_event_processing(event_id, self.where)
        kind = event["application"].get("kind", "")
        app = self.applications.get(kind)
        if app is None:
            outcome = Outcome(False, 0, f"no processing application {kind!r} here")
        else:
            try:
                outcome = app.deliver(event["application"], document(event), secret)
            except Exception as e:  # an application's own failure is the event's failure
                outcome = Outcome(False, 1, f"{type(e).__name__}: {e}")
        if outcome.ok:
            self.store.rule_event_completed(event_id, outcome.attempts, self.where)
        else:
            self.store.rule_event_failed(event_id, outcome.attempts,
                                         outcome.reason or "failed", self.where)
        return outcome


def run_dispatcher(open_store: Callable[[], Store], stop: threading.Event, *,
                   opened: Callable[[Any], Callable[[dict[str, int], dict[str, int]], None]
                                    | None] | None = None,
                   applications: Mapping[str, Application] | None = None,
                   first_backoff: float = 1.0, max_backoff: float = 30.0) -> None:
    """Until ``stop``: a pass every ``dispatch_interval_seconds``, through any outage of the
    store's servers (the module docstring). ``open_store()`` opens the store (again after a
    failed pass); ``opened(store)``, called after the first open, may return the report
    called after each pass with (counts per status, this pass's counts): the metrics."""

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    quiet_libraries()
    said = KeyValueLog(log)
    stalls: dict[str, Stall] = {}
    held = contextlib.ExitStack()
    dispatcher: Dispatcher | None = None
    store: Store | None = None
    report: Callable[[dict[str, int], dict[str, int]], None] | None = None
    started = 0.0  # when the current attempt began

    def one_pass() -> dict[str, int] | None:
        nonlocal dispatcher, store, report, started
        if stop.is_set():
            return None
        started = time.monotonic()
        if store is None:
            store = open_store()
            if dispatcher is None:
                held.enter_context(dispatcher_lock(store.settings.data))
                dispatcher = Dispatcher(store, applications)
                report = opened(store) if opened is not None else None
            dispatcher.store = store
        store.catch_up()
        assert dispatcher is not None  # made with the store it was opened with, above
        handed = dispatcher._pass()
        if report is not None:
            report(store.rule_event_counts(), handed)
        return handed

    def failed(state: RetryCallState) -> None:
        """A server's outage: said by its stall; the store is opened afresh next time."""
        nonlocal store
        error = state.outcome.exception() if state.outcome else None
        if error is not None:
            table_store = store.settings.table_store if store is not None else "hbase"
            what = dependency_of(error, table_store, fallback="the dispatch pass")
            stalls.setdefault(what, Stall(what, said)).failed(error, started)
            log.debug("dispatch pass failed (%s: %s)", type(error).__name__, error)
        if store is not None:
            with contextlib.suppress(Exception):
                store.close()
            store = None

    retrying = waiting_out(stop, first=first_backoff, cap=max_backoff, after=failed,
                           retry=retry_if_exception_type(Exception)
                           & retry_if_not_exception_type(FATAL))
    try:
        with held:
            while not stop.is_set():
                if retrying(one_pass) is None:  # stopped, maybe while waiting out an outage
                    break
                for stall in stalls.values():
                    stall.ok()
                assert store is not None  # a pass ran on it
                stop.wait(store.settings.dispatch_interval_seconds)
    finally:
        if dispatcher is not None:
            dispatcher.close()
        if store is not None:
            with contextlib.suppress(Exception):
                store.close()
    log.info("dispatcher stopped")


class _LazyKafka:
    """The Kafka application, built on first use (aiokafka is an optional dependency)."""

    def __init__(self, settings: Any, owned: list[Any]) -> None:
        self.settings = settings
        self.owned = owned
        self.app: Any = None

    def deliver(self, application: dict[str, Any], document: dict[str, Any],
                secret: str) -> Outcome:
        if self.app is None:
            self.app = KafkaTopic(self.settings)
            self.owned.append(self.app)
        result: Outcome = self.app.deliver(application, document, secret)
        return result
