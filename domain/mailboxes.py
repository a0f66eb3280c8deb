"""Mailbox commands: create, rename, delete a mailbox; subscribe and unsubscribe."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from uuid import UUID

from domain.commands import CreateMailbox, DeleteMailbox, RenameMailbox, Subscribe, build
from domain.mailbox import Mailbox
from domain.results import Change
from domain.unit_of_work import Commands
from domain.values import Role


class MailboxCommands(Commands):
    """create_mailbox, rename_mailbox, delete_mailbox, subscribe, unsubscribe."""

    def create_mailbox(self, account: str, mailbox: str, role: str = "") -> Change:
        cmd = build(CreateMailbox, account=account, mailbox=mailbox, role=Role(role))
        uow = self.uow

        def attempt() -> Change:
            acc, fresh = uow.account_or_open(cmd.account)
            mailbox_id, uidvalidity = acc.register_mailbox(cmd.mailbox, cmd.role)
            mb = Mailbox.create(mailbox_id, acc.id, cmd.mailbox, cmd.role.value, uidvalidity)
            positions = uow.save(acc, *fresh, mb)
            return Change(positions, {"mailbox_id": str(mailbox_id), "uidvalidity": uidvalidity})

        return uow.run(attempt)

    def rename_mailbox(self, account: str, mailbox: str, new_name: str) -> Change:
        cmd = build(RenameMailbox, account=account, mailbox=mailbox, new_name=new_name)
        uow = self.uow

        def attempt() -> Change:
            acc = uow.account(cmd.account)
            mailbox_id, uidvalidity = acc.rename_mailbox(cmd.mailbox, cmd.new_name)
            mb = uow.mailbox(mailbox_id)
            mb.rename(cmd.new_name, uidvalidity)
            return Change(uow.save(acc, mb), {"uidvalidity": uidvalidity})

        return uow.run(attempt)

    def delete_mailbox(
        self, account: str, mailbox: str, message_ids: Callable[[UUID], Iterable[UUID]]
    ) -> Change:
        """Deletes a mailbox and expunges every message still in it (``message_ids``)."""
        cmd = build(DeleteMailbox, account=account, mailbox=mailbox)
        uow = self.uow

        def attempt() -> Change:
            acc = uow.account(cmd.account)
            mailbox_id = acc.unregister_mailbox(cmd.mailbox)
            mb = uow.mailbox(mailbox_id)
            mb.delete()
            now = self.clock()
            msgs = [uow.message(i) for i in message_ids(mailbox_id)]
            expunged = [m for m in msgs if m.mailbox_id == mailbox_id and m.expunge(now)]
            return Change(uow.save(acc, mb, *expunged), {"expunged": len(expunged)})

        return uow.run(attempt)

    def subscribe(self, account: str, mailbox: str) -> Change:
        cmd = build(Subscribe, account=account, mailbox=mailbox)
        uow = self.uow

        def attempt() -> Change:
            acc, fresh = uow.account_or_open(cmd.account)
            if not acc.subscribe(cmd.mailbox):
                return Change()
            return Change(uow.save(acc, *fresh))

        return uow.run(attempt)

    def unsubscribe(self, account: str, mailbox: str) -> Change:
        cmd = build(Subscribe, account=account, mailbox=mailbox)
        uow = self.uow

        def attempt() -> Change:
            acc = uow.account(cmd.account)
            if not acc.unsubscribe(cmd.mailbox):
                return Change()
            return Change(uow.save(acc))

        return uow.run(attempt)
