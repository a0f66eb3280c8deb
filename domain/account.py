"""The Account aggregate: the mailbox name registry, UIDVALIDITY allocation,
subscriptions and labels of one address.

It is the consistency boundary for names: two mailboxes of one account never share a name,
and a re-created or renamed mailbox always gets a UIDVALIDITY it never had before.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate

from domain.aggregate import MailAggregate
from domain.errors import InvalidCommand, MailboxExists, MailboxNotFound
from domain.quota import Limits, account_limits
from domain.values import DELIMITER, Role, account_id_for, name_uuid, normalise_address


def mailbox_id_for(account_id: UUID, uidvalidity: int) -> UUID:
    """Deterministic: one account never hands out the same UIDVALIDITY twice."""
    return name_uuid(f"mailbox:{account_id}:{uidvalidity}")


class Account(MailAggregate):
    address: str
    mailboxes: dict[str, list[Any]]  # name -> [mailbox_id, role, uidvalidity]
    uidvalidity_next: int
    subscriptions: set[str]
    labels: dict[str, dict[str, Any]]

    def __init__(self) -> None:
        """State is set by the creation event's ``apply``."""

    def _copy_containers(self, state: dict[str, Any]) -> None:
        state["mailboxes"] = {name: list(entry) for name, entry in self.mailboxes.items()}
        state["subscriptions"] = set(self.subscriptions)
        state["labels"] = {label: dict(attrs) for label, attrs in self.labels.items()}

    class Opened(Aggregate.Created):
        address: str

        def apply(self, aggregate: Any) -> None:
            aggregate.address = self.address
            aggregate.mailboxes = {}
            aggregate.uidvalidity_next = 1
            aggregate.subscriptions = set()
            aggregate.labels = {}

    class MailboxRegistered(Aggregate.Event):
        mailbox_id: UUID
        name: str
        role: str
        uidvalidity: int

        def apply(self, aggregate: Any) -> None:
            aggregate.mailboxes[self.name] = [self.mailbox_id, self.role, self.uidvalidity]
            aggregate.uidvalidity_next = max(aggregate.uidvalidity_next, self.uidvalidity + 1)

    class MailboxRenamed(Aggregate.Event):
        mailbox_id: UUID
        old_name: str
        new_name: str
        old_uidvalidity: int
        new_uidvalidity: int

        def apply(self, aggregate: Any) -> None:
            mailbox_id, role, _ = aggregate.mailboxes.pop(self.old_name)
            aggregate.mailboxes[self.new_name] = [mailbox_id, role, self.new_uidvalidity]
            aggregate.uidvalidity_next = max(aggregate.uidvalidity_next, self.new_uidvalidity + 1)

    class MailboxUnregistered(Aggregate.Event):
        mailbox_id: UUID
        name: str

        def apply(self, aggregate: Any) -> None:
            aggregate.mailboxes.pop(self.name, None)

    class Subscribed(Aggregate.Event):
        name: str

        def apply(self, aggregate: Any) -> None:
            aggregate.subscriptions.add(self.name)

    class Unsubscribed(Aggregate.Event):
        name: str

        def apply(self, aggregate: Any) -> None:
            aggregate.subscriptions.discard(self.name)

    class LabelDefined(Aggregate.Event):
        label: str
        attributes: dict[str, Any]

        def apply(self, aggregate: Any) -> None:
            aggregate.labels[self.label] = dict(self.attributes)

    class LabelRemoved(Aggregate.Event):
        label: str

        def apply(self, aggregate: Any) -> None:
            aggregate.labels.pop(self.label, None)

    class QuotaSet(Aggregate.Event):
        """The account's own quota: bytes and messages, each a limit, ``0`` for none, or
        ``-1`` for the default setting (``domain.quota``); with the values before."""

        bytes: int
        messages: int
        old_bytes: int
        old_messages: int

        def apply(self, aggregate: Any) -> None:
            aggregate.quota = [self.bytes, self.messages]  # a list: snapshots hold it

    # -- construction -------------------------------------------------------------------
    @classmethod
    def open(cls, address: str) -> Account:
        addr = normalise_address(address)
        return cls._create(cls.Opened, id=account_id_for(addr), address=addr)

    # -- queries on the aggregate (command-side only) -----------------------------------
    def mailbox(self, name: str) -> tuple[UUID, str, int]:
        try:
            mailbox_id, role, uidvalidity = self.mailboxes[name]
        except KeyError:
            raise MailboxNotFound(f"mailbox: {name!r} does not exist for {self.address}") from None
        return mailbox_id, role, uidvalidity

    def has_mailbox(self, name: str) -> bool:
        return name in self.mailboxes

    # -- commands -----------------------------------------------------------------------
    def has_role(self, role: str) -> bool:
        """Whether one of the account's mailboxes has this special-use role."""
        return bool(role) and any(r == role for _, r, _ in self.mailboxes.values())

    def register_mailbox(self, name: str, role: Role) -> tuple[UUID, int]:
        if name in self.mailboxes:
            raise MailboxExists(f"mailbox: {name!r} already exists for {self.address}")
        if self.has_role(role.value):
            raise InvalidCommand(
                f"role: {self.address} already has a mailbox with role {role.value!r}"
            )
        uidvalidity = self.uidvalidity_next
        mailbox_id = mailbox_id_for(self.id, uidvalidity)
        self.trigger_event(
            self.MailboxRegistered,
            mailbox_id=mailbox_id,
            name=name,
            role=role.value,
            uidvalidity=uidvalidity,
        )
        return mailbox_id, uidvalidity

    def inferiors(self, name: str) -> list[str]:
        """The names below ``name`` in the hierarchy (``name/...``, any depth), sorted."""
        prefix = name + DELIMITER
        return sorted(n for n in self.mailboxes if n.startswith(prefix))

    def rename_mailbox(self, old: str, new: str) -> list[tuple[UUID, str, str, int]]:
        """Renames ``old`` and every inferior ``old/...`` to ``new/...`` (RFC 3501 RENAME).

        Each mailbox keeps its id, its messages, its UIDs and its UIDVALIDITY (IMAP clients
        need not re-download it; Dovecot, imaptest ``uidvalidity-rename``). The events still
        carry old and new UIDVALIDITY (equal since this rule; older events may differ).
        Everything is checked before the first event: INBOX is refused, and so is a new
        name inside the renamed tree or any target name that exists already. Returns
        ``(mailbox_id, old_name, new_name, uidvalidity)`` per renamed mailbox, ``old``
        first."""
        _, role, _ = self.mailbox(old)
        if old == new:
            raise InvalidCommand(f"mailbox: rename of {old!r} to itself")
        if role == Role.INBOX.value or old == "INBOX":
            raise InvalidCommand(
                "mailbox: INBOX cannot be renamed (create a mailbox and move its messages)")
        if new.startswith(old + DELIMITER):
            raise InvalidCommand(f"mailbox: {old!r} cannot be renamed below itself ({new!r})")
        tree = [old, *self.inferiors(old)]
        targets = [new + name[len(old):] for name in tree]
        for target in targets:
            if target in self.mailboxes:
                raise MailboxExists(f"mailbox: {target!r} already exists for {self.address}"
                                    f" (renaming {old!r} to {new!r}); nothing was renamed")
        renamed = []
        for name, target in zip(tree, targets, strict=True):
            mailbox_id, _, uidvalidity = self.mailboxes[name]
            self.trigger_event(
                self.MailboxRenamed,
                mailbox_id=mailbox_id,
                old_name=name,
                new_name=target,
                old_uidvalidity=uidvalidity,
                new_uidvalidity=uidvalidity,
            )
            renamed.append((mailbox_id, name, target, uidvalidity))
        return renamed

    def check_deletable(self, name: str) -> UUID:
        """The mailbox's id, unless it is INBOX (never deleted)."""
        mailbox_id, role, _ = self.mailbox(name)
        if role == Role.INBOX.value:
            raise InvalidCommand("mailbox: INBOX cannot be deleted")
        return mailbox_id

    def unregister_mailbox(self, name: str) -> UUID:
        mailbox_id = self.check_deletable(name)
        self.trigger_event(self.MailboxUnregistered, mailbox_id=mailbox_id, name=name)
        return mailbox_id

    def subscribe(self, name: str) -> bool:
        if name in self.subscriptions:
            return False
        self.trigger_event(self.Subscribed, name=name)
        return True

    def unsubscribe(self, name: str) -> bool:
        if name not in self.subscriptions:
            return False
        self.trigger_event(self.Unsubscribed, name=name)
        return True

    def define_labels(self, labels: frozenset[str]) -> None:
        for label in sorted(labels - self.labels.keys()):
            self.trigger_event(self.LabelDefined, label=label, attributes={})

    def set_quota(self, limits: Limits) -> bool:
        """The account's own quota (``-1`` fields: the default setting); False if unchanged."""
        old = account_limits(self)
        if limits == old:
            return False
        self.trigger_event(self.QuotaSet, bytes=limits.bytes, messages=limits.messages,
                           old_bytes=old.bytes, old_messages=old.messages)
        return True

    def set_label_attributes(self, label: str, attributes: dict[str, Any]) -> bool:
        if self.labels.get(label) == attributes:
            return False
        self.trigger_event(self.LabelDefined, label=label, attributes=dict(attributes))
        return True
