"""Access: the store acting as a user (``as_user``), ACL entries and virtual roots, as the
administrator sets them (docs/permissions.md).

A part of the ``Letterlog`` facade (``adapters.embedded``; ``parts.FacadePart``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, cast

from adapters.facade.parts import FacadePart
from domain.access import check_rights_string
from domain.identity import canonical_name
from domain.rights import RIGHTS, Caller, validate_identifier
from domain.root_names import validate_user
from domain.service import Change
from projections.access_queries import acl_entries, roots, visible_mailboxes

if TYPE_CHECKING:
    from uuid import UUID

    from adapters.caller import CallerView
    from adapters.face import Store
    from domain.mailbox import Mailbox
    from domain.message import Message


class Access(FacadePart):
    """Rights on mailboxes (RFC 4314) and users' virtual roots."""

    group_resolver: Callable[[str], frozenset[str]] | None = None  # bootstrap: the directory
    # bootstrap: refuses an identifier that names nobody in the directory (UnknownIdentifier)
    identifier_check: Callable[[str], None] | None = None

    def as_user(self, user: str, groups: Iterable[str] | None = None) -> CallerView:
        """This store acting as ``user``: every command and query checks its rights first
        (``PermissionDenied``). ``groups``: the user's groups, else asked of the group
        resolver (the user directory) when there is one, else none."""
        from adapters.caller import CallerView  # local: the caller view (9 modules): --as only

        name = validate_user(user)
        if groups is None:
            groups = self.group_resolver(name) if self.group_resolver is not None else ()
        return CallerView(cast("Store", self), Caller(name, frozenset(canonical_name(g, "group")
                                                       for g in groups)))

    def acl_get(self, account: str, mailbox: str) -> dict[str, str]:
        """The mailbox's ACL: identifier -> rights (RFC 4314 order)."""
        return self.mail.acl(account, mailbox)

    def acl_set(self, account: str, mailbox: str, identifier: str, rights: str) -> Change:
        """Sets (``lrs``), adds to (``+w``) or takes from (``-w``) the rights of
        ``identifier`` on the mailbox (an event carrying the old and new rights). The
        identifier as the identity rule has it (``NameRefused``); with a user directory,
        one that names no user or group of it is ``UnknownIdentifier``."""
        check_rights_string(rights)
        identifier = validate_identifier(identifier)
        if self.identifier_check is not None:
            self.identifier_check(identifier)
        return self._command(self.mail.acl_set, account, mailbox, identifier, rights)

    def acl_delete(self, account: str, mailbox: str, identifier: str) -> Change:
        """Removes the entry of ``identifier`` (the event keeps its rights)."""
        return self._command(self.mail.acl_delete, account, mailbox, identifier)

    def my_rights(self, account: str, mailbox: str) -> str:
        """The administrator's rights on an existing mailbox: all of them (RFC 4314)."""
        self.mail.mailbox_of(account, mailbox)  # MailboxNotFound / AccountNotFound
        return RIGHTS

    # -- lookups: the command side's aggregates, read only (``face.Lookups``) ----------------
    @contextmanager
    def current_reads(self) -> Iterator[int]:
        """The lookups inside it read the current aggregates after one query of the log's
        head (given), through the command side's cache."""
        with self.mail.uow.current.reading() as head:
            yield head

    # each through the current-aggregate cache (``UnitOfWork.read``): a caller's check reads
    # what the command after it will, without reading the log again
    def message_record(self, message_id: UUID) -> Message:
        return self.mail.uow.read(lambda: self.mail.message(message_id))

    def mailbox_record(self, mailbox_id: UUID) -> Mailbox:
        return self.mail.uow.read(lambda: self.mail.mailbox(mailbox_id))

    def mailbox_named(self, account: str, mailbox: str) -> Mailbox:
        return self.mail.uow.read(lambda: self.mail.mailbox_of(account, mailbox))

    def address_of(self, account_id: UUID) -> str:
        return self.mail.uow.read(lambda: self.mail.uow.account_by_id(account_id).address)

    def visible_mailbox_ids(self, identifiers: Iterable[str]) -> list[UUID]:
        """Mailboxes whose ACL names one of ``identifiers`` (the ``acl`` read model)."""
        host = self._read()
        names = list(identifiers)
        return list(self._query(lambda: visible_mailboxes(host.tables, names,
                                                          host.physical)))

    def acl_entries(self) -> list[tuple[str, str, str, str]]:
        """Every ACL entry of the store: (account, mailbox name, identifier, rights), from
        the ``acl`` read model (names as they are now)."""
        host = self._read()
        out = []
        for mailbox_id, identifier, rights in self._query(
                lambda: acl_entries(host.tables, host.physical)):
            mb = self.mail.mailbox(mailbox_id)
            address = self.mail.uow.account_by_id(mb.account_id).address
            out.append((address, mb.name, identifier, rights))
        return sorted(out)

    def root(self, user: str) -> str | None:
        """``user``'s virtual root (``account[/path]``), or None."""
        return self.mail.uow.read(lambda: self.mail.root(user))

    def roots(self) -> dict[str, str]:
        """Every virtual root: user -> ``account[/path]`` (the ``roots`` read model)."""
        host = self._read()
        return dict(sorted(self._query(lambda: roots(host.tables, host.physical)).items()))

    def set_root(self, user: str, root: str) -> Change:
        """Sets ``user``'s virtual root to ``account[/path]`` (an event keeping the old)."""
        return self._command(self.mail.set_root, user, root)

    def delete_root(self, user: str) -> Change:
        """Removes ``user``'s virtual root (the event keeps it); ``NotFound`` if none."""
        return self._command(self.mail.delete_root, user)
