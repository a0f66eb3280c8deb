"""Commands on mailboxes: CREATE, DELETE, RENAME (INBOX's too), SUBSCRIBE, UNSUBSCRIBE and
STATUS (with RFC 9208's DELETED and DELETED-STORAGE)."""

from __future__ import annotations

from typing import Any

from adapters.imap.session.core import SessionCore
from adapters.imap.session.words import STATUS_ITEMS, _listed_name, _mailbox_name, _text
from adapters.imap.wire import BadCommand, No, Token, astring_out
from domain.errors import MailboxNotFound


class MailboxCommands(SessionCore):
    async def cmd_create(self, tag: str, args: list[Token]) -> str:
        path = _mailbox_name(args[0]).rstrip("/") if args else ""
        if not path:
            raise BadCommand("CREATE needs a mailbox name")
        if path == "INBOX":
            raise No("INBOX exists", "ALREADYEXISTS")
        account, name = self.resolve(path)
        await self.call(self._create, account, name)
        return "CREATE completed"

    def _create(self, account: str, name: str) -> None:
        """CREATE makes the missing mailboxes above the new one too (RFC 3501 6.3.3)."""
        parts = name.split("/")
        for i in range(1, len(parts)):
            parent = "/".join(parts[:i])
            try:
                self.face.mailbox_status(account, parent)
            except MailboxNotFound:
                self.face.create_mailbox(account, parent)
        self.face.create_mailbox(account, name)

    async def cmd_delete(self, tag: str, args: list[Token]) -> str:
        path = _mailbox_name(args[0]) if args else ""
        if path == "INBOX":
            raise No("INBOX cannot be deleted", "CANNOT")
        account, name = self.resolve(path)
        if self.selected is not None and (self.selected.account, self.selected.name) == (
                account, name):
            self.selected = None
        await self.call(self.face.delete_mailbox, account, name)
        return "DELETE completed"

    async def cmd_rename(self, tag: str, args: list[Token]) -> str:
        if len(args) != 2:
            raise BadCommand("RENAME takes two mailbox names")
        old, new = _mailbox_name(args[0]), _mailbox_name(args[1]).rstrip("/")
        account, name = self.resolve(old)
        new_account, new_name = self.resolve(new)
        if new_account != account:
            raise No("a mailbox cannot be renamed into another account", "CANNOT")
        if new == "INBOX" or (name == "INBOX" and new_name == "INBOX"):
            raise No("INBOX exists", "ALREADYEXISTS")
        if name == "INBOX":
            moved = await self.call(self._rename_inbox, account, new_name)
            await self.report()
            return f"RENAME completed ({moved} messages moved out of INBOX)"
        await self.call(self.face.rename_mailbox, account, name, new_name)
        return "RENAME completed"

    def _rename_inbox(self, account: str, new_name: str) -> int:
        """RENAME INBOX (RFC 3501 6.3.5): a new mailbox takes INBOX's messages (with their
        flags) and INBOX stays, empty; mailboxes below INBOX stay where they are. A message
        delivered meanwhile stays in INBOX."""
        self.server.catch_up()
        self._create(account, new_name)
        listing = self.face.messages(account, "INBOX", limit=1 << 31)
        for m in sorted(listing, key=lambda m: m.uid):
            self.face.move(m.message_id, new_name)
        return len(listing)

    async def cmd_subscribe(self, tag: str, args: list[Token]) -> str:
        account, name = self.resolve(_mailbox_name(args[0]) if args else "")
        await self.call(self.face.subscribe, account, name)
        return "SUBSCRIBE completed"

    async def cmd_unsubscribe(self, tag: str, args: list[Token]) -> str:
        account, name = self.resolve(_mailbox_name(args[0]) if args else "")
        await self.call(self.face.unsubscribe, account, name)
        return "UNSUBSCRIBE completed"

    async def cmd_status(self, tag: str, args: list[Token]) -> str:
        if len(args) != 2 or not isinstance(args[1], list):
            raise BadCommand("STATUS takes a mailbox and a list of items")
        items = [_text(i).upper() for i in args[1]]
        await self._status_line(_mailbox_name(args[0]), items)
        return "STATUS completed"

    async def _status_line(self, path: str, items: list[str], *, quiet: bool = False) -> None:
        """``* STATUS`` of the mailbox ``path``; ``quiet`` (LIST-STATUS): nothing when the
        user may not read it."""
        if any(i not in STATUS_ITEMS for i in items):
            raise BadCommand(f"unknown STATUS item in {items}")
        account, name = self.resolve(path)
        try:
            status, _ = await self.call(self._open, account, name)
        except No:
            if quiet:
                return
            raise
        recent = 0
        if "RECENT" in items:
            recent = await self.call(self._recent_count, account, name, status)
        deleted = (0, 0)
        if {"DELETED", "DELETED-STORAGE"} & set(items):
            deleted = await self.call(self._deleted, account, name)
        values = {"DELETED": deleted[0], "DELETED-STORAGE": (deleted[1] + 1023) // 1024,
                  "MESSAGES": status["messages"], "RECENT": recent,
                  "UIDNEXT": status["uidnext"], "UIDVALIDITY": status["uidvalidity"],
                  "UNSEEN": status["unseen"], "HIGHESTMODSEQ": max(status["highestmodseq"], 1)}
        shown = " ".join(f"{key} {values[key]}" for key in items)
        await self.untagged(b"STATUS " + astring_out(_listed_name(path))
                            + f" ({shown})".encode())

    def _deleted(self, account: str, name: str) -> tuple[int, int]:
        """How many messages of the mailbox are marked \\Deleted, and their bytes."""
        listing = self.face.messages(account, name, limit=1 << 31)
        marked = [m for m in listing if "\\Deleted" in m.flags]
        return len(marked), sum(m.size for m in marked)

    def _recent_count(self, account: str, name: str, status: dict[str, Any]) -> int:
        start = self.server.recent_first(account, name, status["uidvalidity"])
        if start >= status["uidnext"]:
            return 0
        listing = self.face.messages(account, name, limit=1 << 31)
        return sum(1 for m in listing if m.uid >= start)
