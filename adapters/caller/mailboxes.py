"""The caller's mailbox commands: create, rename, delete, subscriptions (the owner's) and
ACLs (RFC 4314: GETACL and SETACL need 'a'; MYRIGHTS any right)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from domain.errors import PermissionDenied
from domain.rights import rights_string

if TYPE_CHECKING:
    from domain.results import Change

from adapters.caller.checks import CallerChecks


class CallerMailboxes(CallerChecks):
    """What the caller does to mailboxes and their ACLs, rights checked first."""

    def create_mailbox(self, account: str, mailbox: str, role: str = "", *,
                       create_account: bool = False) -> Change:
        if create_account:
            raise PermissionDenied(f"permission denied: creating an account is the "
                                   f"administrator's; {self.user} may not",
                                   missing="administrator", command="create_mailbox")
        self._parent("create_mailbox", account, mailbox)
        return self._store.create_mailbox(account, mailbox, role)

    def rename_mailbox(self, account: str, mailbox: str, new_name: str) -> Change:
        self._need("rename_mailbox", "mailbox", account, mailbox)
        self._parent("rename_mailbox", account, new_name)
        return self._store.rename_mailbox(account, mailbox, new_name)

    def delete_mailbox(self, account: str, mailbox: str) -> Change:
        self._need("delete_mailbox", "mailbox", account, mailbox)
        return self._store.delete_mailbox(account, mailbox)

    def subscribe(self, account: str, mailbox: str, *, create_account: bool = False
                  ) -> Change:
        """The account's subscriptions are its owner's list: the owner's only."""
        if create_account:
            raise PermissionDenied(f"permission denied: creating an account is the "
                                   f"administrator's; {self.user} may not",
                                   missing="administrator", command="subscribe")
        return self._store.subscribe(self._owner("subscribe", account), mailbox)

    def unsubscribe(self, account: str, mailbox: str) -> Change:
        return self._store.unsubscribe(self._owner("unsubscribe", account), mailbox)

    def acl_get(self, account: str, mailbox: str) -> dict[str, str]:
        self._need("acl_get", "mailbox", account, mailbox)
        return self._store.acl_get(account, mailbox)

    def acl_set(self, account: str, mailbox: str, identifier: str, rights: str) -> Change:
        self._need("acl_set", "mailbox", account, mailbox)
        return self._store.acl_set(account, mailbox, identifier, rights)

    def acl_delete(self, account: str, mailbox: str, identifier: str) -> Change:
        self._need("acl_delete", "mailbox", account, mailbox)
        return self._store.acl_delete(account, mailbox, identifier)

    def my_rights(self, account: str, mailbox: str) -> str:
        """The caller's rights on the mailbox (RFC 4314 MYRIGHTS); none at all is not
        found."""
        address, mb, rights = self._mailbox(account, mailbox)
        if not rights:
            raise self._hidden(account, mailbox)
        return rights_string(rights)
