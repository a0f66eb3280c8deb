"""The command side: one method per command. Decide, then record.

Each method validates its command, loads the aggregates it needs, lets them check their rules
(raising a named error before any event exists), writes large payloads to the payload store,
then saves every new event of the command in one atomic append. A concurrency conflict
(another writer saved the same aggregate first) reloads and retries, so several processes can
share one event store without losing or duplicating a delivery.
"""

from __future__ import annotations

import hashlib
import random
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar
from uuid import UUID

import uuid_utils
from eventsourcing.application import AggregateNotFoundError, Application
from eventsourcing.persistence import IntegrityError, OperationalError

from domain.account import Account
from domain.commands import (
    BeginUpload,
    ChangeFlags,
    ChangeLabels,
    CopyMessage,
    CreateMailbox,
    DeleteMailbox,
    Deliver,
    MoveMessage,
    RenameMailbox,
    SetPolicy,
    Subscribe,
    build,
)
from domain.current import CurrentAggregates
from domain.errors import (
    AccountNotFound,
    InvalidCommand,
    InvalidState,
    MailboxNotFound,
    MessageNotFound,
)
from domain.mailbox import Mailbox
from domain.message import Message
from domain.payloads import INLINE_LIMIT
from domain.ports import PayloadStore
from domain.rfc5322 import MessageFacts, MessageLimits, inspect_message
from domain.values import (
    NAMESPACE,
    ExtractionPolicy,
    FlagMode,
    MessageState,
    Role,
    account_id_for,
    apply_flag_mode,
)

T = TypeVar("T")


def utcnow() -> datetime:
    return datetime.now(UTC)


def new_message_id() -> UUID:
    """Time-ordered (UUIDv7): label indexes and threads sort by it."""
    return UUID(bytes=uuid_utils.uuid7().bytes)


def thread_id_for(account_id: UUID, facts: MessageFacts, message_id: UUID) -> UUID:
    """The root of the References chain names the conversation (no read-back needed)."""
    env = facts.envelope
    root = (env.references[0] if env.references else None) or env.in_reply_to or env.message_id
    key = root if root else f"message:{message_id}"
    return uuid.uuid5(NAMESPACE, f"thread:{account_id}:{key}")


def facts_for_event(facts: MessageFacts) -> dict[str, Any]:
    """What a delivery records about the message's structure (no personal data)."""
    return {
        "content_type": facts.content_type,
        "part_count": facts.part_count,
        "depth": facts.depth,
        "has_attachments": facts.has_attachments,
        "defects": list(facts.defects),
        "line_ending": facts.line_ending,
        "header_bytes": facts.header_bytes,
    }


def envelope_for_event(facts: MessageFacts) -> dict[str, Any]:
    """The personal part of the envelope: sealed with the message's key (crypto-shredding)."""
    env = facts.envelope
    return {
        "subject": env.subject,
        "from": env.from_,
        "to": list(env.to),
        "cc": list(env.cc),
        "date": env.date,
        "sent_at": env.sent_at,
        "message_id": env.message_id,
        "in_reply_to": env.in_reply_to,
        "references": list(env.references),
    }


@dataclass(frozen=True)
class Delivery:
    message_id: UUID
    mailbox_id: UUID
    uid: int
    uidvalidity: int
    size: int
    sha256: str
    modseq: int  # the log position of the event: strictly increasing per mailbox


