"""The application's one face: every command, query and administration a caller may use, as
typed Protocols (James's ``MailboxManager`` / ``MessageManager``; event-sourcery's
``interfaces.py``). ADR 0077.

- ``Face``: what a user may be given (``MessageManager``, ``MailboxManager``, ``Queries``).
  ``Letterlog.open(data, user=...)`` returns it: a ``CallerView`` (``adapters.caller``)
  that checks the user's rights before each call; the administrator's store offers it too.
- ``Store``: the administrator's store, ``Letterlog.open(data)``: the ``Face`` and the
  administration (``Ingest``, ``AccessAdmin``, ``Lookups``, ``Lifecycle``, ``Upkeep``,
  ``RulesAdmin``).

Both implementations name these Protocols as their bases, so mypy (``make lint``) fails when
one drifts from its interface; a caller holding a ``Face`` cannot reach a method of the
administrator's without a type error. Entry points (the CLI, ``lda``, ``lmtp``, the stream
commands, backup, export, the Spark job's driver) hold one of these, never the command side
behind it (``Letterlog.mail``).

Only annotations import the implementations' types: this module imports nothing at run time
but the standard library.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol, Required, Self, TypedDict, Unpack
from uuid import UUID

if TYPE_CHECKING:
    from adapters.config.settings import Settings
    from adapters.eventlog.store import MailLog
    from adapters.lifecycle.completion import Completion
    from adapters.lifecycle.jobs import PurgeJobs, PurgeReport
    from adapters.readside.host import ProjectionHost
    from domain.delivery import CheckedDelivery
    from domain.lifecycle import Retention
    from domain.mailbox import Mailbox
    from domain.message import Message
    from domain.ports import PayloadStore
    from domain.results import Change, Delivery, Upload
    from domain.rules import Evaluation, RuleBook, RuleEvent
    from projections.queries import MessageSummary, PurgeEntry


class Arrival(TypedDict, total=False):
    """``deliver``'s and ``check``'s fields (``domain.commands.Deliver`` validates them)."""

    account: Required[str]
    raw: Required[bytes]
    mailbox: str
    labels: Iterable[str]
    flags: Iterable[str]
    extract_limit: int | None
    extract_until: datetime | None
    internal_date: datetime | None
    idempotency_key: str | None
    envelope: Mapping[str, Any] | None


class UploadStart(TypedDict, total=False):
    """``begin_upload``'s fields (``domain.commands.BeginUpload``)."""

    account: Required[str]
    mailbox: str
    labels: Iterable[str]
    flags: Iterable[str]
    extract_limit: int | None
    extract_until: datetime | None


class Target(TypedDict, total=False):
    """``check_delivery``'s fields: ``deliver``'s without the message."""

    account: Required[str]
    mailbox: str
    labels: Iterable[str]
    flags: Iterable[str]
    extract_limit: int | None
    extract_until: datetime | None
    internal_date: datetime | None
    idempotency_key: str | None
    envelope: Mapping[str, Any] | None


