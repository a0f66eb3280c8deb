"""Virtual roots (IBM Sterling's): the mailbox a user sees as its top.

A root is ``account`` or ``account/path``. A user with a root lists the mailboxes of that
account at or below the path, named relative to it, and cannot name one above it; mailboxes
of other accounts it may look up (``l``) are listed as ``shared/<account>/<mailbox>``. A
user without a root has its own account (its name) as root.

One ``VirtualRoot`` aggregate per user (id: uuid5 of ``root:`` + the user's name folded to
lower case); its events carry the old root, so an administrator can set it back.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate

from domain.aggregate import MailAggregate
from domain.root_names import format_root, parse_root, root_id_for, validate_user
from domain.values import account_id_for


class VirtualRoot(MailAggregate):
    user: str
    root: str  # "" once deleted

    def __init__(self) -> None:
        """State is set by the creation event's ``apply``."""

    class Created(Aggregate.Created):
        user: str

        def apply(self, aggregate: Any) -> None:
            aggregate.user = self.user
            aggregate.root = ""

    class Set(Aggregate.Event):
        """``user``'s root became ``root`` (was ``old_root``, "" for none)."""

        user: str
        account_id: UUID
        root: str
        old_root: str

        def apply(self, aggregate: Any) -> None:
            aggregate.root = self.root

    class Deleted(Aggregate.Event):
        """``user`` has no root any more; it was ``old_root``."""

        user: str
        account_id: UUID
        old_root: str

        def apply(self, aggregate: Any) -> None:
            aggregate.root = ""

    @classmethod
    def create(cls, user: str) -> VirtualRoot:
        name = validate_user(user)
        return cls._create(cls.Created, id=root_id_for(name), user=name)

    def set(self, root: str) -> bool:
        account, path = parse_root(root)
        value = format_root(account, path)
        if value == self.root:
            return False
        self.trigger_event(self.Set, user=self.user, account_id=account_id_for(account),
                           root=value, old_root=self.root)
        return True

    def delete(self) -> bool:
        if not self.root:
            return False
        account, _ = parse_root(self.root)
        self.trigger_event(self.Deleted, user=self.user, account_id=account_id_for(account),
                           old_root=self.root)
        return True
