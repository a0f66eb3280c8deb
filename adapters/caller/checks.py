"""The checks ``CallerView`` runs before the store's own method: a mailbox's or a message's
rights, the owner's, what an arrival may carry and what a delivery's answer may tell, and
the right on a new mailbox's parent."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from adapters.caller.session import CallerSession
from domain.errors import (
    InvalidCommand,
    MailboxNotFound,
    MessageNotFound,
    NotFound,
    PermissionDenied,
)
from domain.mailbox import Mailbox
from domain.results import Delivery
from domain.rights import (
    COMMAND_RIGHTS,
    RIGHT_NAMES,
    kept_on_arrival,
    missing,
    rights_of,
    rights_string,
)
from domain.values import DELIMITER, normalise_address


class CallerChecks(CallerSession):
    """The checks, on the command side's aggregates (``Store.current_reads``)."""

    def _hidden(self, account: str, mailbox: str) -> MailboxNotFound:
        return MailboxNotFound(f"mailbox: {mailbox!r} does not exist for {account}")

    def _mailbox(self, account: str, mailbox: str) -> tuple[str, Mailbox, frozenset[str]]:
        """The mailbox, its account's address and the caller's rights on it; refused as
        not found when missing, outside the root or not to be looked up by the caller."""
        with self._checking():
            return self._mailbox_checked(account, mailbox)

    def _mailbox_checked(self, account: str, mailbox: str
                         ) -> tuple[str, Mailbox, frozenset[str]]:
        root_account, base = self.root()  # the memo made current
        try:
            address = normalise_address(account)
            seen = self._seen
            key = ("mailbox", address, mailbox)
            if key not in seen:
                seen[key] = self._store.mailbox_named(address, mailbox)
            mb = seen[key]
        except NotFound:
            raise self._hidden(account, mailbox) from None
        if address == root_account and not self._under(base, mb.name):
            raise self._hidden(account, mailbox)
        return address, mb, rights_of(self.caller, address, mb.acl)

    def _need(self, command: str, role: str, account: str, mailbox: str,
              needed: str | None = None) -> tuple[str, Mailbox]:
        address, mb, rights = self._mailbox(account, mailbox)
        need = needed if needed is not None else COMMAND_RIGHTS[command][role]
        lacking = missing(need, rights)
        if lacking:
            if "l" not in rights:
                raise self._hidden(account, mailbox)
            names = ", ".join(f"'{r}' ({RIGHT_NAMES[r]})" for r in lacking)
            raise PermissionDenied(
                f"permission denied: {self.user} lacks {names} on {mb.name!r} of {address}"
                f" ({command} needs {need!r})", missing=lacking, command=command)
        return address, mb

    def _message(self, command: str, message_id: UUID, role: str = "mailbox",
                 needed: str | None = None) -> tuple[str, Mailbox]:
        with self._checking():
            return self._message_checked(command, message_id, role, needed)

    def _message_checked(self, command: str, message_id: UUID, role: str,
                         needed: str | None) -> tuple[str, Mailbox]:
        hidden = MessageNotFound(f"message {message_id} does not exist")
        try:
            m = self._store.message_record(message_id)
            if m.mailbox_id is None:
                raise hidden
            mb = self._store.mailbox_record(m.mailbox_id)
            address = self._store.address_of(m.account_id)
        except NotFound:
            raise hidden from None
        try:
            return self._need(command, role, address, mb.name, needed)
        except MailboxNotFound:
            raise hidden from None

    def _own_address(self) -> str:
        try:
            return normalise_address(self.user)
        except InvalidCommand:
            return ""

    def _owner(self, command: str, account: str) -> str:
        """Account-wide reads and writes: the account's owner only."""
        address = normalise_address(account)
        if self.user != address:
            raise PermissionDenied(
                f"permission denied: {command} of {address} is for its owner; {self.user} is"
                " not", missing="owner", command=command)
        return address

    def _arrival(self, command: str, fields: Any) -> tuple[Any, str]:
        """``fields`` of a delivery or upload as the caller may give them: checked ('i'),
        its flags and labels cut to what its rights on the target allow (RFC 4314: ``s``,
        ``t``, ``w``; dropped, as Dovecot drops them); and those rights."""
        address, mb = self._need(command, "mailbox", fields.get("account", ""),
                                 fields.get("mailbox", "INBOX"))
        rights = rights_string(rights_of(self.caller, address, mb.acl))
        flags, labels = kept_on_arrival(fields.get("flags") or (), fields.get("labels") or (),
                                        rights)
        return {**fields, "flags": flags, "labels": labels}, rights

    def _answer(self, delivery: Delivery, rights: str) -> Delivery:
        """A delivery's answer as the caller may see it: an idempotency key that an earlier
        delivery claimed answers that delivery, which the caller may not read (another
        mailbox of the account, or this one without 'r'): then nothing of that message
        (its UID, UIDVALIDITY, hash, modseq) is told."""
        if not delivery.duplicate:
            return delivery
        try:
            mb = self._store.mailbox_record(delivery.mailbox_id)
            address = self._store.address_of(mb.account_id)
            readable = "r" in rights_of(self.caller, address, mb.acl)
        except NotFound:
            readable = False
        if readable:
            return delivery
        return Delivery(message_id=delivery.message_id, mailbox_id=delivery.mailbox_id,
                        uid=0, uidvalidity=0, size=delivery.size, sha256="", modseq=0,
                        position=delivery.position, duplicate=True)

    def _parent(self, command: str, account: str, mailbox: str) -> None:
        """``k`` on the mailbox above ``mailbox`` (a top-level one: the owner only, inside
        the root)."""
        parent, sep, _ = mailbox.rpartition(DELIMITER)
        if sep:
            self._need(command, "parent", account, parent)
            return
        address = normalise_address(account)
        root_account, base = self.root()
        if address == root_account and base:
            raise self._hidden(account, mailbox)
        if self.user != address:
            raise PermissionDenied(
                f"permission denied: {self.user} may not create top-level mailboxes of"
                f" {address} ({command} needs 'k' on the parent; only the owner has it at"
                " the top)", missing="k", command=command)
