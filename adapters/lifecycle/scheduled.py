"""``letterlog purger``: the purge jobs on a schedule, through any outage of their servers.

A run that fails because PostgreSQL (the log), HBase (the tables) or another server does not
answer is retried with capped, jittered backoff (tenacity, through ``outages.waiting_out``)
on a store opened afresh; the purger says once that the server is not answering, reminds
every minute while it stays so, says when it answers again, and never exits on an outage
(supervisord would give up on a process that keeps dying). Only a mistake no retry fixes
ends it: settings that do not validate, a data directory that holds no store or is open to
others (``SettingsError``, ``StoreUnavailable``), raised as they are (exit status 2, one
line).

One line per run (``purge run: purged=... expired=... kept=... payloads_freed=...``) through
the stdlib logger ``letterlog.purger``.

``user_purge`` (when given) runs after each purge run: the user purge job
(``adapters/lifecycle/userpurge.py``), which acts only when ``user_purge_interval_days``
have passed since its last accepted run; its line says what it removed, or (a warning) why
it refused to decide, and a refused job is tried again at the next run.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from tenacity import RetryCallState, retry_if_exception_type, retry_if_not_exception_type

from adapters.operations.outages import (
    KeyValueLog,
    Stall,
    dependency_of,
    quiet_libraries,
    waiting_out,
)
from domain.errors import SettingsError, StoreUnavailable

__all__ = ["KeyValueLog", "run_purger"]

log = logging.getLogger("letterlog.purger")

#: mistakes no retry fixes: the purger exits on them (exit status 2)
FATAL: tuple[type[BaseException], ...] = (SettingsError, StoreUnavailable)


@runtime_checkable
class PurgesRuleEvents(Protocol):
    """A store with event rules (``Store.purge_rule_events``): a purge run purges their
    events by status too."""

    def purge_rule_events(self, now: datetime | None = None, *,
                          dry_run: bool = False) -> dict[str, Any]: ...


def run_purger(data: Path, queues: Sequence[str] | None, interval: float | None,
               stop: threading.Event, *, open_store: Callable[[Path], Any],
               first_backoff: float = 1.0, max_backoff: float = 30.0,
               user_purge: Callable[[Any, datetime], Any] | None = None) -> None:
    """Runs the purge jobs every ``interval`` seconds (default: the store's
    ``purge_interval_seconds``) until ``stop`` is set; see the module docstring."""

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    quiet_libraries()
    said = KeyValueLog(log)
    stalls: dict[str, Stall] = {}
    store: Any = None
    table_store = "hbase"
    started = 0.0  # when the current attempt began

    def one_run() -> tuple[dict[str, Any], Any] | None:
        """A purge run on the store (opened first if need be); None: stopped."""
        nonlocal store, table_store, started
        if stop.is_set():
            return None
        started = time.monotonic()
        if store is None:
            store = open_store(data)
            table_store = store.settings.table_store
        report = store.purge(datetime.now(UTC), queues).as_dict()
        if isinstance(store, PurgesRuleEvents) and not queues:  # event rules: by status too
            report["rule_events"] = store.purge_rule_events(datetime.now(UTC))
        return report, user_purge(store, datetime.now(UTC)) if user_purge else None

    def failed(state: RetryCallState) -> None:
        """A server's outage: said by its stall; the store is opened afresh next time."""
        nonlocal store
        error = state.outcome.exception() if state.outcome else None
        if error is not None:
            what = dependency_of(error, table_store)
            stalls.setdefault(what, Stall(what, said)).failed(error, started)
            log.debug("purge run failed (%s: %s)", type(error).__name__, error)
        if store is not None:
            with contextlib.suppress(Exception):
                store.close()
            store = None

    # tenacity: any failure but a FATAL one is waited out, for ever (module docstring)
    retrying = waiting_out(stop, first=first_backoff, cap=max_backoff, after=failed,
                           retry=retry_if_exception_type(Exception)
                           & retry_if_not_exception_type(FATAL))
    try:
        while not stop.is_set():
            done = retrying(one_run)
            if done is None:  # stopped, maybe while waiting out an outage
                break
            report, users = done
            for stall in stalls.values():
                stall.ok()
            log.info("purge run: purged=%d expired=%d kept=%d payloads_freed=%d "
                     "payload_bytes_freed=%d", report["purged"], report["expired"],
                     report["kept"], report["payloads_freed"], report["payload_bytes_freed"])
            if users is not None and users.status != "nothing":  # a store with no records
                log.log(logging.WARNING if users.status == "refused" else logging.INFO,
                        "%s", users.line())
            if store.completion is not None and not store.completion.complete:
                log.warning("%s", store.completion.line())
            stop.wait(interval if interval is not None else store.settings.purge_interval_seconds)
    finally:
        if store is not None:
            with contextlib.suppress(Exception):
                store.close()
    log.info("purger stopped")
