"""The embedded letterlog: one object an application opens on a data directory.

    store = Letterlog.open("letterlog-data")
    d = store.deliver(account="ada@example.org", raw=raw_bytes, labels=["work"])
    store.flag(d.message_id, ["\\\\Seen"])
    for row in store.messages("ada@example.org", "INBOX"):
        ...

Commands append events (SQLite in the data directory by default, or PostgreSQL by settings);
before a command returns, the read models are caught up, so a reader sees its own writes.
"""

from __future__ import annotations

import copy
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, TypeVar
from uuid import UUID

from adapters.datadir import check_data_dir, exclusive
from adapters.eventlog.reader import read_events
from adapters.eventlog.records import account_events
from adapters.readside.queries import ReadModelQueries
from adapters.rules.api import RulesAPI
from adapters.settings import Settings, load_settings
from domain.commands import Deliver, build
from domain.errors import (
    AccountNotFound,
    InvalidCommand,
    InvalidState,
    MailboxExists,
    MailboxNotFound,
    MessageNotFound,
    SettingsError,
)
from domain.lifecycle import ALL_QUEUES, Retention
from domain.message import Message
from domain.ports import PayloadStore
from domain.results import Upload
from domain.service import Change, CheckedDelivery, Delivery, Mailstore
from domain.values import account_id_for, normalise_address
from projections import names as pn
from projections import queries as q
from projections.keys import payload_row

if TYPE_CHECKING:
    from adapters.caller import CallerView
    from adapters.eventlog.store import MailLog
    from adapters.lifecycle.completion import Completion
    from adapters.lifecycle.jobs import PurgeJobs, PurgeReport
    from adapters.lifecycle.shredding import Shredding
    from adapters.readside.host import ProjectionHost

