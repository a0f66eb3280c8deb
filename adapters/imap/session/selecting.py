"""SELECT and EXAMINE (with CONDSTORE and QRESYNC, RFC 7162), CLOSE and UNSELECT: the
selected mailbox, read into ``Selected`` when the log has moved."""

from __future__ import annotations

import time

from adapters.imap.mailbox import Selected, entry
from adapters.imap.session.core import SessionCore
from adapters.imap.session.words import _compact, _mailbox_name, _text
from adapters.imap.wire import Atom, BadCommand, Token, sequence_set


class SelectCommands(SessionCore):
    async def cmd_select(self, tag: str, args: list[Token], readonly: bool = False) -> str:
        if self.selected is not None:
            self.selected = None
            await self.untagged("OK [CLOSED] previous mailbox closed")
        params = args[1] if len(args) > 1 and isinstance(args[1], list) else []
        if any(isinstance(p, Atom) and p.upper() == "CONDSTORE" for p in params):
            self.condstore = True
        resync = _qresync_parameters(params)
        if resync is not None and not self.qresync:
            raise BadCommand("QRESYNC needs ENABLE QRESYNC first")
        path = _mailbox_name(args[0]) if args else ""
        if not path:
            raise BadCommand("SELECT needs a mailbox")
        account, name = self.resolve(path)
        status, rights = await self.call(self._open, account, name)
        writable = not readonly and bool(set(rights) & set("swtedi"))
        sel = Selected(account, name, path, not writable, status["uidvalidity"],
                       rights=rights)
        await self.call(self._sync, sel)
        sel.recent = self.server.claim_recent(sel, sel.uids, claim=writable)
        sel.new_keywords()
        self.selected = sel
        self.parsed.clear()
        self.contexts.clear()
        await self.untagged(f"FLAGS ({self._flag_names(sel)})")
        await self.untagged(f"{sel.exists()} EXISTS")
        await self.untagged(f"{len(sel.recent)} RECENT")
        unseen = next((i + 1 for i, uid in enumerate(sel.uids)
                       if "\\Seen" not in sel.entries[uid].flags), 0)
        if unseen:
            await self.untagged(f"OK [UNSEEN {unseen}] first unseen")
        permanent = self._permanent(sel, sel.keywords)
        await self.untagged(f"OK [PERMANENTFLAGS ({permanent})] flags the user may keep")
        await self.untagged(f"OK [UIDVALIDITY {sel.uidvalidity}] UIDs valid")
        await self.untagged(f"OK [UIDNEXT {sel.uidnext}] predicted next UID")
        await self.untagged(f"OK [HIGHESTMODSEQ {max(sel.highestmodseq, 1)}] highest")
        if resync is not None and resync[0] == sel.uidvalidity:
            await self._resync(sel, resync[1], resync[2])
        return f"[{'READ-ONLY' if sel.readonly else 'READ-WRITE'}] selected"

    async def _resync(self, sel: Selected, modseq: int, known: str | None) -> None:
        """QRESYNC (RFC 7162 3.2.5): what the client knew that is gone, as VANISHED
        (EARLIER): every UID of its known set (or below UIDNEXT) the mailbox no longer
        holds, which may include UIDs it never saw; then the messages changed since
        ``modseq``, with their flags."""
        top = max(sel.uidnext - 1, 1)
        ranges = sequence_set(known, top) if known else [(1, top)]
        present = set(sel.uids)
        gone = [u for low, high in ranges for u in range(low, min(high, top) + 1)
                if u not in present]
        if gone:
            await self.untagged(f"VANISHED (EARLIER) {_compact(sorted(set(gone)))}")
        for seq, uid in enumerate(sel.uids, start=1):
            e = sel.entries[uid]
            if e.modseq > modseq:
                await self.untagged(self._flags_line(sel, seq, e, uid=True))

    async def cmd_examine(self, tag: str, args: list[Token]) -> str:
        return await self.cmd_select(tag, args, readonly=True)

    def _sync(self, sel: Selected) -> None:
        """Reads the mailbox's listing into ``sel`` when the log has moved since."""
        head = self.server.catch_up()
        if head == sel.head and not self.server.settling(sel.read_at):
            return
        sel.read_at = time.monotonic()
        listing = self.face.messages(sel.account, sel.name, limit=1 << 31)
        listing.reverse()
        if sel.head < 0:
            sel.uids = [m.uid for m in listing]
            sel.entries = {m.uid: entry(m) for m in listing}
        else:
            sel.pending = sel.update(listing)
        status = self.face.mailbox_status(sel.account, sel.name)
        sel.uidnext, sel.highestmodseq = status["uidnext"], status["highestmodseq"]
        sel.head = head

    async def cmd_close(self, tag: str, args: list[Token]) -> str:
        sel = self.selected
        assert sel is not None
        if not sel.readonly and "e" in sel.rights:
            ids = [e.message_id for e in sel.entries.values() if "\\Deleted" in e.flags]
            if ids:
                await self.call(self.face.expunge, ids)
        self.selected = None
        self.contexts.clear()
        return "CLOSE completed"

    async def cmd_unselect(self, tag: str, args: list[Token]) -> str:
        self.selected = None
        self.contexts.clear()
        return "UNSELECT completed"


def _qresync_parameters(params: list[Token]) -> tuple[int, int, str | None] | None:
    """SELECT's ``(QRESYNC (uidvalidity modseq [known-uids [seq-match]]))``."""
    for i, p in enumerate(params):
        if isinstance(p, Atom) and p.upper() == "QRESYNC":
            values = params[i + 1] if i + 1 < len(params) else None
            if not isinstance(values, list):
                raise BadCommand("QRESYNC needs (uidvalidity modseq [known-uids])")
            if len(values) < 2 or not all(isinstance(v, Atom) for v in values[:3]):
                raise BadCommand("QRESYNC needs (uidvalidity modseq [known-uids])")
            try:
                uidvalidity, modseq = int(_text(values[0])), int(_text(values[1]))
            except ValueError:
                raise BadCommand("QRESYNC: uidvalidity and modseq are numbers") from None
            known = _text(values[2]) if len(values) > 2 and isinstance(values[2], Atom) \
                else None
            return uidvalidity, modseq, known
    return None