@dataclass(frozen=True)
class Change:
    """What a command did: the log positions it appended (empty when nothing changed)."""

    positions: tuple[int, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def changed(self) -> bool:
        return bool(self.positions)

    @property
    def modseq(self) -> int | None:
        return self.positions[-1] if self.positions else None


@dataclass(frozen=True)
class CheckedDelivery:
    """A delivery command whose message passed the limits, with what was found in it."""

    command: Deliver
    facts: MessageFacts

    def matches(self) -> bool:
        raw = self.command.raw
        return self.facts.size == len(raw) and self.facts.sha256 == hashlib.sha256(raw).hexdigest()


class Mailstore:
    """The embedded command API over an eventsourcing Application and a payload store."""

    def __init__(
        self,
        app: Application[UUID],
        payloads: PayloadStore,
        *,
        limits: MessageLimits | None = None,
        inline_limit: int = INLINE_LIMIT,
        deleted_retention: timedelta = timedelta(days=30),
        clock: Callable[[], datetime] = utcnow,
        on_saved: Callable[[Sequence[tuple[int, Any]]], None] | None = None,
        max_retries: int = 50,
        log_head: Callable[[], int | None] | None = None,
    ) -> None:
        self.app = app
        self.payloads = payloads
        self.limits = limits or MessageLimits()
        self.inline_limit = inline_limit
        self.deleted_retention = deleted_retention
        self.clock = clock
        self.on_saved = on_saved
        self.max_retries = max_retries
        self.current = CurrentAggregates(log_head or app.recorder.max_notification_id)

    # -- plumbing ---------------------------------------------------------------------------
    def _retry(self, attempt: Callable[[], T]) -> T:
        for n in range(self.max_retries):
            self.current.begin()
            try:
                return attempt()
            except IntegrityError:
                # Someone else appended to one of our aggregates first: reload and decide again.
                self.current.drop()
                time.sleep(random.uniform(0, 0.002 * (n + 1)))
            except OperationalError as e:
                # Another process holds the write lock ("database is locked"): nothing was
                # written; wait and decide again.
                if "locked" not in str(e) and "busy" not in str(e):
                    raise
                time.sleep(random.uniform(0, 0.01 * (n + 1)))
            finally:
                self.current.end()
        raise InvalidState(f"gave up after {self.max_retries} concurrency conflicts")

    def _save(self, *aggregates: Any) -> tuple[int, ...]:
        try:
            recordings = self.app.save(*aggregates)
        except BaseException:
            self.current.drop()
            raise
        saved = [(r.notification.id, r.domain_event) for r in recordings]
        self.current.saved(aggregates, [position for position, _ in saved])
        if saved and self.on_saved is not None:
            self.on_saved(saved)  # the events just appended, with their log positions
        return tuple(position for position, _ in saved)

    def _get(self, cls: type[T], aggregate_id: UUID, error: type[Exception], what: str) -> T:
        agg: Any = self.current.get(aggregate_id)
        if agg is not None:
            if not isinstance(agg, cls):
                raise error(f"{what} does not exist")
            return agg
        try:
            agg = self.app.repository.get(aggregate_id)
        except AggregateNotFoundError:
            raise error(f"{what} does not exist") from None
        if not isinstance(agg, cls):
            raise error(f"{what} does not exist")
        return agg

    def message(self, message_id: UUID) -> Message:
        return self._get(Message, message_id, MessageNotFound, f"message {message_id}")

    def account(self, address: str) -> Account:
        acc_id = account_id_for(address)
        return self._get(Account, acc_id, AccountNotFound, f"account {address!r}")

    def mailbox(self, mailbox_id: UUID) -> Mailbox:
        return self._get(Mailbox, mailbox_id, MailboxNotFound, f"mailbox {mailbox_id}")

    def _account_or_open(self, address: str) -> tuple[Account, list[Any]]:
        """The account, opened with its INBOX on first use; and any new aggregates to save."""
        try:
            return self.account(address), []
        except AccountNotFound:
            account = Account.open(address)
            mailbox_id, uidvalidity = account.register_mailbox("INBOX", Role.INBOX)
            inbox = Mailbox.create(mailbox_id, account.id, "INBOX", Role.INBOX.value, uidvalidity)
            return account, [inbox]

    def _mailbox_named(self, account: Account, name: str, fresh: list[Any]) -> Mailbox:
        mailbox_id, _, _ = account.mailbox(name)
        for agg in fresh:
            if isinstance(agg, Mailbox) and agg.id == mailbox_id:
                return agg
        return self.mailbox(mailbox_id)

    # -- delivery ---------------------------------------------------------------------------
    def check(self, cmd: Deliver) -> CheckedDelivery:
        """The message of ``cmd`` against the limits, described; MessageRejected if unfit.
        Nothing is written. Importers check each message on its own (one bad message is
        reported, not the batch), in worker processes if they like, then deliver the
        checked ones together (``deliver_checked``)."""
        return CheckedDelivery(cmd, inspect_message(cmd.raw, self.limits))

    def _store_payloads(self, items: Sequence[CheckedDelivery]) -> list[bool]:
        """Which messages stay inline; the others' payloads are written now, before any
        event exists (if the append never commits they are orphans, which the
        unreferenced-payload purge collects). A batch's payloads are written together."""
        inline = [c.facts.size <= self.inline_limit for c in items]
        large = [c.command.raw for c, small in zip(items, inline, strict=True) if not small]
        if large:
            self.payloads.put_many(large)
        return inline

    def _delivery_fields(
        self,
        account: Account,
        mailbox: Mailbox,
        uid: int,
        message_id: UUID,
        raw: bytes | None,
        facts: MessageFacts,
        inline: bool,
        *,
        labels: Sequence[str],
        flags: Sequence[str],
        policy: ExtractionPolicy,
        internal_date: datetime,
    ) -> dict[str, Any]:
        return {
            "account_id": account.id,
            "mailbox_id": mailbox.id,
            "uid": uid,
            "uidvalidity": mailbox.uidvalidity,
            "size": facts.size,
            "sha256": facts.sha256,
            "inline": inline,
            "internal_date": internal_date,
            "flags": sorted(flags),
            "labels": sorted(labels),
            "policy": policy.as_dict(),
            "thread_id": thread_id_for(account.id, facts, message_id),
            "facts": facts_for_event(facts),
            "personal": {
                "envelope": envelope_for_event(facts),
                "attachment_names": list(facts.attachment_names),
                "body": raw if inline else None,
            },
        }

    def deliver(self, **fields: Any) -> Delivery:
        return self.deliver_many([build(Deliver, **fields)])[0]

    def deliver_many(self, commands: Sequence[Deliver]) -> list[Delivery]:
        """Delivers a batch in one atomic append: one UID allocation per mailbox."""
        return self._deliver([self.check(c) for c in commands])  # facts just made: no re-check

    def deliver_checked(self, items: Sequence[CheckedDelivery]) -> list[Delivery]:
        """``deliver_many`` of messages ``check`` has described (here or in another
        process): one atomic append. The facts must be those of the raw bytes (size and
        SHA-256 are compared; a mismatch is an InvalidCommand and nothing is written)."""
        for c in items:
            if not isinstance(c, CheckedDelivery) or not c.matches():
                raise InvalidCommand(f"{c!r:.80}: not a checked delivery of its raw bytes")
        return self._deliver(items)

    def _deliver(self, items: Sequence[CheckedDelivery]) -> list[Delivery]:
        if not items:
            return []
        commands = [c.command for c in items]
        inline = self._store_payloads(items)
        prepared = [(c.command.raw, c.facts, small)
                    for c, small in zip(items, inline, strict=True)]
        now = self.clock()
        ids = [new_message_id() for _ in commands]

        def attempt() -> list[Delivery]:
            accounts: dict[str, tuple[Account, list[Any]]] = {}
            mailboxes: dict[tuple[str, str], Mailbox] = {}
            groups: dict[tuple[str, str], list[int]] = {}
            for i, c in enumerate(commands):
                if c.account not in accounts:
                    accounts[c.account] = self._account_or_open(c.account)
                account, fresh = accounts[c.account]
                key = (c.account, c.mailbox)
                if key not in mailboxes:
                    mailboxes[key] = self._mailbox_named(account, c.mailbox, fresh)
                account.define_labels(frozenset(c.labels))
                groups.setdefault(key, []).append(i)
            messages: list[Message] = []
            placed: list[tuple[int, Mailbox, int]] = []
            for key, idx in groups.items():
                mailbox = mailboxes[key]
                first = mailbox.allocate_uids([ids[i] for i in idx])
                for n, i in enumerate(idx):
                    placed.append((i, mailbox, first + n))
            placed.sort()
            for i, mailbox, uid in placed:
                c = commands[i]
                raw, facts, inline = prepared[i]
                account = accounts[c.account][0]
                fields = self._delivery_fields(
                    account, mailbox, uid, ids[i], raw, facts, inline,
                    labels=c.labels, flags=c.flags, policy=c.policy(),
                    internal_date=c.internal_date or now,
                )
                messages.append(Message.deliver(ids[i], **fields))
            aggregates: list[Any] = []
            for account, fresh in accounts.values():
                aggregates.append(account)
                aggregates.extend(a for a in fresh if a not in mailboxes.values())
            aggregates.extend(mailboxes.values())
            aggregates.extend(messages)
            positions = self._save(*aggregates)
            mine = positions[-len(messages):]
            return [
                Delivery(
                    message_id=m.id,
                    mailbox_id=m.mailbox_id or mb.id,
                    uid=m.uid,
                    uidvalidity=m.uidvalidity,
                    size=m.size,
                    sha256=m.sha256,
                    modseq=mine[n],
                )
                for n, (m, (_, mb, _)) in enumerate(zip(messages, placed, strict=True))
            ]

        return self._retry(attempt)

    # -- uploads (large messages) -----------------------------------------------------------
    def begin_upload(self, **fields: Any) -> UUID:
        cmd = build(BeginUpload, **fields)
        message_id = new_message_id()

        def attempt() -> UUID:
            account, fresh = self._account_or_open(cmd.account)
            mailbox = self._mailbox_named(account, cmd.mailbox, fresh)
            if mailbox.deleted:
                raise MailboxNotFound(f"mailbox: {cmd.mailbox!r} was deleted")
            account.define_labels(frozenset(cmd.labels))
            msg = Message.begin_upload(
                message_id,
                account_id=account.id,
                mailbox_id=mailbox.id,
                internal_date=self.clock(),
                flags=cmd.flags,
                labels=cmd.labels,
                policy=cmd.policy().as_dict(),
            )
            self._save(account, *fresh, msg)
            return message_id

        return self._retry(attempt)

    def append_chunk(self, message_id: UUID, index: int, data: bytes) -> Change:
        if not data:
            raise InvalidCommand("data: an upload chunk must not be empty")
        msg = self.message(message_id)
        if msg.size + len(data) > self.limits.max_size:
            raise InvalidCommand(
                f"data: upload would exceed the size limit of {self.limits.max_size} bytes"
            )
        ref = self.payloads.put(data)
        msg.append_chunk(index, len(data), ref.sha256)
        return Change(self._save(msg))

    def _upload_bytes(self, msg: Message) -> Iterator[bytes]:
        for sha in msg.upload_chunks:
            yield from self.payloads.open(sha)

    def complete_upload(self, message_id: UUID) -> Delivery:
        msg = self.message(message_id)
        if msg.state != MessageState.INCOMPLETE.value:
            raise InvalidState(f"message {message_id} is {msg.state}; needs incomplete")
        raw = b"".join(self._upload_bytes(msg))
        facts = inspect_message(raw, self.limits)
        inline = facts.size <= self.inline_limit
        if not inline:
            self.payloads.put_stream(self._upload_bytes(msg))

        def attempt() -> Delivery:
            m = self.message(message_id)
            mailbox = self.mailbox(m.mailbox_id) if m.mailbox_id else None
            if mailbox is None:
                raise MailboxNotFound(f"message {message_id} has no mailbox")
            account = self._get(Account, m.account_id, AccountNotFound, "account")
            uid = mailbox.allocate_uids([m.id])
            fields = self._delivery_fields(
                account, mailbox, uid, m.id, raw if inline else None, facts, inline,
                labels=sorted(m.labels), flags=sorted(m.flags), policy=m.policy,
                internal_date=m.internal_date,
            )
            m.complete_upload(**fields)
            positions = self._save(mailbox, m)
            return Delivery(m.id, mailbox.id, uid, mailbox.uidvalidity, facts.size,
                            facts.sha256, positions[-1])

        return self._retry(attempt)

    # -- flags, labels ------------------------------------------------------------------------
    def flag(self, message_id: UUID, flags: Iterable[str], mode: str = "add") -> Change:
        cmd = build(ChangeFlags, message_id=message_id, flags=list(flags), mode=FlagMode(mode))

        def attempt() -> Change:
            msg = self.message(cmd.message_id)
            new = apply_flag_mode(msg.flags, frozenset(cmd.flags), cmd.mode)
            if not msg.change_flags(new):
                return Change()
            return Change(self._save(msg), {"flags": sorted(new)})

        return self._retry(attempt)

    def label(
        self, message_id: UUID, add: Iterable[str] = (), remove: Iterable[str] = ()
    ) -> Change:
        cmd = build(ChangeLabels, message_id=message_id, add=list(add), remove=list(remove))

        def attempt() -> Change:
            msg = self.message(cmd.message_id)
            new = (msg.labels | frozenset(cmd.add)) - frozenset(cmd.remove)
            if new == msg.labels:
                return Change()
            account = self._get(Account, msg.account_id, AccountNotFound, "account")
            account.define_labels(new)
            msg.change_labels(new)
            return Change(self._save(account, msg), {"labels": sorted(new)})

        return self._retry(attempt)

    # -- move, copy ---------------------------------------------------------------------------
    def _target(self, msg: Message, name: str) -> Mailbox:
        account = self._get(Account, msg.account_id, AccountNotFound, "account")
        mailbox = self._mailbox_named(account, name, [])
        if mailbox.deleted:
            raise MailboxNotFound(f"mailbox: {name!r} was deleted")
        return mailbox

    def move(self, message_id: UUID, mailbox: str) -> Change:
        cmd = build(MoveMessage, message_id=message_id, mailbox=mailbox)

        def attempt() -> Change:
            msg = self.message(cmd.message_id)
            target = self._target(msg, cmd.mailbox)
            if target.id == msg.mailbox_id:
                return Change()
            uid = target.allocate_uids([msg.id])
            msg.move(target.id, uid, target.uidvalidity)
            return Change(self._save(target, msg), {"uid": uid, "mailbox_id": str(target.id)})

        return self._retry(attempt)

    def copy(self, message_id: UUID, mailbox: str) -> Delivery:
        cmd = build(CopyMessage, message_id=message_id, mailbox=mailbox)
        copy_id = new_message_id()

        def attempt() -> Delivery:
            src = self.message(cmd.message_id)
            if src.state not in (MessageState.ACTIVE.value, MessageState.EXPIRED.value):
                raise InvalidState(f"message {src.id} is {src.state}; cannot copy")
            target = self._target(src, cmd.mailbox)
            uid = target.allocate_uids([copy_id])
            fields = {
                "account_id": src.account_id,
                "mailbox_id": target.id,
                "uid": uid,
                "uidvalidity": target.uidvalidity,
                "size": src.size,
                "sha256": src.sha256,
                "inline": src.inline,
                "internal_date": src.internal_date,
                "flags": sorted(src.flags),
                "labels": sorted(src.labels),
                "policy": src.policy.as_dict(),
                "thread_id": src.thread_id,
                "facts": dict(src.facts),
                "personal": dict(src.personal),
                "copied_from": src.id,
            }
            new = Message.deliver(copy_id, **fields)
            positions = self._save(target, new)
            return Delivery(copy_id, target.id, uid, target.uidvalidity, src.size,
                            src.sha256, positions[-1])

        return self._retry(attempt)

    # -- delete, restore, expunge -------------------------------------------------------------
    def delete(self, message_id: UUID) -> Change:
        def attempt() -> Change:
            msg = self.message(message_id)
            if not msg.soft_delete(self.clock() + self.deleted_retention):
                return Change()
            return Change(self._save(msg))

        return self._retry(attempt)

    def restore(self, message_id: UUID) -> Change:
        def attempt() -> Change:
            msg = self.message(message_id)
            if not msg.restore(self.clock()):
                return Change()
            return Change(self._save(msg))

        return self._retry(attempt)

    def expunge(self, message_ids: Iterable[UUID]) -> Change:
        ids = list(message_ids)

        def attempt() -> Change:
            now = self.clock()
            msgs = [self.message(i) for i in ids]
            changed = [m for m in msgs if m.expunge(now)]
            return Change(self._save(*changed)) if changed else Change()

        return self._retry(attempt)

    # -- extraction ---------------------------------------------------------------------------
    def extract(self, message_id: UUID) -> Iterator[bytes]:
        """Counts the extraction (appended before any byte is served), then streams the bytes."""

        def attempt() -> Message:
            msg = self.message(message_id)
            msg.extract(self.clock())
            self._save(msg)
            return msg

        msg = self._retry(attempt)
        return self._content(msg)

    def _content(self, msg: Message) -> Iterator[bytes]:
        if msg.inline:
            body = msg.personal.get("body")
            if not isinstance(body, bytes):
                raise InvalidState(f"message {msg.id}: its content is no longer available")
            return iter((body,))
        return self.payloads.open(msg.sha256)

    def set_policy(
        self, message_id: UUID, extract_limit: int | None = None,
        extract_until: datetime | None = None,
    ) -> Change:
        cmd = build(SetPolicy, message_id=message_id, extract_limit=extract_limit,
                    extract_until=extract_until)

        def attempt() -> Change:
            msg = self.message(cmd.message_id)
            if not msg.set_policy(cmd.policy(), self.clock()):
                return Change()
            return Change(self._save(msg))

        return self._retry(attempt)

    # -- mailboxes and subscriptions ----------------------------------------------------------
    def create_mailbox(self, account: str, mailbox: str, role: str = "") -> Change:
        cmd = build(CreateMailbox, account=account, mailbox=mailbox, role=Role(role))

        def attempt() -> Change:
            acc, fresh = self._account_or_open(cmd.account)
            mailbox_id, uidvalidity = acc.register_mailbox(cmd.mailbox, cmd.role)
            mb = Mailbox.create(mailbox_id, acc.id, cmd.mailbox, cmd.role.value, uidvalidity)
            positions = self._save(acc, *fresh, mb)
            return Change(positions, {"mailbox_id": str(mailbox_id), "uidvalidity": uidvalidity})

        return self._retry(attempt)

    def rename_mailbox(self, account: str, mailbox: str, new_name: str) -> Change:
        cmd = build(RenameMailbox, account=account, mailbox=mailbox, new_name=new_name)

        def attempt() -> Change:
            acc = self.account(cmd.account)
            mailbox_id, uidvalidity = acc.rename_mailbox(cmd.mailbox, cmd.new_name)
            mb = self.mailbox(mailbox_id)
            mb.rename(cmd.new_name, uidvalidity)
            return Change(self._save(acc, mb), {"uidvalidity": uidvalidity})

        return self._retry(attempt)

    def delete_mailbox(
        self, account: str, mailbox: str, message_ids: Callable[[UUID], Iterable[UUID]]
    ) -> Change:
        """Deletes a mailbox and expunges every message still in it (``message_ids``)."""
        cmd = build(DeleteMailbox, account=account, mailbox=mailbox)

        def attempt() -> Change:
            acc = self.account(cmd.account)
            mailbox_id = acc.unregister_mailbox(cmd.mailbox)
            mb = self.mailbox(mailbox_id)
            mb.delete()
            now = self.clock()
            msgs = [self.message(i) for i in message_ids(mailbox_id)]
            expunged = [m for m in msgs if m.mailbox_id == mailbox_id and m.expunge(now)]
            return Change(self._save(acc, mb, *expunged), {"expunged": len(expunged)})

        return self._retry(attempt)

    def subscribe(self, account: str, mailbox: str) -> Change:
        cmd = build(Subscribe, account=account, mailbox=mailbox)

        def attempt() -> Change:
            acc, fresh = self._account_or_open(cmd.account)
            if not acc.subscribe(cmd.mailbox):
                return Change()
            return Change(self._save(acc, *fresh))

        return self._retry(attempt)

    def unsubscribe(self, account: str, mailbox: str) -> Change:
        cmd = build(Subscribe, account=account, mailbox=mailbox)

        def attempt() -> Change:
            acc = self.account(cmd.account)
            if not acc.unsubscribe(cmd.mailbox):
                return Change()
            return Change(self._save(acc))

        return self._retry(attempt)
