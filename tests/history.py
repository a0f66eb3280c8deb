"""``History``: a builder of realistic letterlog event logs for projection tests.

It keeps a small model of accounts, mailboxes and messages and emits the real domain event
classes with the fields, rules and order that ``domain.service.Mailstore`` gives them (one
command -> consecutive log positions; no change -> no event), without an event store, so that
projector tests are fast, deterministic and independent of the command side.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid5

from adapters.tables.memory import InMemoryTableStore
from domain.account import Account
from domain.mailbox import Mailbox
from domain.message import Message
from domain.values import NAMESPACE, account_id_for
from projections.runner import ProjectionRunner

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
INDEFINITE: dict[str, Any] = {"kind": "indefinite", "limit": None, "until": None}
LISTED = ("active", "expired")


@dataclass
class _Account:
    id: UUID
    address: str
    version: int = 0
    mailboxes: dict[str, UUID] = field(default_factory=dict)
    uidvalidity_next: int = 1
    subscriptions: set[str] = field(default_factory=set)
    labels: set[str] = field(default_factory=set)


@dataclass
class _Mailbox:
    id: UUID
    account: UUID
    name: str
    role: str
    uidvalidity: int
    version: int = 0
    uidnext: int = 1
    deleted: bool = False


@dataclass
class _Message:
    id: UUID
    account: UUID
    mailbox: UUID
    version: int = 0
    uid: int = 0
    uidvalidity: int = 0
    size: int = 0
    sha256: str = ""
    inline: bool = False
    internal_date: datetime = T0
    flags: frozenset[str] = frozenset()
    labels: frozenset[str] = frozenset()
    policy: dict[str, Any] = field(default_factory=lambda: dict(INDEFINITE))
    thread: UUID = UUID(int=0)
    extracts: int = 0
    state: str = "active"
    facts: dict[str, Any] = field(default_factory=dict)
    personal: dict[str, Any] = field(default_factory=dict)


class History:
    """Commands in, ``(position, event)`` pairs out (``.events``)."""

    def __init__(self, now: datetime = T0, retention: timedelta = timedelta(days=30)) -> None:
        self.now = now
        self.retention = retention
        self.events: list[tuple[int, Any]] = []
        self.accounts: dict[str, _Account] = {}
        self.mailboxes: dict[UUID, _Mailbox] = {}
        self.messages: dict[UUID, _Message] = {}
        self._ids = 0

    # -- plumbing -------------------------------------------------------------------------------

    def _emit(self, cls: type, agg: Any, **fields: Any) -> Any:
        agg.version += 1
        topic = f"{cls.__module__}:{cls.__qualname__.split('.')[0]}"
        extra = {"originator_topic": topic} if agg.version == 1 else {}
        event = cls(
            originator_id=agg.id, originator_version=agg.version, timestamp=self.now,
            **extra, **fields,
        )
        self.events.append((len(self.events) + 1, event))
        return event

    def new_message_id(self) -> UUID:
        """Time-ordered like UUIDv7: later ids sort higher."""
        self._ids += 1
        return UUID(bytes=self._ids.to_bytes(6, "big") + b"\x70\x00\x80" + bytes(7))

    def tick(self, **delta: float) -> None:
        self.now += timedelta(**delta)

    def account(self, address: str) -> _Account:
        if address not in self.accounts:
            acc = self.accounts[address] = _Account(account_id_for(address), address)
            self._emit(Account.Opened, acc, address=address)
            self._register(acc, "INBOX", "inbox")
        return self.accounts[address]

    def _register(self, acc: _Account, name: str, role: str) -> UUID:
        uidvalidity = acc.uidvalidity_next
        acc.uidvalidity_next += 1
        mailbox_id = uuid5(NAMESPACE, f"mailbox:{acc.id}:{uidvalidity}")
        acc.mailboxes[name] = mailbox_id
        self._emit(Account.MailboxRegistered, acc, mailbox_id=mailbox_id, name=name, role=role,
                   uidvalidity=uidvalidity)
        mb = self.mailboxes[mailbox_id] = _Mailbox(mailbox_id, acc.id, name, role, uidvalidity)
        self._emit(Mailbox.Created, mb, account_id=acc.id, name=name, role=role,
                   uidvalidity=uidvalidity)
        return mailbox_id

    def mailbox_id(self, address: str, name: str) -> UUID:
        return self.account(address).mailboxes[name]

    def _define_labels(self, acc: _Account, labels: Any) -> None:
        for label in sorted(set(labels) - acc.labels):
            acc.labels.add(label)
            self._emit(Account.LabelDefined, acc, label=label, attributes={})

    def _allocate(self, mb: _Mailbox, ids: list[UUID]) -> int:
        first = mb.uidnext
        mb.uidnext += len(ids)
        self._emit(Mailbox.UidsAllocated, mb, account_id=mb.account, message_ids=ids,
                   first_uid=first)
        return first

    def _where(self, m: _Message) -> dict[str, Any]:
        return {
            "account_id": m.account, "mailbox_id": m.mailbox, "uid": m.uid, "size": m.size,
            "internal_date": m.internal_date, "thread_id": m.thread, "flags": sorted(m.flags),
            "labels": sorted(m.labels), "state": m.state,
        }

    def _delivery_fields(self, m: _Message, copied_from: UUID | None) -> dict[str, Any]:
        return {
            "account_id": m.account, "mailbox_id": m.mailbox, "uid": m.uid,
            "uidvalidity": m.uidvalidity, "size": m.size, "sha256": m.sha256,
            "inline": m.inline, "internal_date": m.internal_date, "flags": sorted(m.flags),
            "labels": sorted(m.labels), "policy": dict(m.policy), "thread_id": m.thread,
            "facts": dict(m.facts), "personal": dict(m.personal), "copied_from": copied_from,
        }

    # -- accounts and mailboxes -----------------------------------------------------------------

    def create_mailbox(self, address: str, name: str, role: str = "") -> UUID:
        acc = self.account(address)
        assert name not in acc.mailboxes
        return self._register(acc, name, role)

    def rename_mailbox(self, address: str, old: str, new: str) -> None:
        acc = self.account(address)
        mailbox_id = acc.mailboxes.pop(old)
        acc.mailboxes[new] = mailbox_id
        mb = self.mailboxes[mailbox_id]
        uidvalidity = acc.uidvalidity_next
        acc.uidvalidity_next += 1
        self._emit(Account.MailboxRenamed, acc, mailbox_id=mailbox_id, old_name=old,
                   new_name=new, old_uidvalidity=mb.uidvalidity, new_uidvalidity=uidvalidity)
        self._emit(Mailbox.Renamed, mb, account_id=acc.id, old_name=old, new_name=new,
                   old_uidvalidity=mb.uidvalidity, new_uidvalidity=uidvalidity)
        mb.name, mb.uidvalidity = new, uidvalidity

    def delete_mailbox(self, address: str, name: str, *, deleted_first: bool = False) -> None:
        """As the command appends it: the name, the expunges, then ``Mailbox.Deleted``
        (``deleted_first``: ``Mailbox.Deleted`` before the expunges, as logs written before
        the hierarchy change hold it)."""
        acc = self.account(address)
        mailbox_id = acc.mailboxes.pop(name)
        self._emit(Account.MailboxUnregistered, acc, mailbox_id=mailbox_id, name=name)
        mb = self.mailboxes[mailbox_id]
        mb.deleted = True
        if deleted_first:
            self._emit(Mailbox.Deleted, mb, account_id=acc.id, name=name)
        for m in list(self.messages.values()):
            if m.mailbox == mailbox_id and m.state in ("active", "expired", "deleted"):
                self._expunge(m)
        if not deleted_first:
            self._emit(Mailbox.Deleted, mb, account_id=acc.id, name=name)

    def subscribe(self, address: str, name: str) -> None:
        acc = self.account(address)
        if name not in acc.subscriptions:
            acc.subscriptions.add(name)
            self._emit(Account.Subscribed, acc, name=name)

    def unsubscribe(self, address: str, name: str) -> None:
        acc = self.account(address)
        if name in acc.subscriptions:
            acc.subscriptions.discard(name)
            self._emit(Account.Unsubscribed, acc, name=name)

    def set_label_attributes(self, address: str, label: str, attributes: dict[str, Any]) -> None:
        acc = self.account(address)
        acc.labels.add(label)
        self._emit(Account.LabelDefined, acc, label=label, attributes=dict(attributes))

    def remove_label(self, address: str, label: str) -> None:
        acc = self.account(address)
        acc.labels.discard(label)
        self._emit(Account.LabelRemoved, acc, label=label)

    # -- messages -------------------------------------------------------------------------------

    def deliver(
        self, address: str, mailbox: str = "INBOX", *, flags: Any = (), labels: Any = (),
        size: int = 100, inline: bool = True, policy: dict[str, Any] | None = None,
        subject: str = "Hello", reply_to: UUID | None = None,
    ) -> UUID:
        acc = self.account(address)
        mb = self.mailboxes[acc.mailboxes[mailbox]]
        self._define_labels(acc, labels)
        message_id = self.new_message_id()
        uid = self._allocate(mb, [message_id])
        body = (b"Subject: %s\r\n\r\n" % subject.encode()).ljust(size, b"x")
        thread = self.messages[reply_to].thread if reply_to else uuid5(
            NAMESPACE, f"thread:{acc.id}:message:{message_id}")
        m = self.messages[message_id] = _Message(
            message_id, acc.id, mb.id, uid=uid, uidvalidity=mb.uidvalidity, size=size,
            sha256=f"{message_id.int:064x}", inline=inline, internal_date=self.now,
            flags=frozenset(flags), labels=frozenset(labels), policy=policy or dict(INDEFINITE),
            thread=thread, facts={"content_type": "text/plain", "part_count": 1},
            personal={"envelope": {"subject": subject, "from": "ada@example.org",
                                   "sent_at": self.now},
                      "attachment_names": [], "body": body if inline else None},
        )
        self._emit(Message.Delivered, m, **self._delivery_fields(m, None))
        return message_id

    def copy(self, message_id: UUID, mailbox: str) -> UUID:
        src = self.messages[message_id]
        assert src.state in LISTED
        acc = next(a for a in self.accounts.values() if a.id == src.account)
        mb = self.mailboxes[acc.mailboxes[mailbox]]
        copy_id = self.new_message_id()
        uid = self._allocate(mb, [copy_id])
        m = self.messages[copy_id] = _Message(
            copy_id, src.account, mb.id, uid=uid, uidvalidity=mb.uidvalidity, size=src.size,
            sha256=src.sha256, inline=src.inline, internal_date=src.internal_date,
            flags=src.flags, labels=src.labels, policy=dict(src.policy), thread=src.thread,
            facts=dict(src.facts), personal=dict(src.personal),
        )
        self._emit(Message.Delivered, m, **self._delivery_fields(m, message_id))
        return copy_id

    def begin_upload(self, address: str, mailbox: str = "INBOX", labels: Any = ()) -> UUID:
        acc = self.account(address)
        mb = self.mailboxes[acc.mailboxes[mailbox]]
        self._define_labels(acc, labels)
        message_id = self.new_message_id()
        m = self.messages[message_id] = _Message(
            message_id, acc.id, mb.id, labels=frozenset(labels), state="incomplete",
            internal_date=self.now, thread=message_id,
        )
        self._emit(Message.UploadBegun, m, account_id=acc.id, mailbox_id=mb.id,
                   internal_date=self.now, flags=[], labels=sorted(labels),
                   policy=dict(INDEFINITE))
        return message_id

    def append_chunk(self, message_id: UUID, size: int) -> None:
        m = self.messages[message_id]
        index = m.extracts  # reuse: chunk count while incomplete
        m.extracts += 1
        m.size += size
        self._emit(Message.UploadChunkAppended, m, index=index, size=size, sha256="0" * 64)

    def complete_upload(self, message_id: UUID) -> None:
        m = self.messages[message_id]
        assert m.state == "incomplete"
        mb = self.mailboxes[m.mailbox]
        m.uid = self._allocate(mb, [message_id])
        m.uidvalidity, m.state, m.extracts = mb.uidvalidity, "active", 0
        m.sha256 = f"{message_id.int:064x}"
        m.thread = uuid5(NAMESPACE, f"thread:{m.account}:message:{message_id}")
        m.personal = {"envelope": {"subject": "big"}, "attachment_names": ["a.bin"],
                      "body": None}
        self._emit(Message.UploadCompleted, m, **self._delivery_fields(m, None))

    def flag(self, message_id: UUID, flags: Any, mode: str = "add") -> None:
        m = self.messages[message_id]
        assert m.state in LISTED
        change = frozenset(flags)
        new = {"add": m.flags | change, "remove": m.flags - change}.get(mode, change)
        if new != m.flags:
            old, m.flags = m.flags, new
            self._emit(Message.FlagsChanged, m, old_flags=sorted(old), **self._where(m))

    def label(self, message_id: UUID, add: Any = (), remove: Any = ()) -> None:
        m = self.messages[message_id]
        assert m.state in LISTED
        new = (m.labels | frozenset(add)) - frozenset(remove)
        if new != m.labels:
            acc = next(a for a in self.accounts.values() if a.id == m.account)
            self._define_labels(acc, new)
            old, m.labels = m.labels, new
            self._emit(Message.LabelsChanged, m, old_labels=sorted(old), **self._where(m))

    def move(self, message_id: UUID, mailbox: str) -> None:
        m = self.messages[message_id]
        assert m.state in LISTED
        acc = next(a for a in self.accounts.values() if a.id == m.account)
        mb = self.mailboxes[acc.mailboxes[mailbox]]
        if mb.id == m.mailbox:
            return
        uid = self._allocate(mb, [message_id])
        old_mailbox, old_uid = m.mailbox, m.uid
        m.mailbox, m.uid, m.uidvalidity = mb.id, uid, mb.uidvalidity
        self._emit(Message.Moved, m, from_mailbox_id=old_mailbox, from_uid=old_uid,
                   uidvalidity=mb.uidvalidity, sha256=m.sha256, inline=m.inline,
                   facts=m.facts, personal=m.personal, policy=dict(m.policy),
                   extract_count=m.extracts, **self._where(m))

    def delete(self, message_id: UUID) -> None:
        m = self.messages[message_id]
        if m.state in LISTED:
            m.state = "deleted"
            self._emit(Message.Deleted, m, purge_after=self.now + self.retention,
                       **self._where(m))

    def restore(self, message_id: UUID) -> None:
        m = self.messages[message_id]
        if m.state == "deleted":
            m.state = "expired" if self._exhausted(m) else "active"
            self._emit(Message.Restored, m, **self._where(m))

    def expunge(self, message_id: UUID) -> None:
        m = self.messages[message_id]
        if m.state in ("active", "expired", "deleted"):
            self._expunge(m)

    def _expunge(self, m: _Message) -> None:
        old_state, m.state = m.state, "expunged"
        self._emit(Message.Expunged, m, purge_after=self.now, old_state=old_state,
                   **self._where(m))

    def _exhausted(self, m: _Message) -> bool:
        p = m.policy
        if p["kind"] == "count":
            return bool(m.extracts >= p["limit"])
        if p["kind"] == "until":
            return bool(self.now > p["until"])
        return False

    def extract(self, message_id: UUID) -> bool:
        m = self.messages[message_id]
        if m.state != "active" or self._exhausted(m):
            return False
        m.extracts += 1
        p = m.policy
        remaining = p["limit"] - m.extracts if p["kind"] == "count" else None
        m.state = "expired" if remaining == 0 else "active"
        self._emit(Message.Extracted, m, count=m.extracts, remaining=remaining,
                   reservation_id=None, at=self.now, **self._where(m))
        return True

    def set_policy(self, message_id: UUID, limit: int | None = None,
                   until: datetime | None = None) -> None:
        m = self.messages[message_id]
        assert m.state in LISTED
        policy = ({"kind": "count", "limit": limit, "until": None} if limit is not None else
                  {"kind": "until", "limit": None, "until": until} if until is not None else
                  dict(INDEFINITE))
        if policy == m.policy and m.state != "expired":
            return
        old_policy, old_state = m.policy, m.state
        m.policy, m.extracts = policy, 0
        m.state = "expired" if until is not None and self.now > until else "active"
        self._emit(Message.PolicyChanged, m, old_policy=old_policy, policy=policy,
                   old_state=old_state, **self._where(m))

    # -- what a test needs to know ---------------------------------------------------------

    def account_of(self, event: Any) -> UUID:
        """The account an event belongs to (each account's events must stay in order)."""
        oid = event.originator_id
        if oid in self.messages:
            return self.messages[oid].account
        if oid in self.mailboxes:
            return self.mailboxes[oid].account
        return oid  # type: ignore[no-any-return]


def project(h: History, store: InMemoryTableStore | None = None, **kw: Any) -> InMemoryTableStore:
    """The history's events applied by a ``ProjectionRunner`` (``kw``: its options) to
    ``store``, by default a new in-memory table store."""
    store = store or InMemoryTableStore()
    runner = ProjectionRunner(store, **kw)
    runner.create_tables()
    runner.apply_events(h.events)
    return store
