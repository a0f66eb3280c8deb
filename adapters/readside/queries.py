"""The queries of the read models, shared by the embedded store and the fast read path.

``ReadModelQueries`` answers every listing query (list, search, labels, threads, counters,
status, subscriptions, disk usage) from the tables ``_read()`` returns: anything with
``tables``, ``physical(logical)``, ``catalog`` (``refresh()``) and ``position()``. It needs
no log and no event class: ``adapters.embedded.Letterlog`` reads its caught-up
``ProjectionHost``; ``adapters.startup.current.CurrentTables`` the tables as they are when
they are current with the log (ADR 0024).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar
from uuid import UUID

from domain.errors import AccountNotFound, MailboxNotFound
from domain.values import account_id_for, normalise_address, validate_label, validate_mailbox_name
from projections import names as n
from projections import queries as q
from projections.codec import listed_usage
from projections.keys import account_row
from projections.tablestore import TableNotFound

T = TypeVar("T")


class ReadModelQueries:
    """Queries over the read models of ``_read()``."""

    def _read(self) -> Any:
        raise NotImplementedError

    def _query(self, fn: Callable[[], T]) -> T:
        """Runs a read; if a rebuild switched tables under it, follows the catalog once."""
        try:
            return fn()
        except TableNotFound:
            self._read().catalog.refresh()
            return fn()

    def _account_id(self, account: str) -> UUID:
        """The id of an account the log has opened; AccountNotFound for any other."""
        host = self._read()
        acc = account_id_for(normalise_address(account))
        if self._query(lambda: q.account_address(host.tables, acc, host.physical)) is None:
            raise AccountNotFound(f"account: {account!r} does not exist")
        return acc

    def _mailbox_id(self, account: str, mailbox: str) -> UUID:
        host = self._read()
        acc = self._account_id(account)
        name = validate_mailbox_name(mailbox)
        mailbox_id = self._query(lambda: q.mailbox_id_named(host.tables, acc, name,
                                                            host.physical))
        if mailbox_id is None:
            raise MailboxNotFound(f"mailbox: {mailbox!r} does not exist for {account}")
        return mailbox_id

    def messages(self, account: str, mailbox: str = "INBOX", *, limit: int = 50,
                 before_uid: int | None = None) -> list[q.MessageSummary]:
        """A mailbox's messages, newest first; page with ``before_uid``."""
        host = self._read()
        return self._query(lambda: q.mailbox_messages(
            host.tables, self._mailbox_id(account, mailbox), limit=limit,
            before_uid=before_uid, physical=host.physical))

    def label_messages(self, account: str, label: str, *,
                       limit: int = 50) -> list[q.MessageSummary]:
        host = self._read()
        acc = self._account_id(account)
        return self._query(lambda: q.label_messages(
            host.tables, acc, validate_label(label), limit=limit, physical=host.physical))

    def thread(self, thread_id: UUID) -> list[q.MessageSummary]:
        host = self._read()
        return self._query(lambda: q.thread_messages(host.tables, thread_id,
                                                     physical=host.physical))

    def counters(self, account: str) -> dict[str, Any]:
        host = self._read()
        acc = self._account_id(account)
        boxes, labels = self._query(lambda: q.counters(host.tables, acc, host.physical))
        names = {v: k for k, v in self._query(
            lambda: q.mailbox_names(host.tables, acc, host.physical)).items()}
        return {
            "mailboxes": {names.get(k, str(k)): vars(v) for k, v in boxes.items()},
            "labels": {k: vars(v) for k, v in labels.items()},
        }

    def mailbox_status(self, account: str, mailbox: str = "INBOX") -> dict[str, Any]:
        host = self._read()
        status = self._query(lambda: q.mailbox_status(
            host.tables, self._mailbox_id(account, mailbox), host.physical))
        if status is None:
            raise MailboxNotFound(f"mailbox: {mailbox!r} has no status yet")
        return {**status, "position": host.position()}

    def subscriptions(self, account: str) -> list[str]:
        host = self._read()
        acc = self._account_id(account)
        return self._query(lambda: q.subscriptions(host.tables, acc, host.physical))

    def search(self, account: str, mailbox: str = "INBOX", *, limit: int = 50,
               before_uid: int | None = None, **criteria: Any) -> list[q.MessageSummary]:
        """IMAP SEARCH over a mailbox's read model, newest first, paged like ``messages``.
        ``criteria``: sender, subject, flags, unflags, labels, since, before, larger,
        smaller (see ``projections.search.SearchCriteria``)."""
        from projections.search import SearchCriteria, search_mailbox  # local: not for list

        given: dict[str, Any] = {k: frozenset(v) if k in ("flags", "unflags", "labels") else v
                                 for k, v in criteria.items()}
        keys = SearchCriteria(**given)
        host = self._read()
        return self._query(lambda: search_mailbox(
            host.tables, self._mailbox_id(account, mailbox), keys, limit=limit,
            before_uid=before_uid, physical=host.physical))

    def listed_mail(self) -> dict[str, int]:
        """Every account's listed messages and their bytes (``letterlog du`` without an
        account sets them beside the data directory's size)."""
        host = self._read()
        counts = self._query(lambda: q.listed_mail(host.tables, host.physical))
        return {"messages": counts.messages, "bytes": counts.bytes}

    #: the default quota where an account has none of its own: bytes, messages (0: none).
    #: The fast read path runs only where no LETTERLOG_QUOTA_* setting is given: none.
    quota_defaults: tuple[int, int] = (0, 0)

    def quota_shown(self, account: str) -> dict[str, Any]:
        """The account's limits (its own from ``accounts``, else ``quota_defaults``) beside
        its usage as ``counters`` counts it (listed messages and their bytes), as the read
        models show them; the command side decides a delivery from the log
        (``domain.quota``)."""
        host = self._read()
        acc = self._account_id(account)
        mine = self._query(lambda: host.tables.get(host.physical(n.ACCOUNTS), acc.bytes,
                                                   [n.ACC_QUOTA])).get(n.ACC_QUOTA)
        own = [int(v) for v in mine.split(b",")] if mine else [-1, -1]  # -1: the default
        row = self._query(lambda: host.tables.get(host.physical(n.COUNTERS),
                                                  account_row(acc), [n.CT_COUNTS]))
        messages, size = listed_usage(row)
        used = {"bytes": size, "messages": messages}
        shown: dict[str, Any] = {"account": normalise_address(account)}
        for i, kind in enumerate(("bytes", "messages")):
            limit = self.quota_defaults[i] if own[i] == -1 else own[i]
            shown[kind] = {"limit": limit, "own": own[i], "used": used[kind]}
        return shown

    def usage(self, account: str) -> dict[str, Any]:
        """Per mailbox: messages, soft-deleted ones, bytes delivered and bytes stored (each
        distinct payload once); and the account's total (each payload once overall)."""
        from projections.usage import mailbox_usage  # local: not for list (the fast reads)

        host = self._read()
        acc = self._account_id(account)
        names = self._query(lambda: q.mailbox_names(host.tables, acc, host.physical))
        boxes = {name: self._query(lambda i=mailbox_id: mailbox_usage(  # type: ignore[misc]
            host.tables, i, host.physical)) for name, mailbox_id in sorted(names.items())}
        payloads: dict[str, int] = {}
        for u in boxes.values():
            payloads.update(u.payloads)
        row = {name: {"messages": u.messages, "deleted": u.deleted, "delivered": u.delivered,
                      "stored": u.stored} for name, u in boxes.items()}
        total = {k: sum(r[k] for r in row.values()) for k in ("messages", "deleted",
                                                              "delivered")}
        total["stored"] = sum(u.inline for u in boxes.values()) + sum(payloads.values())
        return {"account": normalise_address(account), "mailboxes": row, "total": total}
