"""The LMTP server's writer, in its writer process (``adapters.mta.writerprocess``, ADR
0114): it takes every delivery waiting when it starts an append and appends them together:
with several LMTP connections at once, one fsync stores the messages of all of them (group
commit). Each
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

import contextlib
import logging
import os
import socket
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


_NOT_FIELDS = frozenset({"options", "watch", "deadline"})
"""What a handed-off lda's item carries besides ``delivery_fields``' arguments."""


def _refusal(item: dict[str, Any]) -> Outcome | None:
    """Why a handed-off lda's message must not be appended (checked right before the
    append): its client is gone (Postfix killed it at its time limit, and bounces the
    message: storing it would be bounce-then-deliver), or its deadline passed (its answer
    is a temporary failure by now). None for LMTP's items and for an lda still waiting."""
    watch = item.get("watch")
    if watch is not None and not _connected(watch):
        return temporary("the delivery agent went away before the append; nothing stored")
    deadline = item.get("deadline")
    if deadline is not None and time.monotonic() > deadline:
        return temporary("delivery timed out (store busy or slow); nothing stored")
    return None


def _connected(watch: socket.socket) -> bool:
    """Whether a handed-off lda's client is still at the other end of ``watch``."""
    try:
        return watch.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False


class _Refused(Exception):
    """An append not started, and why (``_refusal``)."""

    def __init__(self, outcome: Outcome) -> None:
        super().__init__(outcome.text)
        self.outcome = outcome


class Writer:
    """The store and what appends to it: ``deliver`` appends the deliveries it is given
    together (group commit), ``check_recipient`` answers RCPT."""

    def __init__(self, data: Path, options: MtaOptions) -> None:
        self.data = data
        self.options = options
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
    def check_recipient(self, recipient: str) -> Outcome | None:
        """A refusal of ``recipient`` at RCPT (one that names no
        account, or an account the store does not have), or None."""
        try:
            account, _ = split_recipient(recipient, self.options.recipient_delimiter)
            if self.options.accounts_must_exist:
                self._open().require_account(account)
        except BaseException as e:  # noqa: BLE001 - every failure is a reply
            return self._failed(e)
        return None

    def deliver(self, items: Sequence[dict[str, Any]]) -> list[Outcome]:
        """Delivers ``items`` (``delivery_fields``' arguments; a handed-off lda's also its
        ``options``, ``watch`` and ``deadline``: ``_NOT_FIELDS``) in one append: each
        message's outcome, in order. Each is checked on its own first, so a bad one is
        refused alone; if the append fails, each is tried alone for its own answer."""
        outcomes: list[Outcome | None] = [None] * len(items)
        try:
            store = self._open()
        except BaseException as e:  # noqa: BLE001
            outcome = self._failed(e)
            return [outcome] * len(items)
        at = time.monotonic() + self.options.timeout
        checked, waiting = [], []
        for i, item in enumerate(items):
            try:
                args = {k: v for k, v in item.items() if k not in _NOT_FIELDS}
                fields = delivery_fields(store, options=item.get("options", self.options),
                                         **args)
                c = store.check(**fields)
                refusal = _refusal(item)  # a handed-off lda's client gone, or its time up
                if refusal is not None:
                    outcomes[i] = refusal
                    continue
                checked.append(c)
                waiting.append((fields, i, item))
            except BaseException as e:  # noqa: BLE001 - this message alone is refused
                outcomes[i] = self._failed(e, item)
        if checked:
            self._append(store, at, checked, waiting, outcomes)
        return [o if o is not None else temporary("not delivered") for o in outcomes]

    def _append(self, store: Store, at: float, checked: list[Any],
                waiting: list[tuple[dict[str, Any], int, dict[str, Any]]],
                outcomes: list[Outcome | None]) -> None:
        store.guard_appends(self._guard(at, [item for _, _, item in waiting]))
        try:
            results = store.deliver_checked(checked, new_keys=True)
        except BaseException:  # noqa: BLE001 - one at a time, so each gets its own answer
            results = None
        if results is None or len(waiting) == 1:
            for c, (fields, i, item) in zip(checked, waiting, strict=True):
                store.guard_appends(self._guard(at, [item]))
                try:
                    [d] = results if results is not None else store.deliver_checked(
                        [c], new_keys=True)
                except _Refused as e:
                    outcomes[i] = e.outcome
                except BaseException as e:  # noqa: BLE001
                    outcomes[i] = self._failed(e, item)
                else:
                    self._wake()
                    outcomes[i] = self._stored(d, fields)
            return
        self._wake()
        for d, (fields, i, _) in zip(results, waiting, strict=True):
            outcomes[i] = self._stored(d, fields)

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
        self.close_store()
