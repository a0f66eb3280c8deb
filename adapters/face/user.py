"""What a user may be given, in three parts: ``MessageManager``, ``MailboxManager`` and
``Queries`` (``Face`` is the three together)."""


from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol, Self, Unpack
from uuid import UUID

if TYPE_CHECKING:
    from domain.results import Change, Delivery, Upload
    from projections.queries import MessageSummary

from adapters.face.fields import Arrival, Target, UploadStart


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
