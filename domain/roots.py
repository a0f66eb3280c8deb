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
from domain.errors import InvalidCommand
from domain.identity import SPECIAL, canonical_name
from domain.values import DELIMITER, account_id_for, name_uuid, normalise_address

SHARED = "shared"
"""The prefix of other accounts' mailboxes in a user's listing: ``shared/<account>/<name>``."""


def root_id_for(user: str) -> UUID:
    return name_uuid("root:" + validate_user(user))


def validate_user(user: str) -> str:
    """A user's name as the identity rule has it (``domain.identity``): ``NameRefused``
    when the rule cannot make it unambiguous; a name that starts like a negative or group
    identifier (``-``, ``$``) is no user's."""
    name = canonical_name(user, "user")
    if name[0] in "-$" or name in SPECIAL:
        raise InvalidCommand(f"user: {user!r} is not a user name")
    return name


def parse_root(root: str) -> tuple[str, str]:
    """``account[/path]`` -> (normalised account, path or "")."""
    account, _, path = (root or "").strip().partition(DELIMITER)
    path = path.strip(DELIMITER)
    return normalise_address(account), path


def format_root(account: str, path: str) -> str:
    return f"{account}{DELIMITER}{path}" if path else account


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
