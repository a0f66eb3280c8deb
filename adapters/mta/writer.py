"""The MTA paths' writer: one thread (the store has one writer per process) that takes
every delivery waiting when it starts an append and appends them together: with several
LMTP connections at once, one fsync stores the messages of all of them (group commit). Each
message is checked on its own first, so a bad one is refused alone. The server opens the
log only; a second process (``adapters.readside.follower``), woken after each append, keeps
the read models current, so a locked ``tables.sqlite`` delays no mail.

The store is opened on the first transaction and again after a failure that may have
broken it; a data directory that went away (an unmounted volume, a directory moved aside)
is noticed before each append, so nothing is written to files no longer in place. A
handed-off lda's delivery is checked right before its append: its client still there and
within its deadline (``_refusal``).

Every MTA delivery carries an idempotency key, and nearly every key is new: the append is
tried without reading the keys' claims first (``deliver_checked(new_keys=True)``). A key
already claimed (the MTA retrying a delivery that was stored) makes that append fail whole,
nothing written, and the retry reads the claims and answers the duplicate.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import os
import threading
import time
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adapters.config.settings import load_settings
from adapters.embedded import Letterlog
from adapters.files import datadir
from adapters.mta.delivery import MtaOptions, delivery_fields, lock_timeout, split_recipient
from adapters.mta.replies import Outcome, classify, stored, temporary
from adapters.readside.follower import Follower
from domain.errors import LetterlogError, StoreUnavailable

if TYPE_CHECKING:
    from adapters.face import Store

log = logging.getLogger("letterlog.lmtp")

FOLLOWER_LINGER = 0.05
"""Seconds the projecting process waits after each catch-up: woken once per message, it
would otherwise project one message at a time and take as much CPU as the deliveries
(measured: 1.2-1.5 ms a message against 0.4-0.6 with 50 ms). The read models lag the log
by up to that much more; a reader that needs them current catches up itself."""


_NOT_FIELDS = frozenset({"options", "alive", "deadline"})
"""What a handed-off lda's item carries besides ``delivery_fields``' arguments."""


def _refusal(item: dict[str, Any]) -> Outcome | None:
    """Why a handed-off lda's message must not be appended (checked right before the
    append): its client is gone (Postfix killed it at its time limit, and bounces the
    message: storing it would be bounce-then-deliver), or its deadline passed (its answer
    is a temporary failure by now). None for LMTP's items and for an lda still waiting."""
    alive = item.get("alive")
    if alive is not None and not alive():
        return temporary("the delivery agent went away before the append; nothing stored")
    deadline = item.get("deadline")
    if deadline is not None and time.monotonic() > deadline:
        return temporary("delivery timed out (store busy or slow); nothing stored")
    return None


class _Refused(Exception):
    """An append not started, and why (``_refusal``)."""

    def __init__(self, outcome: Outcome) -> None:
        super().__init__(outcome.text)
        self.outcome = outcome