class MessageManager(Protocol):
    """What a mail client does with messages: bring them in, read them exactly, change
    them (James's ``MessageManager``)."""

    def deliver(self, **fields: Unpack[Arrival]) -> Delivery:
        """Stores a message (byte-exact) in a mailbox; a retried idempotency key answers the
        first delivery."""

    def check_delivery(self, **fields: Unpack[Target]) -> None:
        """Raises what delivering any message with these fields would raise; writes
        nothing."""

    def begin_upload(self, **fields: Unpack[UploadStart]) -> Upload: ...

    def append_chunk(self, message_id: UUID, index: int, data: bytes) -> Change: ...

    def complete_upload(self, message_id: UUID) -> Delivery: ...

    def extract(self, message_id: UUID) -> bytes:
        """The exact bytes, counted against the message's policy."""

    def extract_to(self, message_id: UUID, path: str | os.PathLike[str], *,
                   force: bool = False) -> dict[str, Any]: ...

    def extract_to_stream(self, message_id: UUID, out: BinaryIO) -> dict[str, Any]: ...

    def show(self, message_id: UUID) -> dict[str, Any]:
        """The message as the command side knows it (no content)."""

    def flag(self, message_id: UUID, flags: Iterable[str], mode: str = "add") -> Change: ...

    def label(self, message_id: UUID, add: Iterable[str] = (),
              remove: Iterable[str] = ()) -> Change: ...

    def set_policy(self, message_id: UUID, extract_limit: int | None = None,
                   extract_until: datetime | None = None) -> Change: ...

    def move(self, message_id: UUID, mailbox: str) -> Change: ...

    def copy(self, message_id: UUID, mailbox: str) -> Delivery: ...

    def delete(self, message_id: UUID) -> Change: ...

    def restore(self, message_id: UUID) -> Change: ...

    def expunge(self, message_ids: Iterable[UUID]) -> Change: ...


class MailboxManager(Protocol):
    """An account's mailboxes, subscriptions, rights and quota (James's
    ``MailboxManager``)."""

    def create_mailbox(self, account: str, mailbox: str, role: str = "", *,
                       create_account: bool = False) -> Change: ...

    def rename_mailbox(self, account: str, mailbox: str, new_name: str) -> Change: ...

    def delete_mailbox(self, account: str, mailbox: str) -> Change: ...

    def subscribe(self, account: str, mailbox: str, *,
                  create_account: bool = False) -> Change: ...

    def unsubscribe(self, account: str, mailbox: str) -> Change: ...

    def mailbox_list(self, account: str | None = None) -> list[dict[str, Any]]:
        """The account's mailboxes; None: every one the caller may use (a user's)."""

    def acl_get(self, account: str, mailbox: str) -> dict[str, str]: ...

    def acl_set(self, account: str, mailbox: str, identifier: str,
                rights: str) -> Change: ...

    def acl_delete(self, account: str, mailbox: str, identifier: str) -> Change: ...

    def my_rights(self, account: str, mailbox: str) -> str:
        """The caller's rights on the mailbox (RFC 4314 MYRIGHTS)."""

    def quota(self, account: str) -> dict[str, Any]: ...


class Queries(Protocol):
    """The read models' answers."""

    def messages(self, account: str, mailbox: str = "INBOX", *, limit: int = 50,
                 before_uid: int | None = None) -> list[MessageSummary]: ...

    def search(self, account: str, mailbox: str = "INBOX", *, limit: int = 50,
               before_uid: int | None = None, **criteria: Any) -> list[MessageSummary]: ...

    def label_messages(self, account: str, label: str, *,
                       limit: int = 50) -> list[MessageSummary]: ...

    def thread(self, thread_id: UUID) -> list[MessageSummary]: ...

    def counters(self, account: str) -> dict[str, Any]: ...

    def mailbox_status(self, account: str, mailbox: str = "INBOX") -> dict[str, Any]: ...

    def subscriptions(self, account: str) -> list[str]: ...

    def body(self, account: str, mailbox: str, uid: int) -> Iterator[bytes]: ...

    def usage(self, account: str) -> dict[str, Any]: ...

    def quota_shown(self, account: str) -> dict[str, Any]: ...

    def reading(self, *, view: str | None = None, as_of: int | None = None,
                account: str | None = None) -> Self:
        """These queries as they were (a saved view, or a past position)."""


class Face(MessageManager, MailboxManager, Queries, Protocol):
    """Everything a user may be given; the store closes with it."""

    def close(self) -> None: ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: object) -> None: ...


