"""The mailboxes a caller may look up: its root's (relative paths), then other accounts'
(``shared/<account>/<mailbox>``), each row cut to what its rights show."""

from __future__ import annotations

import contextlib
from typing import Any
from uuid import UUID

from adapters.caller.checks import CallerChecks
from domain.errors import NotFound
from domain.rights import rights_of, rights_string
from domain.values import normalise_address

_NAME_FIELDS = frozenset({"name", "mailbox_id", "account", "role", "noselect", "subscribed",
                          "rights", "path"})
"""What a listing shows of a mailbox the caller may look up ('l') but not read ('r')."""


class CallerListing(CallerChecks):
    """The caller's listing of mailboxes."""

    def mailbox_list(self, account: str | None = None) -> list[dict[str, Any]]:
        """The mailboxes the caller may look up (``l``) of ``account``, or (None) every one
        it may use: those at or below its root and the shared ones. Each with ``path``
        (its name for the caller, relative to the root) and ``rights``."""
        return [row for row in self.mailboxes()
                if account is None or row["account"] == normalise_address(account)]

    def _listed(self, row: dict[str, Any], rights: frozenset[str]) -> dict[str, Any]:
        """A listing's row as the caller may see it: a mailbox's state (UIDNEXT,
        UIDVALIDITY, counts) is STATUS, which needs 'r' (RFC 4314 section 4); 'l' alone shows
        the name. Subscriptions are the owner's: another user sees none."""
        if self.user != row["account"]:
            row["subscribed"] = False
        if "r" not in rights:
            for key in [k for k in row if k not in _NAME_FIELDS]:
                del row[key]
        return row

    def mailboxes(self) -> list[dict[str, Any]]:
        """Every mailbox the caller may look up: its root's (relative paths), then the
        other accounts' (``shared/<account>/<mailbox>``), from the ``visible_mailboxes``
        index (one scan per identifier naming the caller)."""
        with self._checking():
            return self._mailboxes_checked()

    def _mailboxes_checked(self) -> list[dict[str, Any]]:
        store = self._store
        root_account, base = self.root()
        out: list[dict[str, Any]] = []
        if root_account:
            try:
                rows = store.mailbox_list(root_account)
            except NotFound:
                rows = []
            for row in rows:
                if not self._under(base, row["name"]):
                    continue
                mb = store.mailbox_record(UUID(row["mailbox_id"]))
                rights = rights_of(self.caller, root_account, mb.acl)
                if "l" in rights:
                    out.append(self._listed({**row, "account": root_account,
                                             "rights": rights_string(rights),
                                             "path": self.path_of(root_account,
                                                                  row["name"])}, rights))
        found = store.visible_mailbox_ids(self.caller.identifiers())
        own = self._own_address()
        if own and own != root_account:  # a root elsewhere: its own account is shared/
            with contextlib.suppress(NotFound):
                found += [UUID(r["mailbox_id"]) for r in store.mailbox_list(own)]
        shared: list[dict[str, Any]] = []
        for mailbox_id in dict.fromkeys(found):
            try:
                mb = store.mailbox_record(mailbox_id)
                address = store.address_of(mb.account_id)
            except NotFound:
                continue
            if address == root_account or mb.deleted:
                continue
            rights = rights_of(self.caller, address, mb.acl)
            if "l" in rights:
                shared.append(self._listed(
                    {"name": mb.name, "mailbox_id": str(mailbox_id), "account": address,
                     "role": mb.role, "uidvalidity": mb.uidvalidity, "uidnext": mb.uidnext,
                     "noselect": mb.deleted, "subscribed": False,
                     "rights": rights_string(rights), "path": self.path_of(address, mb.name)},
                    rights))
        return out + sorted(shared, key=lambda r: str(r["path"]))
