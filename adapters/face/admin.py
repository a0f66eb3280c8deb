"""The administrator's ingest, access and look-ups: ``Ingest`` (bulk delivery: the importer,
the MTA's writer), ``AccessAdmin`` (users' faces, roots, quota), ``Lookups`` (the command
side's records, for the caller's checks)."""


from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol, Unpack
from uuid import UUID

if TYPE_CHECKING:
    from domain.delivery import CheckedDelivery
    from domain.mailbox import Mailbox
    from domain.message import Message
    from domain.ports import PayloadStore
    from domain.results import Change, Delivery

from adapters.face.fields import Arrival
from adapters.face.user import Face


class Ingest(Protocol):
    """Bulk and agent deliveries: importers, ``lda``, ``lmtp``."""

    def deliver_many(self, items: Iterable[dict[str, Any]]) -> list[Delivery]: ...

    def check(self, **fields: Unpack[Arrival]) -> CheckedDelivery: ...

    def deliver_checked(self, items: Sequence[CheckedDelivery], *,
                        new_keys: bool = False) -> list[Delivery]: ...

    def store_payloads(self, items: Sequence[CheckedDelivery], *,
                       into: PayloadStore | None = None) -> list[CheckedDelivery]: ...

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