class Ingest(Protocol):
    """Bulk and agent deliveries: importers, ``lda``, ``lmtp``."""

    def deliver_many(self, items: Iterable[dict[str, Any]]) -> list[Delivery]: ...

    def check(self, **fields: Unpack[Arrival]) -> CheckedDelivery: ...

    def deliver_checked(self, items: Sequence[CheckedDelivery], *,
                        new_keys: bool = False) -> list[Delivery]: ...

    def store_payloads(self, items: Sequence[CheckedDelivery]) -> None: ...

    def already_delivered(self, account: str, idempotency_key: str) -> bool: ...

    def ensure_mailbox(self, account: str, mailbox: str, role: str = "") -> bool: ...

    def require_account(self, account: str) -> None:
        """``AccountNotFound`` unless the log has opened ``account``."""

    def takes_messages(self, account: str, mailbox: str) -> bool:
        """Whether ``mailbox`` of ``account`` exists and takes messages (not ``\\Noselect``)."""

    def guard_appends(self, guard: Callable[[], AbstractContextManager[None]]) -> None:
        """Every append from now on runs inside ``guard()`` (a delivery agent's deadline)."""

    def projecting_in_a_second_process(self) -> AbstractContextManager[bool]: ...

    def catch_up(self) -> int: ...

    def max_position(self) -> int: ...


class AccessAdmin(Protocol):
    """Users, rights, roots and quotas as the administrator sets them."""

    def as_user(self, user: str, groups: Iterable[str] | None = None) -> Face: ...

    def acl_entries(self) -> list[tuple[str, str, str, str]]: ...

    def root(self, user: str) -> str | None: ...

    def roots(self) -> dict[str, str]: ...

    def set_root(self, user: str, root: str) -> Change: ...

    def delete_root(self, user: str) -> Change: ...

    def set_quota(self, account: str, *, bytes: int | None = None,
                  messages: int | None = None) -> Change: ...

    @property
    def quota_defaults(self) -> tuple[int, int]: ...


class Lookups(Protocol):
    """The command side's current aggregates, read only: what a caller's rights are
    checked on (``adapters.caller``) and what backup and the rule events' purge ask."""

    def current_reads(self) -> AbstractContextManager[int]:
        """The lookups inside it read the current aggregates after one query of the log's
        head (which it gives), through the command side's cache."""

    def message_record(self, message_id: UUID) -> Message:
        """``MessageNotFound`` if the log has none."""

    def mailbox_record(self, mailbox_id: UUID) -> Mailbox: ...

    def mailbox_named(self, account: str, mailbox: str) -> Mailbox: ...

    def address_of(self, account_id: UUID) -> str: ...

    def visible_mailbox_ids(self, identifiers: Iterable[str]) -> list[UUID]:
        """Mailboxes whose ACL names one of ``identifiers`` (the ``acl`` read model)."""


class Lifecycle(Protocol):
    """Purge and erasure."""

    def retention(self) -> Retention: ...

    @property
    def completion(self) -> Completion | None: ...

    def purge_jobs(self) -> PurgeJobs: ...

    def purge(self, now: datetime | None = None, queues: Sequence[str] | None = None, *,
              dry_run: bool = False, progress: Any = None) -> PurgeReport: ...

    def purge_due(self, now: datetime | None = None, *,
                  limit: int = 1000) -> list[PurgeEntry]: ...

    def erase_message(self, message_id: UUID, *,
                      with_copies: bool = False) -> dict[str, Any]: ...

    def erase_account(self, address: str) -> dict[str, Any]: ...

    def finish_interrupted_erasures(self) -> list[dict[str, Any]]: ...

    def complete_erasures(self, *, record: bool = False) -> Completion: ...

    def migrate_keys(self, *, remove_file: bool = True) -> dict[str, Any]:
        """The vault file's key-encryption keys moved into the key cluster (ADR 0073)."""

    def pending_erasures(self) -> list[dict[str, Any]]: ...

    def running_erasures(self) -> list[dict[str, Any]]: ...


