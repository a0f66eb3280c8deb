"""Commands on an account's mailboxes (create, rename, subscribe, delete) and its quota;
``mailbox_list``, the mailboxes as the command side knows them.

A part of the ``Letterlog`` facade (``adapters.embedded``; ``parts.FacadePart``)."""

from __future__ import annotations

from typing import Any

from adapters.facade.parts import FacadePart
from domain.errors import InvalidCommand, MailboxExists
from domain.service import Change


class Mailboxes(FacadePart):
    """An account's mailboxes and quota."""

    def create_mailbox(self, account: str, mailbox: str, role: str = "", *,
                       create_account: bool = False) -> Change:
        """Creates ``mailbox`` for an existing account (``AccountNotFound`` otherwise,
        nothing written), or opens the account first when ``create_account``."""
        return self._command(self.mail.create_mailbox, account, mailbox, role,
                             create_account=create_account)

    def rename_mailbox(self, account: str, mailbox: str, new_name: str) -> Change:
        """Renames ``mailbox`` and every ``mailbox/...`` below it in one append; each keeps
        its messages, UIDs and UIDVALIDITY (``extra["renamed"]`` lists them)."""
        return self._command(self.mail.rename_mailbox, account, mailbox, new_name)

    def subscribe(self, account: str, mailbox: str, *, create_account: bool = False) -> Change:
        """Subscribes an existing account (AccountNotFound otherwise: nothing is created),
        or opens the account first when ``create_account``."""
        return self._command(self.mail.subscribe, account, mailbox,
                             create_account=create_account)

    def unsubscribe(self, account: str, mailbox: str) -> Change:
        return self._command(self.mail.unsubscribe, account, mailbox)

    def delete_mailbox(self, account: str, mailbox: str) -> Change:
        return self._command(self.mail.delete_mailbox, account, mailbox)

    def ensure_mailbox(self, account: str, mailbox: str, role: str = "") -> bool:
        """Creates ``mailbox`` unless the account has it already; True if it was created.
        ``role``: given to it unless another of the account's mailboxes has that role."""
        try:
            self.create_mailbox(account, mailbox, role, create_account=True)
        except MailboxExists:
            return False
        except InvalidCommand:
            if not role or not self.mail.account(account).has_role(role):
                raise
            return self.ensure_mailbox(account, mailbox)
        return True

    def mailbox_list(self, account: str | None = None) -> list[dict[str, Any]]:
        if account is None:
            raise InvalidCommand("account: give the account whose mailboxes to list")
        acc = self.mail.account(account)
        out = []
        for name, (mailbox_id, role, uidvalidity) in sorted(acc.mailboxes.items()):
            mb = self.mail.mailbox(mailbox_id)
            out.append({"name": name, "mailbox_id": str(mailbox_id), "role": role,
                        "uidvalidity": uidvalidity, "uidnext": mb.uidnext,
                        "subscribed": name in acc.subscriptions,
                        # deleted with inferiors left: a name only (RFC 3501 \Noselect)
                        "noselect": mb.deleted})
        return out

    def set_quota(self, account: str, *, bytes: int | None = None,
                  messages: int | None = None) -> Change:
        """The account's own quota (``domain.quota``: a limit, 0 unlimited, -1 default)."""
        return self._command(self.mail.set_quota, account, bytes=bytes, messages=messages)

    def quota(self, account: str) -> dict[str, Any]:
        """The account's limits and usage, exact up to the log's head (the command side)."""
        return self.mail.quota(account)
