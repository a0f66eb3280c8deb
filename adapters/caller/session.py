"""A caller's session with the store: its memo of what the checks read (dropped when the
log grows), one check at a time per thread, and its names: the root and paths relative to
it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Self

from domain.errors import InvalidCommand, MailboxNotFound
from domain.rights import Caller
from domain.root_names import SHARED, parse_root
from domain.values import DELIMITER, normalise_address

if TYPE_CHECKING:
    from adapters.face import Store

class CallerSession:
    """``store`` as ``caller``: the state every part of ``CallerView`` shares."""

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
