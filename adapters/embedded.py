"""The embedded letterlog: one object an application opens on a data directory.

    store = Letterlog.open("letterlog-data")
    d = store.deliver(account="ada@example.org", raw=raw_bytes, labels=["work"])
    store.flag(d.message_id, ["\\\\Seen"])
    for row in store.messages("ada@example.org", "INBOX"):
        ...

Commands append events (SQLite in the data directory by default, or PostgreSQL by settings);
before a command returns, the read models are caught up, so a reader sees its own writes.

``Letterlog`` is the embedders' door (``Letterlog.open``, which calls ``adapters.bootstrap``)
and the steps every command shares: running it, then letting the read models catch up
(``_command``, ``_project``), here or in a second process. Its commands and queries are its
parts, in ``adapters.facade`` (deliveries, messages, mailboxes, access, purges, erasure,
completing, reading), ``adapters.readside.queries`` and ``adapters.rules.api``.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, overload

from adapters.bootstrap.store import letterlog
from adapters.config.settings import Settings, load_settings
from adapters.facade.access import Access
from adapters.facade.completing import Completing
from adapters.facade.deliveries import Deliveries
from adapters.facade.erasure import Erasure
from adapters.facade.mailboxes import Mailboxes
from adapters.facade.messages import Messages
from adapters.facade.purges import Purges
from adapters.facade.reading import Reading
from adapters.files.datadir import check_data_dir
from adapters.payloads import ClosingPayloads
from adapters.readside.queries import ReadModelQueries
from adapters.rules.api import RulesAPI
from adapters.startup.collector import bulk_collections
from domain.errors import SettingsError
from domain.ports import PayloadStore
from domain.results import Change, Delivery, Reservation, Saved, Upload
from domain.service import Mailstore

if TYPE_CHECKING:
    from adapters.eventlog.store import MailLog
    from adapters.face import Face, Store
    from adapters.lifecycle.jobs import PurgeJobs
    from adapters.lifecycle.shredding import Shredding
    from adapters.readside.host import ProjectionHost

    _Store = Store  # the face it implements, checked by mypy (not a base at run time: ADR 0077)
else:
    _Store = object

T = TypeVar("T")
log = logging.getLogger("letterlog")


def saved_by(result: object) -> Saved | None:
    """The events a command's result says it appended (``domain.results``: ``saved``), in
    log order; None when the result does not say (then the log is read)."""
    if isinstance(result, (Change, Delivery, Upload, Reservation)):
        return result.saved
    if isinstance(result, list) and all(isinstance(r, Delivery) for r in result):
        # the deliveries of one append share its ``saved``: each distinct one read once (a
        # batch of n messages was n × n pairs)
        distinct: dict[int, Saved] = {id(r.saved): r.saved for r in result}
        if len(distinct) == 1:
            return next(iter(distinct.values()))
        found = {position: event for saved in distinct.values() for position, event in saved}
        return tuple(sorted(found.items(), key=lambda item: item[0]))
    return None


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class Letterlog(Deliveries, Messages, Mailboxes, Access, Purges, Erasure, Completing, Reading,
                ReadModelQueries, RulesAPI, _Store):
    """Commands and queries of one letterlog store.

    Built by ``adapters.bootstrap.store.letterlog`` (``Letterlog.open``): the event log, the payload
    store, the command side (``mail``) and the read models (``projections``, None when this
    process keeps none). Every command ends with an explicit step: the read models catch up
    with the events it has just saved (``_project``)."""

    def __init__(self, settings: Settings, log: MailLog, payloads: PayloadStore,
                 mail: Mailstore, projections: ProjectionHost | None = None,
                 read_side: Callable[[], ProjectionHost] | None = None, *,
                 shredding: Shredding, purge_jobs: Callable[[Any], PurgeJobs]) -> None:
        self.settings = settings
        self.log = log
        self.payloads = payloads
        self.mail = mail
        self._projections = projections
        self._read_side = read_side  # opens the read side on first use (table_store=hbase)
        self._read_side_lock = threading.Lock()
        self._follower: Any = None  # a second process projecting (``projecting_in_a_second..``)
        self._unread_writes = False  # commands left to the follower since a query caught up
        self.shredding = shredding  # what follows a purge's or erasure's append (bootstrap)
        self._purge_jobs = purge_jobs  # the purge jobs on a read side (bootstrap)
        # the default quota (settings), where an account has none of its own
        self.quota_defaults = (settings.quota_bytes, settings.quota_messages)

    # -- opening ----------------------------------------------------------------------------
    @overload
    @classmethod
    def open(cls, data: str | os.PathLike[str] | None = None, *, create: bool = True,
             read_models: bool = True, user: None = None, **overrides: Any) -> Store: ...

    @overload
    @classmethod
    def open(cls, data: str | os.PathLike[str] | None = None, *, create: bool = True,
             read_models: bool = True, user: str, **overrides: Any) -> Face: ...

    @classmethod
    def open(cls, data: str | os.PathLike[str] | None = None, *, create: bool = True,
             read_models: bool = True, user: str | None = None,
             **overrides: Any) -> Store | Face:
        """Opens the store in ``data`` (default ``LETTERLOG_DATA``; ``overrides`` are settings).
        With ``create=False`` (a reader) a directory holding no store is a ``StoreUnavailable``
        error naming it, and nothing is created. ``read_models=False``: the log and the
        command side only (``show``), the read models neither opened nor caught up.
        ``user``: the store acting as that user (``as_user``: the user's ``Face``, a
        ``CallerView``, every command checked against its rights); without it, the
        administrator's ``Store`` (``adapters.face``)."""
        if data is not None:
            overrides["data"] = Path(data)
        settings = load_settings(**overrides)
        check_data_dir(Path(settings.data), settings.event_store == "sqlite", create,
                       allow_shared=settings.allow_shared_keys, vault=settings.key_vault)
        store = letterlog(settings, facade=cls, read_models=read_models)
        if user is None:
            return store
        try:
            return store.as_user(user)
        except BaseException:
            store.close()
            raise

    @property
    def projections(self) -> ProjectionHost | None:
        """The read side; for ``table_store=hbase`` opened (connected) on first use."""
        if self._projections is None and self._read_side is not None:
            with self._read_side_lock:
                if self._read_side is not None:
                    self._projections, self._read_side = self._read_side(), None
        return self._projections

    @projections.setter
    def projections(self, host: ProjectionHost | None) -> None:
        self._projections = host

    def close(self) -> None:
        if self._projections is not None:
            self._projections.close()
        self.log.close()
        if isinstance(self.payloads, ClosingPayloads):  # the file store's put threads
            self.payloads.close()

    def __enter__(self) -> Letterlog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the log and the read models: catching up after each command -------------------------
    def max_position(self) -> int:
        return int(self.log.recorder.max_notification_id() or 0)

    def catch_up(self) -> int:
        if self._projections is None:  # none, or one others keep current (not opened yet)
            return 0
        return int(self._projections.catch_up())

    @contextmanager
    def projecting_in_a_second_process(self) -> Iterator[bool]:
        """Commands in this block leave the read models to a second process that follows the
        log (``adapters.readside.follower``): this one parses, decides and appends while that
        one projects, on two cores at once (ADR 0027). After each command the follower is
        woken by a byte on its standard input; when the block ends its input is closed, it
        catches up and exits, and this process catches up with anything left (nothing,
        unless the follower failed: then it is logged and done here). So the read models are
        current when the block returns, as after any command, and a query inside the block
        catches up first, so it shows every command this process made (ADR 0037: a
        long-lived process delivering one message at a time). Yields whether a follower
        runs: not without embedded read models (they are HBase's), not on one core (the two
        processes would take turns and the follower decodes every event again), not nested."""
        with bulk_collections():
            if (self._projections is None or not self._projections.live
                    or self._follower is not None or _usable_cores() < 2):
                yield False
                return
            with self._following() as following:
                yield following

    @contextmanager
    def _following(self) -> Iterator[bool]:
        from adapters.readside.follower import Follower  # local: not for show: pipelined only

        follower = Follower(self.settings.model_dump_json())
        self._follower = follower
        try:
            yield True
        finally:
            self._follower = None
            code = follower.stop()
            if code != 0:
                log.warning("the projecting process exited with %s; projecting here", code)
            self.catch_up()

    def _wake_follower(self) -> bool:
        """Tells the follower the log has grown; False if it is gone (then project here)."""
        return bool(self._follower.wake())

    def _command(self, command: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Runs a command of ``mail``, then (explicitly, even if it failed after saving) lets
        the read models catch up: with the events its result says it saved, or, when it
        failed or its result does not say (an extraction's bytes), from the log."""
        try:
            result = command(*args, **kwargs)
        except BaseException:
            self._project(None)
            raise
        self._project(saved_by(result))
        return result

    def _project(self, saved: Saved | None) -> None:
        """After a command: the read models catch up, starting with the events just saved
        (already in memory, so not read back and decoded from the log); ``None``: what the
        command saved is not known here, the log is read.

        The command has committed, so it must not be reported as failed (a caller would
        retry and duplicate it): if projecting fails, one more catch-up reads the log; if
        that fails too, the error is logged and the next command or ``catch_up`` tries
        again (tracking only moves with what was written).
        """
        if self._projections is None or saved == ():
            return
        if self._follower is not None and self._wake_follower():
            self._unread_writes = True
            return
        try:
            self._projections.catch_up(saved or ())
        except Exception:
            try:
                self._projections.catch_up()
            except Exception:
                log.exception("read models behind the log after position %d; the next "
                              "catch-up retries", saved[-1][0] if saved else 0)

    def read_side(self) -> ProjectionHost:
        """The read side, caught up with this process's own commands (``SettingsError``
        when this store keeps none)."""
        host: ProjectionHost = self._read()
        return host

    def _read(self) -> Any:
        host = self.projections
        if host is None:
            raise SettingsError("read models are not available in this store")
        if self._follower is not None and self._unread_writes:
            # Read your writes: commands of this block leave projecting to the follower,
            # which may not have reached them yet. Catching up waits for its lock, then
            # applies whatever is left (usually nothing). Once per command, not per
            # ``_read`` (a query calls it several times).
            self._unread_writes = False
            try:
                self.catch_up()
            except BaseException:
                self._unread_writes = True  # the next query tries again
                raise
        return host


if TYPE_CHECKING:
    _IMPLEMENTS: type[Store] = Letterlog  # mypy: every member of the face, none abstract
