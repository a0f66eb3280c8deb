"""The caller's queries: a mailbox's messages and status, search, threads (what it may read),
the owner's counters, usage, quota, subscriptions and labels, the current read models
only."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Self
from uuid import UUID

from domain.errors import NotFound, PermissionDenied
from domain.rights import COMMAND_RIGHTS, missing, rights_of

if TYPE_CHECKING:
    from projections.queries import MessageSummary

from adapters.caller.checks import CallerChecks


class CallerQueries(CallerChecks):
    """The queries, each checked first or cut to what the caller may read."""

    def messages(self, account: str, mailbox: str = "INBOX", *, limit: int = 50,
                 before_uid: int | None = None) -> list[MessageSummary]:
        self._need("messages", "mailbox", account, mailbox)
        return self._store.messages(account, mailbox, limit=limit, before_uid=before_uid)

    def search(self, account: str, mailbox: str = "INBOX", *, limit: int = 50,
               before_uid: int | None = None, **criteria: Any) -> list[MessageSummary]:
        self._need("search", "mailbox", account, mailbox)
        return self._store.search(account, mailbox, limit=limit, before_uid=before_uid,
                                  **criteria)

    def thread(self, thread_id: UUID) -> list[MessageSummary]:
        """The thread's messages in the mailboxes the caller may read ('r'); others are
        left out, as if they were not there."""
        readable: dict[UUID, bool] = {}
        out = []
        for row in self._store.thread(thread_id):
            if row.mailbox_id not in readable:
                readable[row.mailbox_id] = self._may_read(row.mailbox_id)
            if readable[row.mailbox_id]:
                out.append(row)
        return out

    def _may_read(self, mailbox_id: UUID) -> bool:
        with self._checking():
            return self._may_read_checked(mailbox_id)

    def _may_read_checked(self, mailbox_id: UUID) -> bool:
        try:
            mb = self._store.mailbox_record(mailbox_id)
            address = self._store.address_of(mb.account_id)
        except NotFound:
            return False
        root_account, base = self.root()
        if address == root_account and not self._under(base, mb.name):
            return False
        return not missing(COMMAND_RIGHTS["messages"]["mailbox"],  # a listing's rights
                           rights_of(self.caller, address, mb.acl))

    def quota(self, account: str) -> dict[str, Any]:
        return self._store.quota(self._owner("quota", account))

    def quota_shown(self, account: str) -> dict[str, Any]:
        return self._store.quota_shown(self._owner("quota", account))

    def reading(self, *, view: str | None = None, as_of: int | None = None,
                account: str | None = None) -> Self:
        """The current read models only: past ones (a view, a position) are the
        administrator's."""
        if view is None and as_of is None:
            return self
        raise PermissionDenied(
            f"permission denied: reading {'view ' + view if view else 'as of ' + str(as_of)}"
            f" is the administrator's; {self.user} may not", missing="administrator",
            command="reading")

    def mailbox_status(self, account: str, mailbox: str = "INBOX") -> dict[str, Any]:
        self._need("mailbox_status", "mailbox", account, mailbox)
        return self._store.mailbox_status(account, mailbox)

    def body(self, account: str, mailbox: str, uid: int) -> Iterator[bytes]:
        self._need("body", "mailbox", account, mailbox)
        return self._store.body(account, mailbox, uid)

    def counters(self, account: str) -> dict[str, Any]:
        return self._store.counters(self._owner("counters", account))

    def usage(self, account: str) -> dict[str, Any]:
        return self._store.usage(self._owner("usage", account))

    def subscriptions(self, account: str) -> list[str]:
        return self._store.subscriptions(self._owner("subscriptions", account))

    def label_messages(self, account: str, label: str, *,
                       limit: int = 50) -> list[MessageSummary]:
        return self._store.label_messages(self._owner("label_messages", account), label,
                                          limit=limit)
