"""The store acting as a user: ``Letterlog.as_user(user)`` / ``Letterlog.open(..., user=)``.

A ``CallerView`` offers the store's commands and queries; each first checks, on the command
side's aggregates, that the caller has the rights ``domain.rights.COMMAND_RIGHTS`` names,
then runs the store's own method. A refusal is ``PermissionDenied`` naming the missing
right, raised before anything is written. A mailbox the caller may not look up (no ``l``),
one outside its virtual root, and one that does not exist are refused alike
(``MailboxNotFound``, the same words), and so are messages in them (``MessageNotFound``).
What the table does not name is the administrator's only: the view implements the user's
``adapters.face.Face`` and nothing else (no fallback to the store behind it), so a caller
holding it cannot name an administrator's method without a type error, and at run time
such a name is an ``AttributeError``.

Names: the caller's root is ``account[/path]`` (``set_root``; default: its own account, when
its name is an address). Mailboxes of the root's account are named by the caller at or below
the path (``Letterlog``'s (account, mailbox) arguments, or ``resolve(path)`` from a path
relative to the root); mailboxes of other accounts the caller may look up are
``shared/<account>/<mailbox>`` in its listing (``mailboxes()``).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any, BinaryIO, Self, Unpack
from uuid import UUID

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
    Caller,
    flag_rights,
    kept_on_arrival,
    missing,
    rights_of,
    rights_string,
)
from domain.roots import SHARED, parse_root
from domain.values import (
    DELIMITER,
    FlagMode,
    MessageState,
    apply_flag_mode,
    normalise_address,
    validate_flags,
)

if TYPE_CHECKING:
    from adapters.face import Arrival, Face, Store, Target, UploadStart
    from domain.results import Change, Upload
    from projections.queries import MessageSummary

    _Face = Face  # the face it implements, checked by mypy (not a base at run time: ADR 0077)
else:
    _Face = object

RIGHTS_RULE, OWNER, VISIBLE, PRESENT, SESSION = "rights", "owner", "visible", "present", "session"
FACE_RULES: dict[str, str] = {
    **dict.fromkeys((
        "deliver", "check_delivery", "begin_upload", "append_chunk", "complete_upload",
        "extract", "extract_to", "extract_to_stream", "show", "flag", "label", "set_policy",
        "move", "copy", "delete", "restore", "expunge", "create_mailbox", "rename_mailbox",
        "delete_mailbox", "acl_get", "acl_set", "acl_delete", "messages", "search",
        "mailbox_status", "body"), RIGHTS_RULE),
    **dict.fromkeys(("subscribe", "unsubscribe", "subscriptions", "counters", "usage",
                     "label_messages", "quota", "quota_shown"), OWNER),
    **dict.fromkeys(("mailbox_list", "thread", "my_rights"), VISIBLE),
    "reading": PRESENT,
    **dict.fromkeys(("close", "__enter__", "__exit__"), SESSION),
}
"""The rule of every member of the user's face (``adapters.face.Face``) in this view:
``rights``: the caller's rights on the mailbox, as ``domain.rights.COMMAND_RIGHTS`` names
them (a mailbox it may not look up is refused as missing); ``owner``: account-wide, the
account's owner only; ``visible``: answers only what the caller may look up or read
(nothing of a mailbox it has no right on); ``present``: the current read models only (past
ones are the administrator's); ``session``: the view's own lifetime.
``tests/e2e/test_cli_callers.py`` fails for a member of the face without a rule here."""

_NAME_FIELDS = frozenset({"name", "mailbox_id", "account", "role", "noselect", "subscribed",
                          "rights", "path"})
"""What a listing shows of a mailbox the caller may look up ('l') but not read ('r')."""


class CallerView(_Face):
    """``store`` as ``caller``: the user's face of the store, each call checked first."""

    def __init__(self, store: Store, caller: Caller) -> None:
        self._store = store
        self.caller = caller
        self._seen: dict[Any, Any] = {}  # what the checks read, while the log ends at
        self._seen_at = -1  # this position (nobody has appended since: still current)
        self._check = threading.local()  # per thread: the head of the check under way

    def _current(self) -> dict[Any, Any]:
        """The checks' memo of roots and mailboxes, dropped whenever the log has grown (one
        cheap query for its head, as the command side's own cache does; inside a check,
        the head it read)."""
        head = getattr(self._check, "head", None)
        if head is None:
            head = self._store.max_position()
        if head != self._seen_at:
            self._seen, self._seen_at = {}, head
        return self._seen

    @contextmanager
    def _checking(self) -> Iterator[None]:
        """One check: what it reads of the command side (the root, mailboxes, messages,
        their accounts) is read after one query of the log's head, through the command
        side's cache of current aggregates (``Store.current_reads``)."""
        if getattr(self._check, "head", None) is not None:  # inside one already
            yield
            return
        with self._store.current_reads() as head:
            self._check.head = head
            try:
                yield
            finally:
                self._check.head = None

    @property
    def user(self) -> str:
        return self.caller.user or ""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self._store.close()

    def close(self) -> None:
        self._store.close()

    # -- names: the root, and paths relative to it -------------------------------------------
    def root(self) -> tuple[str, str]:
        """(account, path) of the caller's root; path "" is the whole account."""
        with self._checking():
            seen = self._current()
            if "root" not in seen:
                seen["root"] = self._root()
            root: tuple[str, str] = seen["root"]
            return root

    def _root(self) -> tuple[str, str]:
        found = self._store.root(self.user)
        if found:
            return parse_root(found)
        try:
            return normalise_address(self.user), ""
        except InvalidCommand:
            return "", ""  # a user who is no address and has no root: shared mailboxes only

    def resolve(self, path: str) -> tuple[str, str]:
        """A path as the caller names it -> (account, mailbox): relative to its root
        (``/`` is the root mailbox itself), or ``shared/<account>/<mailbox>``. Nothing above
        the root can be named (``..`` is no name)."""
        parts = path.strip(DELIMITER).split(DELIMITER)
        if parts[0] == SHARED and len(parts) >= 3:
            return parts[1], DELIMITER.join(parts[2:])
        account, base = self.root()
        if path.strip(DELIMITER) == "" and base:
            return account, base
        if not account or any(p in ("", ".", "..") for p in parts):
            raise MailboxNotFound(f"mailbox: {path!r} does not exist")
        relative = DELIMITER.join(parts)
        return account, f"{base}{DELIMITER}{relative}" if base else relative

    def path_of(self, account: str, mailbox: str) -> str:
        """The name the caller lists ``mailbox`` of ``account`` by (``resolve``'s inverse)."""
        root_account, base = self.root()
        if account == root_account and self._under(base, mailbox):
            if not base:
                return mailbox
            return DELIMITER if mailbox == base else mailbox[len(base) + 1:]
        return f"{SHARED}{DELIMITER}{account}{DELIMITER}{mailbox}"

    @staticmethod
    def _under(base: str, mailbox: str) -> bool:
        return not base or mailbox == base or mailbox.startswith(base + DELIMITER)

    # -- the checks -------------------------------------------------------------------------
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

    # -- commands ---------------------------------------------------------------------------
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

    def deliver(self, **fields: Unpack[Arrival]) -> Delivery:
        checked, rights = self._arrival("deliver", fields)
        return self._answer(self._store.deliver(**checked), rights)

    def check_delivery(self, **fields: Unpack[Target]) -> None:
        checked, _ = self._arrival("deliver", fields)
        self._store.check_delivery(**checked)

    def begin_upload(self, **fields: Unpack[UploadStart]) -> Upload:
        checked, _ = self._arrival("begin_upload", fields)
        return self._store.begin_upload(**checked)

    def append_chunk(self, message_id: UUID, index: int, data: bytes) -> Change:
        self._message("append_chunk", message_id)
        return self._store.append_chunk(message_id, index, data)

    def complete_upload(self, message_id: UUID) -> Delivery:
        self._message("complete_upload", message_id)
        return self._store.complete_upload(message_id)

    def extract(self, message_id: UUID) -> bytes:
        self._message("extract", message_id)
        return self._store.extract(message_id)

    def extract_to(self, message_id: UUID, path: str | os.PathLike[str], *,
                   force: bool = False) -> dict[str, Any]:
        self._message("extract", message_id)
        return self._store.extract_to(message_id, path, force=force)

    def extract_to_stream(self, message_id: UUID, out: BinaryIO) -> dict[str, Any]:
        self._message("extract", message_id)
        return self._store.extract_to_stream(message_id, out)

    def show(self, message_id: UUID) -> dict[str, Any]:
        self._message("show", message_id)
        return self._store.show(message_id)

    def flag(self, message_id: UUID, flags: Iterable[str], mode: str = "add") -> Change:
        flags = list(flags)
        try:
            current = self._store.message_record(message_id).flags
            wanted = validate_flags(flags)
            changed = apply_flag_mode(current, wanted, FlagMode(mode)) ^ frozenset(current)
        except (NotFound, InvalidCommand, ValueError):
            changed = frozenset(flags)
        self._message("flag", message_id, needed=flag_rights(changed) or "w")
        return self._store.flag(message_id, flags, mode)

    def label(self, message_id: UUID, add: Iterable[str] = (),
              remove: Iterable[str] = ()) -> Change:
        self._message("label", message_id)
        return self._store.label(message_id, add, remove)

    def set_policy(self, message_id: UUID, extract_limit: int | None = None,
                   extract_until: datetime | None = None) -> Change:
        self._message("set_policy", message_id)
        return self._store.set_policy(message_id, extract_limit, extract_until)

    def move(self, message_id: UUID, mailbox: str) -> Change:
        address, _ = self._message("move", message_id, "source")
        self._need("move", "target", address, mailbox)
        return self._store.move(message_id, mailbox)

    def copy(self, message_id: UUID, mailbox: str) -> Delivery:
        address, _ = self._message("copy", message_id, "source")
        _, target = self._need("copy", "target", address, mailbox)
        rights = rights_string(rights_of(self.caller, address, target.acl))
        return self._store.copy(message_id, mailbox, target_rights=rights)

    def delete(self, message_id: UUID) -> Change:
        self._message("delete", message_id)
        return self._store.delete(message_id)

    def restore(self, message_id: UUID) -> Change:
        self._message("restore", message_id)
        return self._store.restore(message_id)

    def expunge(self, message_ids: Iterable[UUID]) -> Change:
        ids = list(message_ids)
        for message_id in ids:
            self._message("expunge", message_id)
            m = self._store.message_record(message_id)
            if m.state != MessageState.DELETED.value and "\\Deleted" not in m.flags:
                raise InvalidCommand(
                    f"message {message_id} is not marked \\Deleted: an expunge removes only "
                    "messages marked \\Deleted or deleted (RFC 3501 EXPUNGE, RFC 4314 'e'); "
                    "nothing was expunged")
        return self._store.expunge(ids)

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

    # -- ACLs (RFC 4314: GETACL and SETACL need 'a'; MYRIGHTS any right) -------------------
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

    # -- queries ----------------------------------------------------------------------------
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


if TYPE_CHECKING:
    _IMPLEMENTS: type[Face] = CallerView  # mypy: every member of the face, none abstract
