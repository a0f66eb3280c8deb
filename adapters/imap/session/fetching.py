"""FETCH (items rendered by ``adapters/imap/fetch.py``), the messages' parsed structure
kept per session, and the sets of messages a command names."""

from __future__ import annotations

from adapters.imap import mime
from adapters.imap.fetch import FetchItems
from adapters.imap.mailbox import Entry, Selected
from adapters.imap.session.core import SessionCore
from adapters.imap.session.words import GONE, PARSED_BYTES, _compact, _text
from adapters.imap.wire import Atom, BadCommand, No, Token, in_set, sequence_set


class FetchCommands(SessionCore):
    def message(self, uid: int) -> mime.Part:
        """The message's structure, from its bytes (``body``: a preview read, checked and
        refused as ``extract`` refuses). The last few are kept while the log stands still
        (any change may be a right taken away), at most ``PARSED_BYTES`` of them."""
        sel = self.selected
        assert sel is not None
        head = self.server.catch_up()
        if head != self.parsed_at:
            self.parsed.clear()
            self.parsed_at = head
        key = (sel.account, sel.name, sel.uidvalidity, uid)
        if key in self.parsed:
            self.parsed.move_to_end(key)
            return self.parsed[key]
        raw = b"".join(self.face.body(sel.account, sel.name, uid))
        part = mime.parse(raw)
        self.parsed[key] = part
        while len(self.parsed) > 16 or sum(len(p.raw) for p in self.parsed.values()) \
                > PARSED_BYTES:
            self.parsed.popitem(last=False)
        return part

    def _targets(self, spec: str, by_uid: bool) -> list[tuple[int, int]]:
        """(seq, uid) of the messages a set names, in order."""
        sel = self.selected
        assert sel is not None
        if spec == "$":
            raise BadCommand("no saved search result")
        if by_uid:
            ranges = sequence_set(spec, sel.uids[-1] if sel.uids else 0)
            return [(i + 1, uid) for i, uid in enumerate(sel.uids) if in_set(uid, ranges)]
        if not sel.uids:
            raise BadCommand("no messages")
        ranges = sequence_set(spec, len(sel.uids))
        if any(high > len(sel.uids) for _, high in ranges):
            raise BadCommand("invalid message sequence number")
        return [(i + 1, uid) for i, uid in enumerate(sel.uids) if in_set(i + 1, ranges)]

    async def cmd_fetch(self, tag: str, args: list[Token], by_uid: bool = False) -> str:
        sel = self.selected
        assert sel is not None
        if len(args) < 2:
            raise BadCommand("FETCH takes a set and items")
        if not by_uid:
            await self.report(expunges=False)
        items = FetchItems.parse(args[1], by_uid)
        changedsince = None
        mods: list[Token] = args[2] if len(args) > 2 and isinstance(args[2], list) else []
        for i, m in enumerate(mods):
            if isinstance(m, Atom) and m.upper() == "CHANGEDSINCE" and i + 1 < len(mods):
                changedsince = int(_text(mods[i + 1]))
                items.modseq = True
        if items.modseq:
            await self.enable_condstore()
        targets = self._targets(_text(args[0]), by_uid)
        if by_uid and self.qresync and changedsince is not None and any(
                isinstance(m, Atom) and m.upper() == "VANISHED" for m in mods):
            top = sel.uids[-1] if sel.uids else 0
            present = set(sel.uids)
            asked = sequence_set(_text(args[0]), max(top, 1))
            gone_uids = sorted({u for low, high in asked
                                for u in range(low, min(high, max(sel.uidnext - 1, 0)) + 1)
                                if u not in present})
            if gone_uids:
                await self.untagged(f"VANISHED (EARLIER) {_compact(gone_uids)}")
        gone = 0
        for seq, uid in targets:
            e = sel.entries.get(uid)
            if e is None or (changedsince is not None and e.modseq <= changedsince):
                continue
            try:
                line = await items.render(self, sel, seq, e)
            except No as no:
                if no.code not in GONE:
                    raise
                gone += 1  # expunged by another session: its EXPUNGE is still to come
                continue
            await self.send(line)
        if self.contexts:  # a FETCH of a body may have set \Seen
            removes, adds = await self.context_changes(list(sel.uids))
            for update in removes + adds:
                await self.untagged(update)
        if by_uid:
            await self.report()
        if gone:
            raise No("Some of the requested messages no longer exist", "EXPUNGEISSUED")
        return "FETCH completed"

    async def cmd_uid_fetch(self, tag: str, args: list[Token]) -> str:
        return await self.cmd_fetch(tag, args, by_uid=True)

    async def set_seen(self, sel: Selected, e: Entry) -> bool:
        """FETCH BODY[...] (not PEEK) marks the message \\Seen where the user may."""
        if sel.readonly or "\\Seen" in e.flags or "s" not in sel.rights:
            return False
        change = await self.call(self.face.flag, e.message_id, ["\\Seen"], "add")
        e.flags = e.flags | {"\\Seen"}
        if change.modseq:
            e.modseq = change.modseq
        return True
