"""Access commands: ACL entries on mailboxes (RFC 4314) and users' virtual roots.

Each is an event: ``Mailbox.AclChanged`` (old and new rights) and ``VirtualRoot.Set`` /
``Deleted`` (old and new root), so every change is in the log and can be set back.
"""

from __future__ import annotations

from uuid import UUID

from domain.errors import InvalidCommand, NotFound
from domain.mailbox import Mailbox
from domain.results import Change
from domain.rights import apply_change, validate_identifier
from domain.root_names import parse_root, root_id_for, validate_user
from domain.roots import VirtualRoot
from domain.unit_of_work import Commands
from domain.values import validate_mailbox_name


class RootNotFound(NotFound):
    """A user with no virtual root."""


class AccessCommands(Commands):
    """acl_set, acl_delete, set_root, delete_root; and the command side's reads of them."""

    def mailbox_of(self, account: str, mailbox: str) -> Mailbox:
        """The mailbox ``mailbox`` of ``account`` (``AccountNotFound``, ``MailboxNotFound``)."""
        acc = self.uow.account(account)
        mailbox_id, _, _ = acc.mailbox(validate_mailbox_name(mailbox))
        return self.uow.mailbox(mailbox_id)

    def acl_set(self, account: str, mailbox: str, identifier: str, rights: str) -> Change:
        """Sets the rights of ``identifier`` on the mailbox (``+lr`` adds, ``-w`` removes,
        anything else replaces; an empty result removes the entry)."""
        ident = validate_identifier(identifier)
        uow = self.uow

        def attempt() -> Change:
            mb = self.mailbox_of(account, mailbox)
            old = mb.acl.get(ident, "")
            new = apply_change(old, rights)
            if not mb.set_rights(ident, new):
                return Change((), {"identifier": ident, "rights": new})
            return Change.of(uow.save(mb), {"identifier": ident, "rights": new,
                                         "old_rights": old})

        return uow.run(attempt)

    def acl_delete(self, account: str, mailbox: str, identifier: str) -> Change:
        """Removes the entry of ``identifier`` (its old rights in the event and in
        ``extra``); an identifier without an entry changes nothing."""
        ident = validate_identifier(identifier)
        uow = self.uow

        def attempt() -> Change:
            mb = self.mailbox_of(account, mailbox)
            old = mb.acl.get(ident, "")
            if not mb.set_rights(ident, ""):
                return Change((), {"identifier": ident, "old_rights": ""})
            return Change.of(uow.save(mb), {"identifier": ident, "old_rights": old})

        return uow.run(attempt)

    def acl(self, account: str, mailbox: str) -> dict[str, str]:
        """The mailbox's ACL (identifier -> rights), from its aggregate."""
        return dict(self.mailbox_of(account, mailbox).acl)

    def root(self, user: str) -> str | None:
        """The user's root (``account[/path]``), or None."""
        found = self._root(validate_user(user))
        return found.root if found is not None and found.root else None

    def _root(self, user: str) -> VirtualRoot | None:
        try:
            return self.uow.get(VirtualRoot, root_id_for(user), KeyError, "root")
        except KeyError:
            return None

    def set_root(self, user: str, root: str) -> Change:
        """Sets ``user``'s virtual root to ``account[/path]``; the account must exist, and
        the mailbox ``path`` too when one is given."""
        account, path = parse_root(root)
        user = validate_user(user)
        uow = self.uow

        def attempt() -> Change:
            acc = uow.account(account)
            if path:
                acc.mailbox(validate_mailbox_name(path))
            found = self._root(user)
            fresh = found is None
            agg = VirtualRoot.create(user) if found is None else found
            old = agg.root
            if not agg.set(root):
                return Change((), {"user": agg.user, "root": agg.root})
            return Change.of(uow.save(agg), {"user": agg.user, "root": agg.root,
                                          "old_root": old, "created": fresh})

        return uow.run(attempt)

    def delete_root(self, user: str) -> Change:
        """Removes ``user``'s root (the event keeps it); ``RootNotFound`` if it has none."""
        user = validate_user(user)
        uow = self.uow

        def attempt() -> Change:
            found = self._root(user)
            if found is None or not found.root:
                raise RootNotFound(f"user: {user!r} has no virtual root")
            old = found.root
            found.delete()
            return Change.of(uow.save(found), {"user": found.user, "old_root": old})

        return uow.run(attempt)

    def mailbox_by_id(self, mailbox_id: UUID) -> Mailbox:
        return self.uow.mailbox(mailbox_id)


def check_rights_string(rights: str) -> str:
    """``rights`` for ``acl set``: refused before anything is read when malformed."""
    if rights in ("+", "-"):
        raise InvalidCommand(f"rights: nothing after {rights!r}")
    apply_change("", rights)
    return rights
