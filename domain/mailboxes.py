"""Mailbox commands: create, rename, delete a mailbox; subscribe and unsubscribe."""

from __future__ import annotations

from typing import Any

from domain.account import Account
from domain.commands import CreateMailbox, DeleteMailbox, RenameMailbox, Subscribe, build
from domain.errors import AccountNotFound, MailboxHasInferiors
from domain.mailbox import Mailbox
from domain.results import Change
from domain.unit_of_work import Commands
from domain.values import DELIMITER, Role


class MailboxCommands(Commands):
    """create_mailbox, rename_mailbox, delete_mailbox, subscribe, unsubscribe."""

    def create_mailbox(
        self, account: str, mailbox: str, role: str = "", *, create_account: bool = False
    ) -> Change:
        """Creates ``mailbox``; an account that does not exist is ``AccountNotFound`` unless
        ``create_account`` (then it is opened with its INBOX in the same append). A mailbox
        below another starts with a copy of its parent's ACL (as Dovecot's ACL plugin
        does), each entry an ``AclChanged`` of the same append."""
        cmd = build(CreateMailbox, account=account, mailbox=mailbox, role=Role(role))
        uow = self.uow

        def attempt() -> Change:
            acc, fresh = self._account_for(cmd.account, create_account)
            mailbox_id, uidvalidity = acc.register_mailbox(cmd.mailbox, cmd.role)
            mb = Mailbox.create(mailbox_id, acc.id, cmd.mailbox, cmd.role.value, uidvalidity)
            parent, sep, _ = cmd.mailbox.rpartition(DELIMITER)
            if sep and acc.has_mailbox(parent):  # a child starts with its parent's ACL
                mb.inherit_acl(uow.mailbox(acc.mailbox(parent)[0]).acl)
            return Change.of(uow.save(acc, *fresh, mb), {
                "mailbox_id": str(mailbox_id), "uidvalidity": uidvalidity,
                "account_created": bool(fresh)})

        return uow.run(attempt)

    def _account_for(self, address: str, create: bool) -> tuple[Account, list[Any]]:
        if create:
            return self.uow.account_or_open(address)
        try:
            return self.uow.account(address), []
        except AccountNotFound:
            raise AccountNotFound(
                f"account: {address!r} does not exist; nothing was written (ask for it to be"
                " created: --create-account, create_account=True)") from None

    def rename_mailbox(self, account: str, mailbox: str, new_name: str) -> Change:
        """Renames ``mailbox`` and every mailbox below it (``mailbox/...`` becomes
        ``new_name/...``), each keeping its id, messages, UIDs and UIDVALIDITY, in one
        append; any target name that exists refuses the whole rename."""
        cmd = build(RenameMailbox, account=account, mailbox=mailbox, new_name=new_name)
        uow = self.uow

        def attempt() -> Change:
            acc = uow.account(cmd.account)
            renamed = acc.rename_mailbox(cmd.mailbox, cmd.new_name)
            boxes = []
            for mailbox_id, _, target, uidvalidity in renamed:
                mb = uow.mailbox(mailbox_id)
                mb.rename(target, uidvalidity)
                boxes.append(mb)
            return Change.of(uow.save(acc, *boxes), {
                "uidvalidity": renamed[0][3],
                "renamed": [{"from": old, "to": new, "uidvalidity": uidvalidity}
                            for _, old, new, uidvalidity in renamed]})

        return uow.run(attempt)

    def delete_mailbox(self, account: str, mailbox: str) -> Change:
        """Deletes a mailbox as RFC 3501 DELETE does. Its messages are expunged: those whose
        aggregate says they are in it, of every message the mailbox's own events ever gave
        a UID (decided from the log, not from a read model that may lag). Without inferiors
        its name goes too. With inferiors (``mailbox/...``) the
        name stays as a ``\\Noselect`` mailbox: it holds no messages and takes none, and a
        later delete removes it once the inferiors are gone (refused before:
        ``MailboxHasInferiors``). ``Mailbox.Deleted`` is appended after the expunges, so the
        read models see the mailbox emptied before it goes."""
        cmd = build(DeleteMailbox, account=account, mailbox=mailbox)
        uow = self.uow

        def attempt() -> Change:
            acc = uow.account(cmd.account)
            mailbox_id = acc.check_deletable(cmd.mailbox)
            mb = uow.mailbox(mailbox_id)
            inferiors = acc.inferiors(cmd.mailbox)
            if mb.deleted:  # \Noselect already: only its name is left
                if inferiors:
                    raise MailboxHasInferiors(
                        f"mailbox: {cmd.mailbox!r} is \\Noselect and has inferiors"
                        f" ({', '.join(inferiors[:3])}{', ...' if len(inferiors) > 3 else ''});"
                        " delete them first; nothing was written")
                acc.unregister_mailbox(cmd.mailbox)
                return Change.of(uow.save(acc), {"expunged": 0, "noselect": False})
            now = self.clock()
            msgs = [uow.message(i) for i in uow.allocated_to(mailbox_id)]
            expunged = [m for m in msgs if m.mailbox_id == mailbox_id and m.expunge(now)]
            mb.delete()
            if inferiors:
                return Change.of(uow.save(*expunged, mb),
                              {"expunged": len(expunged), "noselect": True})
            acc.unregister_mailbox(cmd.mailbox)
            return Change.of(uow.save(acc, *expunged, mb),
                          {"expunged": len(expunged), "noselect": False})

        return uow.run(attempt)

    def subscribe(self, account: str, mailbox: str, *, create_account: bool = False) -> Change:
        cmd = build(Subscribe, account=account, mailbox=mailbox)
        uow = self.uow

        def attempt() -> Change:
            acc, fresh = self._account_for(cmd.account, create_account)
            if not acc.subscribe(cmd.mailbox):
                return Change()
            return Change.of(uow.save(acc, *fresh))

        return uow.run(attempt)

    def unsubscribe(self, account: str, mailbox: str) -> Change:
        cmd = build(Subscribe, account=account, mailbox=mailbox)
        uow = self.uow

        def attempt() -> Change:
            acc = uow.account(cmd.account)
            if not acc.unsubscribe(cmd.mailbox):
                return Change()
            return Change.of(uow.save(acc))

        return uow.run(attempt)
