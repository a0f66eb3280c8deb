"""The Mailbox aggregate: a folder's identity and its UID allocator.

UIDs are allocated here and carried in the event, so every projector and every replay sees
the same UID. ``uidnext`` only ever grows: a UID is never reused, even after the message
holding the highest UID is expunged or moved away.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate

from domain.aggregate import MailAggregate
from domain.errors import InvalidState
from domain.identity import identifier_of_event
from domain.rights import validate_identifier

_NO_ACL: Mapping[str, str] = MappingProxyType({})


class Mailbox(MailAggregate):
    account_id: UUID
    name: str
    role: str
    uidvalidity: int
    uidnext: int
    deleted: bool

    def __init__(self) -> None:
        """State is set by the creation event's ``apply``."""

    @property
    def acl(self) -> Mapping[str, str]:
        """Identifier -> rights (RFC 4314). Replaced by each change, never changed in place
        (so copies share it); none on a mailbox whose ACL was never set."""
        acl: Mapping[str, str] = self.__dict__.get("_acl", _NO_ACL)
        return acl

    class Created(Aggregate.Created):
        account_id: UUID
        name: str
        role: str
        uidvalidity: int

        def apply(self, aggregate: Any) -> None:
            aggregate.account_id = self.account_id
            aggregate.name = self.name
            aggregate.role = self.role
            aggregate.uidvalidity = self.uidvalidity
            aggregate.uidnext = 1
            aggregate.deleted = False

    class UidsAllocated(Aggregate.Event):
        """UIDs ``first_uid .. first_uid + len(message_ids) - 1`` went to these messages."""

        account_id: UUID
        message_ids: list[UUID]
        first_uid: int

        def apply(self, aggregate: Any) -> None:
            aggregate.uidnext = self.first_uid + len(self.message_ids)

    class Renamed(Aggregate.Event):
        account_id: UUID
        old_name: str
        new_name: str
        old_uidvalidity: int
        new_uidvalidity: int

        def apply(self, aggregate: Any) -> None:
            aggregate.name = self.new_name
            aggregate.uidvalidity = self.new_uidvalidity

    class Deleted(Aggregate.Event):
        account_id: UUID
        name: str

        def apply(self, aggregate: Any) -> None:
            aggregate.deleted = True

    class AclChanged(Aggregate.Event):
        """The rights of ``identifier`` on this mailbox went from ``old_rights`` to
        ``new_rights`` (either may be empty: an entry added, an entry removed)."""

        account_id: UUID
        name: str
        identifier: str
        old_rights: str
        new_rights: str

        def apply(self, aggregate: Any) -> None:
            acl = dict(aggregate.acl)
            ident = identifier_of_event(self.identifier)  # an old event's other spelling
            if self.new_rights:
                acl[ident] = self.new_rights
            else:
                acl.pop(ident, None)
            aggregate._acl = acl

    @classmethod
    def create(
        cls, mailbox_id: UUID, account_id: UUID, name: str, role: str, uidvalidity: int
    ) -> Mailbox:
        return cls._create(
            cls.Created,
            id=mailbox_id,
            account_id=account_id,
            name=name,
            role=role,
            uidvalidity=uidvalidity,
        )

    def allocate_uids(self, message_ids: list[UUID]) -> int:
        """Allocates one UID per message, in order; returns the first."""
        if self.deleted:
            raise InvalidState(f"mailbox: {self.name!r} was deleted; it holds no messages"
                               " (\\Noselect while mailboxes below it exist)")
        if not message_ids:
            return self.uidnext
        first = self.uidnext
        self.trigger_event(
            self.UidsAllocated,
            account_id=self.account_id,
            message_ids=list(message_ids),
            first_uid=first,
        )
        return first

    def rename(self, new_name: str, new_uidvalidity: int) -> None:
        self.trigger_event(
            self.Renamed,
            account_id=self.account_id,
            old_name=self.name,
            new_name=new_name,
            old_uidvalidity=self.uidvalidity,
            new_uidvalidity=new_uidvalidity,
        )

    def set_rights(self, identifier: str, rights: str) -> bool:
        """Sets the rights of ``identifier`` (``""``: removes its entry); False when that is
        what they are already (nothing happens)."""
        return self._change_rights(validate_identifier(identifier), rights)

    def inherit_acl(self, acl: Mapping[str, str]) -> None:
        """A new mailbox's ACL: a copy of its parent's (entries as they are stored)."""
        for identifier, rights in sorted(acl.items()):
            self._change_rights(identifier, rights)

    def _change_rights(self, ident: str, rights: str) -> bool:
        old = self.acl.get(ident, "")
        if old == rights:
            return False
        if self.deleted:
            raise InvalidState(f"mailbox: {self.name!r} was deleted; it has no rights to set")
        self.trigger_event(self.AclChanged, account_id=self.account_id, name=self.name,
                           identifier=ident, old_rights=old, new_rights=rights)
        return True

    def delete(self) -> None:
        if self.deleted:
            raise InvalidState(f"mailbox: {self.name!r} was already deleted")
        for identifier in sorted(self.acl):  # its ACL goes first, each entry with its rights
            self._change_rights(identifier, "")  # as stored, even one the rule now refuses
        self.trigger_event(self.Deleted, account_id=self.account_id, name=self.name)
