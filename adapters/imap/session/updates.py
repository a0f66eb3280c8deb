"""The selected mailbox's untagged updates (EXISTS, EXPUNGE or VANISHED, FLAGS, RECENT and
the kept searches' updates), the wait for stream workers to show a session's own change,
and IDLE."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from adapters.imap.mailbox import Entry, Selected
from adapters.imap.session.core import SessionCore
from adapters.imap.session.words import SETTLE_SECONDS, SYSTEM_FLAGS, _compact
from adapters.imap.wire import BadCommand, Token


class Updates(SessionCore):
    async def report(self, *, expunges: bool = True) -> None:
        """Untagged updates of the selected mailbox: what changed since the last look. Not
        during FETCH, STORE and SEARCH (``expunges`` False): sequence numbers may not
        change under them (RFC 3501 7.4.1), so their changes wait for the next command."""
        if self.notify and expunges:
            await self.notify_changes()
        sel = self.selected
        if sel is None or not expunges:
            return
        old_uids = list(sel.uids)
        await self.call(self._sync, sel)
        expunged, exists, changed = sel.pending or ([], 0, [])
        vanished = sel.vanished
        sel.pending, sel.vanished = None, []
        removes, adds = await self.context_changes(old_uids) \
            if expunged or exists or changed else ([], [])
        for line in removes:
            await self.untagged(line)
        if self.qresync and vanished:
            await self.untagged(f"VANISHED {_compact(sorted(vanished))}")
        else:
            for seq in expunged:
                await self.untagged(f"{seq} EXPUNGE")
        sel.recent &= set(sel.entries)
        if sel.new_keywords():
            await self.untagged(f"FLAGS ({self._flag_names(sel)})")
            await self.untagged(f"OK [PERMANENTFLAGS ({self._permanent(sel, sel.keywords)})]"
                                " flags the user may keep")
        if exists:
            new = [u for u in sel.uids if u not in sel.recent and u >= self.server.recent_from(sel)]
            sel.recent |= self.server.claim_recent(sel, new, claim=not sel.readonly)
            await self.untagged(f"{exists} EXISTS")
            await self.untagged(f"{len(sel.recent)} RECENT")
        for uid in changed:
            seq = sel.seq_of(uid)
            if seq:
                await self.untagged(self._flags_line(sel, seq, sel.entries[uid], uid=True))
        for line in adds:
            await self.untagged(line)

    async def settle(self, done: Callable[[Selected], bool]) -> None:
        """With read models kept by stream workers: report updates until this session's
        own command shows in them (``done``), for at most ``SETTLE_SECONDS``; at once in the
        embedded store, which projects a command before it returns."""
        sel = self.selected
        deadline = time.monotonic() + SETTLE_SECONDS
        while (self.server.lagging and sel is not None and sel is self.selected
               and not done(sel) and time.monotonic() < deadline):
            await asyncio.sleep(0.1)  # the workers' pace: what a command waits for here
            await self.report()

    async def enable_condstore(self) -> None:
        """A CONDSTORE-enabling command (RFC 7162 3.1): the first one in a selected mailbox
        is answered with the mailbox's HIGHESTMODSEQ too."""
        if self.condstore:
            return
        self.condstore = True
        if self.selected is not None:
            await self.untagged(f"OK [HIGHESTMODSEQ {max(self.selected.highestmodseq, 1)}]"
                                " CONDSTORE enabled")

    async def announce_keywords(self, sel: Selected) -> None:
        if sel.new_keywords():
            await self.untagged(f"FLAGS ({self._flag_names(sel)})")
            await self.untagged(f"OK [PERMANENTFLAGS ({self._permanent(sel, sel.keywords)})]"
                                " flags the user may keep")

    def _flags_line(self, sel: Selected, seq: int, e: Entry, *, uid: bool) -> str:
        items = [f"FLAGS ({' '.join(sel.flags_of(e))})"]
        if uid:
            items.append(f"UID {e.uid}")
        if self.condstore:
            items.append(f"MODSEQ ({e.modseq})")
        return f"{seq} FETCH ({' '.join(items)})"

    @staticmethod
    def _flag_names(sel: Selected) -> str:
        return " ".join([*SYSTEM_FLAGS, *sorted(sel.keywords)])

    @staticmethod
    def _permanent(sel: Selected, keywords: set[str]) -> str:
        if sel.readonly:
            return ""
        out = []
        if "s" in sel.rights:
            out.append("\\Seen")
        if "t" in sel.rights:
            out.append("\\Deleted")
        if "w" in sel.rights:
            out += ["\\Answered", "\\Flagged", "\\Draft", *sorted(keywords), "\\*"]
        return " ".join(out)

    async def cmd_idle(self, tag: str, args: list[Token]) -> str:
        await self.send(b"+ idling\r\n")
        await self.report()
        line_task = asyncio.ensure_future(self.reader.readline())
        try:
            while True:
                changed = asyncio.ensure_future(self.server.changed.wait())
                done, _ = await asyncio.wait({line_task, changed}, timeout=30,
                                             return_when=asyncio.FIRST_COMPLETED)
                if changed not in done:
                    changed.cancel()
                if line_task in done:
                    line = line_task.result()
                    if not line:
                        raise ConnectionError("client gone")
                    if line.strip().upper() != b"DONE":
                        raise BadCommand("expected DONE")
                    return "IDLE terminated"
                await self.report()
        finally:
            if not line_task.done():
                line_task.cancel()