T = TypeVar("T")
log = logging.getLogger("letterlog")


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class Letterlog(ReadModelQueries, RulesAPI):
    """Commands and queries of one letterlog store.

    Built by ``adapters.bootstrap.letterlog`` (``Letterlog.open``): the event log, the payload
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

    # -- opening ----------------------------------------------------------------------------
    @classmethod
    def open(cls, data: str | os.PathLike[str] | None = None, *, create: bool = True,
             read_models: bool = True, user: str | None = None, **overrides: Any) -> Any:
        """Opens the store in ``data`` (default ``LETTERLOG_DATA``; ``overrides`` are settings).
        With ``create=False`` (a reader) a directory holding no store is a ``StoreUnavailable``
        error naming it, and nothing is created. ``read_models=False``: the log and the
        command side only (``show``), the read models neither opened nor caught up.
        ``user``: the store acting as that user (``as_user``: a ``CallerView``, every
        command checked against its rights); without it, as the administrator."""
        from adapters.bootstrap import letterlog

        if data is not None:
            overrides["data"] = Path(data)
        settings = load_settings(**overrides)
        check_data_dir(Path(settings.data), settings.event_store == "sqlite", create,
                       allow_shared=settings.allow_shared_keys)
        store = letterlog(settings, facade=cls, read_models=read_models)
        if user is None:
            return store
        try:
            return store.as_user(user)
        except BaseException:
            store.close()
            raise

    @property
    def projections(self) -> Any | None:
        """The read side; for ``table_store=hbase`` opened (connected) on first use."""
        if self._projections is None and self._read_side is not None:
            with self._read_side_lock:
                if self._read_side is not None:
                    self._projections, self._read_side = self._read_side(), None
        return self._projections

    @projections.setter
    def projections(self, host: Any | None) -> None:
        self._projections = host

    def close(self) -> None:
        if self._projections is not None:
            self._projections.close()
        self.log.close()
        stop = getattr(self.payloads, "close", None)  # the file store's put threads
        if stop is not None:
            stop()

    def __enter__(self) -> Letterlog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the log ----------------------------------------------------------------------------
    def max_position(self) -> int:
        return int(self.log.recorder.max_notification_id() or 0)

    def events(self, start: int = 1, stop: int | None = None,
               batch: int = 1000) -> Iterator[tuple[int, Any]]:
        """Decoded domain events from the log with their positions; a corrupt one raises."""
        return read_events(self.log, start, stop, batch)

    def position_at(self, when: datetime) -> int:
        """The position of the last event recorded at or before ``when`` (0: none); a
        binary search over the events' timestamps (the log appends in time order)."""
        low, high = 0, self.max_position()
        while low < high:
            middle = (low + high + 1) // 2
            found = next(self.events(start=middle, stop=middle), None)
            if found is not None and found[1].timestamp <= when:
                low = middle
            else:
                high = middle - 1
        return low

    def reading(self, *, view: str | None = None, as_of: int | None = None,
                account: str | None = None) -> Letterlog:
        """This store's queries as they were: in the Spark-built view ``view``, or at
        position ``as_of`` for ``account`` (its events folded in this process). Read only."""
        if view is None and as_of is None:
            return self
        if view is not None and as_of is not None:
            raise InvalidCommand("--view and --as-of: give one of them")
        host = self._read()
        if view is not None:
            found = host.view(view)
        else:
            head = self.max_position()
            if as_of is None or not 0 <= as_of <= head:
                raise InvalidCommand(f"--as-of: {as_of} is not in 0..{head} (the log)")
            key = account_id_for(normalise_address(account or "")).bytes
            found = host.as_of(as_of, account_events(self.log, key, as_of))
        past = copy.copy(self)
        past.projections = found
        return past

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
        if (self._projections is None or not self._projections.live
                or self._follower is not None or _usable_cores() < 2):
            yield False
            return
        from adapters.readside.follower import Follower

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
        the read models catch up with what it saved."""
        try:
            return command(*args, **kwargs)
        finally:
            self._project(self.mail.uow.take_saved())

    def _project(self, saved: Sequence[tuple[int, Any]]) -> None:
        """After a command: the read models catch up, starting with the events just saved
        (already in memory, so not read back and decoded from the log).

        The command has committed, so it must not be reported as failed (a caller would
        retry and duplicate it): if projecting fails, one more catch-up reads the log; if
        that fails too, the error is logged and the next command or ``catch_up`` tries
        again (tracking only moves with what was written).
        """
        if self._projections is None or not saved:
            return
        if self._follower is not None and self._wake_follower():
            self._unread_writes = True
            return
        try:
            self._projections.catch_up(saved)
        except Exception:
            try:
                self._projections.catch_up()
            except Exception:
                log.exception("read models behind the log after position %d; the next "
                              "catch-up retries", saved[-1][0] if saved else 0)

    # -- commands (see domain.service.Mailstore) ----------------------------------------------
    def deliver(self, **fields: Any) -> Delivery:
        return self._command(self.mail.deliver, **fields)

    def deliver_many(self, items: Iterable[dict[str, Any]]) -> list[Delivery]:
        return self._command(self.mail.deliver_many, [build(Deliver, **f) for f in items])

    def deliver_checked(self, items: Sequence[CheckedDelivery], *,
                        new_keys: bool = False) -> list[Delivery]:
        """Checked deliveries in one atomic append (each message parsed once, by ``check``).
        ``new_keys``: their idempotency keys are expected unclaimed, so they are not read
        first (a claimed one is found by a refused append and a retry)."""
        return self._command(self.mail.deliver_checked, items, new_keys=new_keys)

    def extract(self, message_id: UUID) -> bytes:
        """The exact delivered bytes; counted against the policy once they are read (an
        extraction that fails does not count)."""
        from adapters.extraction import Extractor

        return self._command(Extractor(self.mail).to_bytes, message_id)

    def extract_to(self, message_id: UUID, path: str | os.PathLike[str], *,
                   force: bool = False) -> dict[str, Any]:
        """Writes the bytes to ``path`` (through a temporary file in its directory; an
        existing file only with ``force``); counted once they are written. Returns size,
        ``position``, the policy's count and the extractions to date."""
        from adapters.extraction import Extractor

        return self._command(Extractor(self.mail).to_file, message_id, Path(path), force=force)

    def extract_to_stream(self, message_id: UUID, out: BinaryIO) -> dict[str, Any]:
        """Writes the bytes to ``out``; counted once they are written and flushed."""
        from adapters.extraction import Extractor

        return self._command(Extractor(self.mail).to_stream, message_id, out)

    def flag(self, message_id: UUID, flags: Iterable[str], mode: str = "add") -> Change:
        """Adds (default), removes or replaces flags and keywords."""
        return self._command(self.mail.flag, message_id, flags, mode)

    def label(self, message_id: UUID, add: Iterable[str] = (),
              remove: Iterable[str] = ()) -> Change:
        return self._command(self.mail.label, message_id, add, remove)

    def move(self, message_id: UUID, mailbox: str) -> Change:
        """Moves to ``mailbox`` of the same account; the message gets a new UID there."""
        return self._command(self.mail.move, message_id, mailbox)

    def copy(self, message_id: UUID, mailbox: str) -> Delivery:
        return self._command(self.mail.copy, message_id, mailbox)

    def delete(self, message_id: UUID) -> Change:
        """Soft delete: hidden, restorable until purged."""
        return self._command(self.mail.delete, message_id)

    def restore(self, message_id: UUID) -> Change:
        return self._command(self.mail.restore, message_id)

    def expunge(self, message_ids: Iterable[UUID]) -> Change:
        return self._command(self.mail.expunge, message_ids)

    def set_policy(self, message_id: UUID, extract_limit: int | None = None,
                   extract_until: datetime | None = None) -> Change:
        """Count-limited, until a date, or (neither) indefinite."""
        return self._command(self.mail.set_policy, message_id, extract_limit, extract_until)

    def begin_upload(self, **fields: Any) -> Upload:
        return self._command(self.mail.begin_upload, **fields)

    def append_chunk(self, message_id: UUID, index: int, data: bytes) -> Change:
        return self._command(self.mail.append_chunk, message_id, index, data)

    def complete_upload(self, message_id: UUID) -> Delivery:
        return self._command(self.mail.complete_upload, message_id)

    def set_quota(self, account: str, *, bytes: int | None = None,
                  messages: int | None = None) -> Change:
        """The account's own quota (``domain.quota``: a limit, 0 unlimited, -1 default)."""
        return self._command(self.mail.set_quota, account, bytes=bytes, messages=messages)

    @property
    def quota_defaults(self) -> tuple[int, int]:  # type: ignore[override]
        """The default quota (settings), where an account has none of its own."""
        return (self.settings.quota_bytes, self.settings.quota_messages)

    def quota(self, account: str) -> dict[str, Any]:
        """The account's limits and usage, exact up to the log's head (the command side)."""
        return self.mail.quota(account)

    def create_mailbox(self, account: str, mailbox: str, role: str = "", *,
                       create_account: bool = False) -> Change:
        """Creates ``mailbox`` for an existing account (``AccountNotFound`` otherwise,
        nothing written), or opens the account first when ``create_account``."""
        return self._command(self.mail.create_mailbox, account, mailbox, role,
                             create_account=create_account)

    def rename_mailbox(self, account: str, mailbox: str, new_name: str) -> Change:
        """Renames ``mailbox`` and every ``mailbox/...`` below it in one append; each keeps
        its messages, UIDs and UIDVALIDITY (``extra["renamed"]`` lists them)."""
        return self._command(self.mail.rename_mailbox, account, mailbox, new_name)

    def subscribe(self, account: str, mailbox: str, *, create_account: bool = False) -> Change:
        """Subscribes an existing account (AccountNotFound otherwise: nothing is created),
        or opens the account first when ``create_account``."""
        return self._command(self.mail.subscribe, account, mailbox,
                             create_account=create_account)

    def unsubscribe(self, account: str, mailbox: str) -> Change:
        return self._command(self.mail.unsubscribe, account, mailbox)

    def delete_mailbox(self, account: str, mailbox: str) -> Change:
        return self._command(self.mail.delete_mailbox, account, mailbox)

    # -- access: ACL entries and virtual roots (the administrator; docs/permissions.md) ------
    group_resolver: Callable[[str], frozenset[str]] | None = None  # bootstrap: the directory

    def as_user(self, user: str, groups: Iterable[str] | None = None) -> CallerView:
        """This store acting as ``user``: every command and query checks its rights first
        (``PermissionDenied``). ``groups``: the user's groups, else asked of the group
        resolver (the user directory) when there is one, else none."""
        from adapters.caller import CallerView
        from domain.rights import Caller
        from domain.roots import validate_user

        name = validate_user(user)
        if groups is None:
            groups = self.group_resolver(name) if self.group_resolver is not None else ()
        return CallerView(self, Caller(name, frozenset(groups)))

    def acl_get(self, account: str, mailbox: str) -> dict[str, str]:
        """The mailbox's ACL: identifier -> rights (RFC 4314 order)."""
        return self.mail.acl(account, mailbox)

    def acl_set(self, account: str, mailbox: str, identifier: str, rights: str) -> Change:
        """Sets (``lrs``), adds to (``+w``) or takes from (``-w``) the rights of
        ``identifier`` on the mailbox (an event carrying the old and new rights)."""
        from domain.access import check_rights_string

        check_rights_string(rights)
        return self._command(self.mail.acl_set, account, mailbox, identifier, rights)

    def acl_delete(self, account: str, mailbox: str, identifier: str) -> Change:
        """Removes the entry of ``identifier`` (the event keeps its rights)."""
        return self._command(self.mail.acl_delete, account, mailbox, identifier)

    def acl_entries(self) -> list[tuple[str, str, str, str]]:
        """Every ACL entry of the store: (account, mailbox name, identifier, rights), from
        the ``acl`` read model (names as they are now)."""
        from projections.access_queries import acl_entries

        host = self._read()
        out = []
        for mailbox_id, identifier, rights in self._query(
                lambda: acl_entries(host.tables, host.physical)):
            mb = self.mail.mailbox(mailbox_id)
            address = self.mail.uow.account_by_id(mb.account_id).address
            out.append((address, mb.name, identifier, rights))
        return sorted(out)

    def root(self, user: str) -> str | None:
        """``user``'s virtual root (``account[/path]``), or None."""
        return self.mail.root(user)

    def roots(self) -> dict[str, str]:
        """Every virtual root: user -> ``account[/path]`` (the ``roots`` read model)."""
        from projections.access_queries import roots

        host = self._read()
        return dict(sorted(self._query(lambda: roots(host.tables, host.physical)).items()))

    def set_root(self, user: str, root: str) -> Change:
        """Sets ``user``'s virtual root to ``account[/path]`` (an event keeping the old)."""
        return self._command(self.mail.set_root, user, root)

    def delete_root(self, user: str) -> Change:
        """Removes ``user``'s virtual root (the event keeps it); ``NotFound`` if none."""
        return self._command(self.mail.delete_root, user)

    # -- lifecycle: purge and erasure (see adapters/lifecycle) --------------------------------
    def retention(self) -> Retention:
        return self.settings.retention()

    @property
    def completion(self) -> Completion | None:
        """The last purge run's or erasure's completion of the files (None before one)."""
        return self.shredding.completion

    def purge_jobs(self) -> PurgeJobs:
        """The purge jobs (built by bootstrap) on this store's read side."""
        return self._purge_jobs(self._read())

    def purge(self, now: datetime | None = None, queues: Sequence[str] | None = None, *,
              dry_run: bool = False, progress: Any = None) -> PurgeReport:
        """Runs every due purge job once (or those of ``queues``); see docs/lifecycle.md."""
        jobs = self.purge_jobs()
        chosen = tuple(queues) if queues else ALL_QUEUES
        unknown = [q for q in chosen if q not in ALL_QUEUES]
        if unknown:
            raise InvalidCommand(f"queue: {unknown[0]!r} is not one of {', '.join(ALL_QUEUES)}")
        report = jobs.run(now or datetime.now(UTC), chosen, dry_run=dry_run, progress=progress)
        report.position = self.max_position()  # the read models show the purge from here on
        if not dry_run and self.completion is not None:
            report.erasure = self.completion.as_dict()
        return report

    def erase_message(self, message_id: UUID, *, with_copies: bool = False) -> dict[str, Any]:
        """Purges one message now, whatever the TTLs (right to erasure). Other messages of
        the same content (same SHA-256) are reported: ``copies_remaining`` (ids, same
        account; erased too ``with_copies``), ``copies_in_other_accounts`` (never named)."""
        from adapters.lifecycle.copies import copies_of

        msg = self.mail.uow.message(message_id)
        self.catch_up()
        host = self._read()
        found = copies_of(host.tables, host.physical, message_id=message_id,
                          account_id=msg.account_id, sha256=msg.sha256, inline=msg.inline)
        result = self._erase([message_id, *(found.same_account if with_copies else [])])
        result["copies_remaining"] = [] if with_copies else [str(i) for i in found.same_account]
        result["copies_in_other_accounts"] = found.other_accounts
        return result

    def erase_account(self, address: str) -> dict[str, Any]:
        """Purges every message of an account now, whatever the TTLs (right to erasure)."""
        account = self.mail.account(address).id
        return self._erase([e.originator_id for _, e in self.events()
                            if type(e) in (Message.Delivered, Message.UploadBegun)
                            and e.account_id == account])

    def _erase(self, message_ids: list[UUID]) -> dict[str, Any]:
        """Purged, keys destroyed, and their payloads deleted at once unless something refers
        to them or a delivery re-used them since the erasure began (no grace period)."""
        began = time.time()
        released: list[Message] = []

        destroyed = 0

        def erased(messages: Sequence[Message]) -> None:
            nonlocal destroyed
            destroyed += self.shredding.destroy_keys(messages)
            released.extend(messages)

        from domain.purging import Purging

        outcome = Purging(self.mail.uow, self.retention(), erased).erase(message_ids)
        self.catch_up()
        freed = 0
        shas = {sha for m in released for sha in m.payloads_referred()}
        if self.settings.table_store == "hbase":
            # the workers apply Purged later; `letterlog erase complete` decides the payloads
            # once they have, then compacts HBase (adapters/lifecycle/scaleout.py)
            if outcome.purged:
                self.shredding.record_scale_out(shas, began, len(outcome.purged))
            shas = set()
        host = self._read()
        refs = host.physical(pn.PAYLOAD_REFS)
        for sha in shas:
            if not host.tables.get(refs, payload_row(sha)):
                freed += self.payloads.delete_unless_touched(sha, began) or 0
        self.shredding.unfinished += len(outcome.purged)
        self.shredding.after(self._projections)
        return {"purged": [str(m.id) for m in outcome.purged],
                "already_purged": [str(i) for i in outcome.kept],
                "bytes": outcome.purged_bytes, "keys_destroyed": destroyed,
                "payload_bytes_freed": freed,
                "position": self.max_position(),
                "scale_out_pending": self.settings.table_store == "hbase" and bool(
                    outcome.purged),  # `letterlog erase complete` finishes it
                **(self.completion.as_dict() if self.completion else {})}

    def complete_erasures(self, *, record: bool = False) -> Completion:
        """Finishes the erasures still pending on this store's SQLite files (``letterlog
        erase complete``); with ``record``, one left unfinished is recorded."""
        return self.shredding.complete(record=record)

    def pending_erasures(self) -> list[dict[str, Any]]:
        """The erasures not yet finished on the SQLite files (``letterlog erase status``)."""
        return self.shredding.pending()

    def check(self, **fields: Any) -> CheckedDelivery:
        """``deliver``'s fields checked and the message parsed (once), nothing written:
        ``deliver_checked`` delivers a batch of these in one append. MessageRejected or
        InvalidCommand if unfit."""
        return self.mail.check(build(Deliver, **fields))

    def store_payloads(self, items: Sequence[CheckedDelivery]) -> None:
        """Writes the payloads of the large messages among ``items`` ahead of their
        ``deliver_checked`` (which then only touches them): an importer writes a batch's
        while the batch before it is appended."""
        self.mail.store_payloads(items)

    def already_delivered(self, account: str, idempotency_key: str) -> bool:
        """Whether a delivery to ``account`` with ``idempotency_key`` has landed (a read;
        delivering it again would store nothing either way)."""
        return self.mail.claimed(account, idempotency_key)

    def ensure_mailbox(self, account: str, mailbox: str, role: str = "") -> bool:
        """Creates ``mailbox`` unless the account has it already; True if it was created.
        ``role``: given to it unless another of the account's mailboxes has that role."""
        try:
            self.create_mailbox(account, mailbox, role, create_account=True)
        except MailboxExists:
            return False
        except InvalidCommand:
            if not role or not self.mail.account(account).has_role(role):
                raise
            return self.ensure_mailbox(account, mailbox)
        return True

    def check_delivery(self, **fields: Any) -> None:
        """Raises what delivering any message with these fields would raise (a bad address,
        mailbox name, flag, label or policy; a mailbox the account does not have); writes
        nothing. ``fields`` are ``deliver``'s, without ``raw``."""
        cmd = build(Deliver, raw=b"", **fields)
        try:
            account = self.mail.account(cmd.account)
        except AccountNotFound:
            if cmd.mailbox != "INBOX":
                raise MailboxNotFound(
                    f"mailbox: {cmd.mailbox!r} does not exist for {cmd.account}") from None
            return
        mailbox_id, _, _ = account.mailbox(cmd.mailbox)
        if self.mail.mailbox(mailbox_id).deleted:
            raise InvalidState(f"mailbox: {cmd.mailbox!r} is \\Noselect (deleted, kept as a"
                               " name for the mailboxes below it): it takes no messages")

    # -- command-side views ---------------------------------------------------------------------
    def show(self, message_id: UUID) -> dict[str, Any]:
        m = self.mail.message(message_id)
        account = self.mail.uow.account_by_id(m.account_id)
        mailbox = self.mail.mailbox(m.mailbox_id) if m.mailbox_id else None
        return {
            "message_id": str(m.id),
            "account": account.address,
            "mailbox": mailbox.name if mailbox is not None else None,
            "account_id": str(m.account_id),
            "mailbox_id": str(m.mailbox_id),
            "uid": m.uid,
            "uidvalidity": m.uidvalidity,
            "state": m.state,
            "size": m.size,
            "sha256": m.sha256,
            "inline": m.inline,
            "internal_date": m.internal_date.isoformat(),
            "flags": sorted(m.flags),
            "labels": sorted(m.labels),
            "thread_id": str(m.thread_id),
            "policy": {k: (v.isoformat() if hasattr(v, "isoformat") else v)
                       for k, v in m.policy.as_dict().items()},
            "extract_count": m.extract_count,
            "extractions_to_date": getattr(m, "extractions_total", m.extract_count),
            "last_extracted_at": (m.last_extracted_at.isoformat()
                                  if getattr(m, "last_extracted_at", None) else None),
            "envelope": _jsonable(m.personal.get("envelope", {})),
            "smtp_envelope": _jsonable(m.personal.get("smtp_envelope", {})),
            "attachments": list(m.personal.get("attachment_names", [])),
            "facts": _jsonable(m.facts),
            "version": m.version,
        }

    def mailbox_list(self, account: str) -> list[dict[str, Any]]:
        acc = self.mail.account(account)
        out = []
        for name, (mailbox_id, role, uidvalidity) in sorted(acc.mailboxes.items()):
            mb = self.mail.mailbox(mailbox_id)
            out.append({"name": name, "mailbox_id": str(mailbox_id), "role": role,
                        "uidvalidity": uidvalidity, "uidnext": mb.uidnext,
                        "subscribed": name in acc.subscriptions,
                        # deleted with inferiors left: a name only (RFC 3501 \Noselect)
                        "noselect": mb.deleted})
        return out

    # -- queries (read models) --------------------------------------------------------------
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

    def purge_due(self, now: datetime | None = None, *, limit: int = 1000) -> list[q.PurgeEntry]:
        host = self._read()
        retention = self.retention()
        ttls = {queue: retention.ttl(queue) for queue in q.QUEUES}
        return self._query(lambda: q.due_purge_entries(
            host.tables, now or datetime.now(UTC), ttls=ttls, limit=limit,
            physical=host.physical))

    def body(self, account: str, mailbox: str, uid: int) -> Iterator[bytes]:
        """A message's bytes from the read model, chunk by chunk. Not an extraction (not
        counted), but refused exactly as ``extract`` refuses (``ExtractionRefused`` once the
        limit is used up or the extract-until date passed; ``InvalidState`` unless active),
        checked on the message's current state before any byte is returned."""
        host = self._read()
        from projections.codec import data_fields
        from projections.keys import message_row

        cells = host.tables.get(host.physical(pn.MESSAGES),
                                message_row(self._mailbox_id(account, mailbox), uid),
                                [pn.DATA_BODY, pn.DATA_SUMMARY, pn.DATA_FIELDS,
                                 pn.DATA_MESSAGE])
        if not cells or pn.DATA_MESSAGE not in cells:
            raise MessageNotFound(f"no message with UID {uid} in {mailbox!r}")
        self.mail.check_extractable(UUID(bytes=bytes(cells[pn.DATA_MESSAGE])))
        fields = data_fields(cells.get(pn.DATA_FIELDS), cells.get(pn.DATA_SUMMARY))
        if not fields.get("inline"):
            return self.payloads.open(str(fields["sha256"]))
        if pn.DATA_BODY in cells:  # a row written before ADR 0014 holds its own copy
            return iter((cells[pn.DATA_BODY],))
        return iter((self._inline_body(int(fields["body_event"]), uid),))

    def _inline_body(self, position: int, uid: int) -> bytes:
        """An inline body from the event at ``position`` of the log (stored there only)."""
        for _, event in self.events(position, position, batch=1):
            body = getattr(event, "personal", {}).get("body")
            if type(body) is bytes:
                return body
        raise MessageNotFound(f"the body of UID {uid} is no longer in the log")

    def rebuild(self, names: list[str] | None = None, progress: Any = None) -> dict[str, Any]:
        return dict(self._read().rebuild(names, progress))

    def build_view(self, view: str, names: list[str] | None, stop: int) -> dict[str, Any]:
        """The read-only view ``view`` as at position ``stop``, folded in this process,
        without the messages purged since (``erase_from_views``)."""
        host = self._read()
        built = dict(host.build_view(view, names, stop, host._fold))
        self.erase_from_views()
        return built

    # -- saved views: list, drop, erase (adapters/readside/views.py) --------------------------
    def views(self) -> list[Any]:
        """Every saved view (``SavedView``: name, position, projections, tables, bytes)."""
        from adapters.readside.views import saved_views

        return saved_views(self._read().tables, sizes=True)

    def drop_view(self, name: str) -> Any:
        """Drops the view ``name`` (its tables and its row; ``NotFound`` if there is none,
        and nothing is dropped); the embedded tables' WAL is truncated after it."""
        from adapters.readside.views import drop_view

        tables = self._read().tables
        with self.exclusive("views"):
            dropped = drop_view(tables, name)
        checkpoint = getattr(tables, "checkpoint", None)
        if checkpoint is not None:
            checkpoint("TRUNCATE")
        return dropped

    def erase_from_views(self) -> dict[str, Any]:
        """Applies every purge and erasure in the log to every saved view that has not had
        it yet (after each purge run and erasure, and when a view is built)."""
        return self.shredding.erase_from_views(self._read().tables)

    def verify(self, names: list[str] | None = None, progress: Any = None) -> list[Any]:
        return list(self._read().verify(names, progress))

    def read_model_bytes(self) -> int | None:
        """What the embedded read models take on disk (None: another table store, which is
        not opened, let alone connected to, to find that out)."""
        if self.settings.table_store != "embedded" or self.projections is None:
            return None
        file_bytes = getattr(self.projections.tables, "file_bytes", None)
        return None if file_bytes is None else int(file_bytes())

    def compact_read_models(self) -> dict[str, int] | None:
        """Rewrites the embedded read models' file with full pages (ADR 0030); None for a
        table store that compacts itself (HBase)."""
        return self._read().compact()

    def exclusive(self, name: str) -> Any:
        """A cross-process lock in the data directory (embedded mode)."""
        return exclusive(self.settings.data, name)



def _jsonable(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple, set, frozenset)):
        return [_jsonable(x) for x in v]
    if hasattr(v, "isoformat"):
        return v.isoformat()
    if isinstance(v, UUID):
        return str(v)
    if isinstance(v, bytes):
        return f"<{len(v)} bytes>"
    return v