class Writer:
    """The store and its one writer thread: deliveries wait in ``pending`` and each append
    takes all of them (group commit)."""

    def __init__(self, data: Path, options: MtaOptions) -> None:
        self.data = data
        self.options = options
        self.thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="lmtp-writer")
        self._lock = threading.Lock()
        self._pending: list[tuple[dict[str, Any], concurrent.futures.Future[Outcome]]] = []
        self._stack: ExitStack | None = None
        self._store: Store | None = None
        self._follower: Any = None  # keeps the read models current (embedded tables)
        self._identity: tuple[int, int] | None = None
        self._log_file: Path | None = None  # what ``_where`` stats (the settings decide)

    # -- the store ------------------------------------------------------------------------
    def _open(self) -> Store:
        """The store, opened if needed; StoreUnavailable if its directory is not the one
        opened (moved away, unmounted)."""
        identity = self._where()
        if self._store is not None and identity != self._identity:
            self.close_store()
            raise StoreUnavailable(f"{self.data}: the data directory went away")
        if self._store is None:
            stack = ExitStack()
            try:
                store = stack.enter_context(Letterlog.open(
                    self.data, create=False, read_models=False,
                    lock_timeout=lock_timeout(self.options.timeout)))
                if store.settings.table_store == "embedded":
                    follower = Follower(store.settings.model_dump_json(), FOLLOWER_LINGER)
                    self._follower = follower
                    stack.callback(follower.stop, 30.0)
            except BaseException:
                stack.close()
                raise
            self._stack, self._store, self._identity = stack, store, identity
        return self._store

    def _wake(self) -> None:
        """The follower projects what was just appended (a new one if it is gone)."""
        follower = self._follower
        if follower is not None and not follower.wake():
            log.warning("the projecting process is gone (exit %s); starting another",
                        follower.proc.poll())
            assert self._store is not None  # a follower runs only beside an open store
            self._follower = Follower(self._store.settings.model_dump_json(), FOLLOWER_LINGER)
            assert self._stack is not None
            self._stack.callback(self._follower.stop, 30.0)
            self._follower.wake()

    def _where(self) -> tuple[int, int]:
        """The identity of what holds the store here: the SQLite event log, or, with the log
        in PostgreSQL, the data directory itself (it holds this host's files of the store)."""
        if self._log_file is None:
            sqlite = load_settings(data=self.data).event_store == "sqlite"
            self._log_file = self.data / datadir.LOG if sqlite else self.data
        try:
            st = os.stat(self._log_file)
        except OSError as e:
            raise StoreUnavailable(f"{self.data}: no letterlog store here "
                                   f"({e.strerror or e})") from None
        return st.st_dev, st.st_ino

    def close_store(self) -> None:
        stack, self._stack, self._store, self._follower = self._stack, None, None, None
        if stack is not None:
            try:
                stack.close()
            except Exception as e:  # noqa: BLE001 - closing a broken store: reopened next time
                log.warning("closing the store failed (%s: %s); it is opened afresh for the "
                            "next delivery", type(e).__name__, str(e).splitlines()[0][:200]
                            if str(e) else "")

    # -- deliveries ----------------------------------------------------------------------
    def check_address(self, recipient: str) -> Outcome | None:
        """A refusal of a ``recipient`` that names no account, or None (no store read)."""
        try:
            split_recipient(recipient, self.options.recipient_delimiter)
        except BaseException as e:  # noqa: BLE001 - every failure is a reply
            return classify(e)
        return None

    def check_recipient(self, recipient: str) -> Outcome | None:
        """In the writer thread: a refusal of ``recipient`` at RCPT (one that names no
        account, or an account the store does not have), or None."""
        try:
            account, _ = split_recipient(recipient, self.options.recipient_delimiter)
            if self.options.accounts_must_exist:
                self._open().require_account(account)
        except BaseException as e:  # noqa: BLE001 - every failure is a reply
            return self._failed(e)
        return None

    def submit(self, items: Sequence[dict[str, Any]]) -> list[concurrent.futures.Future[Outcome]]:
        """Queues one delivery per item (``delivery_fields``' arguments; a handed-off lda's
        also its ``options``, ``alive`` and ``deadline``: ``_NOT_FIELDS``) and a flush."""
        futures: list[concurrent.futures.Future[Outcome]] = [
            concurrent.futures.Future() for _ in items]
        with self._lock:
            self._pending.extend(zip(items, futures, strict=True))
        self.thread.submit(self._flush)
        return futures

    def _flush(self) -> None:
        with self._lock:
            batch, self._pending = self._pending, []
        if not batch:
            return
        try:
            store = self._open()
        except BaseException as e:  # noqa: BLE001
            outcome = self._failed(e)
            for _, future in batch:
                future.set_result(outcome)
            return
        at = time.monotonic() + self.options.timeout
        checked, waiting = [], []
        for item, future in batch:
            try:
                args = {k: v for k, v in item.items() if k not in _NOT_FIELDS}
                fields = delivery_fields(store, options=item.get("options", self.options),
                                         **args)
                c = store.check(**fields)
                refusal = _refusal(item)  # a handed-off lda's client gone, or its time up
                if refusal is not None:
                    future.set_result(refusal)
                    continue
                checked.append(c)
                waiting.append((fields, future, item))
            except BaseException as e:  # noqa: BLE001 - this message alone is refused
                future.set_result(self._failed(e, item))
        if not checked:
            return
        store.guard_appends(self._guard(at, [item for _, _, item in waiting]))
        try:
            results = store.deliver_checked(checked, new_keys=True)
        except BaseException:  # noqa: BLE001 - one at a time, so each gets its own answer
            results = None
        if results is None or len(waiting) == 1:
            for c, (fields, future, item) in zip(checked, waiting, strict=True):
                store.guard_appends(self._guard(at, [item]))
                try:
                    [d] = results if results is not None else store.deliver_checked(
                        [c], new_keys=True)
                except _Refused as e:
                    future.set_result(e.outcome)
                except BaseException as e:  # noqa: BLE001
                    future.set_result(self._failed(e, item))
                else:
                    self._wake()
                    future.set_result(self._stored(d, fields))
            return
        self._wake()
        for d, (fields, future, _) in zip(results, waiting, strict=True):
            future.set_result(self._stored(d, fields))

    @staticmethod
    def _guard(at: float, items: Sequence[dict[str, Any]]) -> Any:
        """Checked before every attempt to append (``append_guard``): no append starts after
        ``at`` (the batch's replies have timed out by then: a later commit would only be
        found as a duplicate by the MTA's retry), nor for a handed-off lda whose client is
        gone or whose own deadline passed (``_refusal``)."""

        @contextlib.contextmanager
        def guard() -> Any:
            if time.monotonic() > at:
                raise TimeoutError("delivery timed out (store busy or slow)")
            for item in items:
                refusal = _refusal(item)
                if refusal is not None:
                    raise _Refused(refusal)
            yield

        return guard

    def _stored(self, d: Any, fields: dict[str, Any]) -> Outcome:
        return stored(d, fields)

    def _failed(self, error: BaseException, item: dict[str, Any] | None = None) -> Outcome:
        store = self._store
        permanent = store is not None and store.settings.quota_exceeded == "permanent"
        outcome = classify(error, self.data, quota_permanent=permanent)
        if outcome.temporary and not isinstance(error, LetterlogError):
            self.close_store()  # an I/O error, a full disk...: open afresh next time
        where = "" if item is None else (
            f"{item.get('queue_id') or '-'}: to=<{item.get('recipient', '')}>, ")
        log.warning("%s%s failure: %s", where, "temporary" if outcome.temporary
                    else "permanent", outcome.logged)
        return outcome

    def close(self) -> None:
        self.thread.submit(self.close_store).result()
        self.thread.shutdown(wait=True)