class Upkeep(Protocol):
    """The log, the read models' upkeep and the store's parts an operator's tool needs
    (backup, the Spark driver, the benchmarks): typed, read only."""

    @property
    def settings(self) -> Settings: ...

    @property
    def log(self) -> MailLog: ...

    @property
    def payloads(self) -> PayloadStore: ...

    @property
    def projections(self) -> ProjectionHost | None: ...

    def read_side(self) -> ProjectionHost:
        """The read models, caught up with this process's own commands."""

    def events(self, start: int = 1, stop: int | None = None,
               batch: int = 1000) -> Iterator[tuple[int, Any]]: ...

    def position_at(self, when: datetime) -> int: ...

    def rebuild(self, names: list[str] | None = None,
                progress: Any = None) -> dict[str, Any]: ...

    def build_view(self, view: str, names: list[str] | None, stop: int) -> dict[str, Any]: ...

    def views(self) -> list[Any]: ...

    def drop_view(self, name: str) -> Any: ...

    def erase_from_views(self) -> dict[str, Any]: ...

    def verify(self, names: list[str] | None = None, progress: Any = None) -> list[Any]: ...

    def read_model_bytes(self) -> int | None: ...

    def compact_read_models(self) -> dict[str, int] | None: ...

    def listed_mail(self) -> dict[str, int]: ...

    def exclusive(self, name: str) -> AbstractContextManager[Any]: ...


class RulesAdmin(Protocol):
    """Event rules and their events (docs/event-rules.md)."""

    def create_rule(self, name: str, *, secret: str | None = None,
                    **terms: Any) -> Change: ...

    def change_rule(self, name: str, **terms: Any) -> Change: ...

    def rotate_rule_secret(self, name: str, secret: str | None = None) -> Change:
        """A new HMAC secret (None: random, shown once in ``extra["secret"]``)."""

    def enable_rule(self, name: str) -> Change: ...

    def disable_rule(self, name: str) -> Change: ...

    def delete_rule(self, name: str) -> Change: ...

    def rules(self) -> list[dict[str, Any]]: ...

    def rule(self, name: str) -> dict[str, Any]: ...

    def rule_book(self) -> RuleBook | None: ...

    def rule_evaluation(self) -> Evaluation:
        """A fresh evaluation as a delivery makes one (the bounded matcher, its limits)."""

    def rule_events(self, *, message: UUID | None = None, rule: str | None = None,
                    status: str | None = None,
                    since: datetime | None = None) -> list[dict[str, Any]]: ...

    def rule_event(self, event_id: UUID) -> dict[str, Any]: ...

    def rule_event_record(self, event_id: UUID) -> RuleEvent:
        """The log's word on a rule event (not the read model's)."""

    def rule_event_counts(self) -> dict[str, int]: ...

    def rule_event_processing(self, event_id: UUID, where: str) -> Change: ...

    def rule_event_completed(self, event_id: UUID, attempts: int, where: str) -> Change: ...

    def rule_event_failed(self, event_id: UUID, attempts: int, reason: str,
                          where: str) -> Change: ...

    def discard_rule_events(self, event_ids: Sequence[UUID], reason: str, *,
                            queue: str = "", since: Sequence[datetime | None] = (),
                            check: Callable[[RuleEvent], bool] = ...) -> Change: ...

    def resend(self, event_ids: Sequence[UUID] = (), *,
               status: str | None = None) -> list[str]: ...

    def dispatch_pending(self, applications: Mapping[str, Any] | None = None
                         ) -> dict[str, int]: ...

    def purge_rule_events(self, now: datetime | None = None, *,
                          dry_run: bool = False) -> dict[str, Any]: ...


class Store(Face, Ingest, AccessAdmin, Lookups, Lifecycle, Upkeep, RulesAdmin, Protocol):
    """The administrator's store: the ``Face`` and every administration."""

    def copy(self, message_id: UUID, mailbox: str, *,
             target_rights: str | None = None) -> Delivery:
        """``target_rights``: a user's rights on the target (the caller's view passes
        them): the flags and labels the copy keeps follow them (RFC 4314 ``s``/``t``/``w``);
        None keeps all."""
