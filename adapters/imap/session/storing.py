"""Commands that change the selected mailbox's messages: STORE (with UNCHANGEDSINCE), COPY,
MOVE and EXPUNGE."""

from __future__ import annotations

import re
from functools import partial
from typing import Any

from adapters.imap.mailbox import Selected
from adapters.imap.session.core import SessionCore
from adapters.imap.session.words import GONE, _compact, _flag_name, _mailbox_name, _text
from adapters.imap.wire import BadCommand, No, Token, in_set, sequence_set


class StoreCommands(SessionCore):
    async def cmd_store(self, tag: str, args: list[Token], by_uid: bool = False) -> str:
        sel = self.selected
        assert sel is not None
        if len(args) < 3:
            raise BadCommand("STORE takes a set, an item and flags")
        if sel.readonly:
            raise No("the mailbox is read-only", "READ-ONLY")
        rest = args[1:]
        unchangedsince = None
        if isinstance(rest[0], list):
            mods = rest[0]
            if len(mods) == 2 and _text(mods[0]).upper() == "UNCHANGEDSINCE":
                unchangedsince = int(_text(mods[1]))
                await self.enable_condstore()
            rest = rest[1:]
        item = _text(rest[0]).upper()
        m = re.match(r"^([+-]?)FLAGS(\.SILENT)?$", item)
        if not m:
            raise BadCommand(f"unknown STORE item {item}")
        values = rest[1] if isinstance(rest[1], list) else rest[1:]
        flags = [_flag_name(_text(f)) for f in values]
        if any(f.lower() == "\\recent" for f in flags):
            raise BadCommand("\\Recent cannot be stored")
        mode = {"+": "add", "-": "remove", "": "replace"}[m.group(1)]
        silent = bool(m.group(2))
        if not by_uid:
            await self.report(expunges=False)
        failed: list[int] = []
        for seq, uid in self._targets(_text(args[0]), by_uid):
            e = sel.entries[uid]
            if unchangedsince is not None and e.modseq > unchangedsince:
                failed.append(uid if by_uid else seq)
                continue
            new = _apply(e.flags, frozenset(flags), mode)
            if new != e.flags:
                try:
                    change = await self.call(self.face.flag, e.message_id, flags, mode)
                except No as no:
                    if no.code in GONE:  # expunged meanwhile: left alone, as Dovecot does
                        continue
                    raise
                e.flags = new
                if getattr(change, "modseq", 0):
                    e.modseq = change.modseq
                await self.announce_keywords(sel)
            if not silent or (self.condstore and unchangedsince is not None):
                await self.untagged(self._flags_line(sel, seq, e, uid=by_uid))
        removes, adds = await self.context_changes(list(sel.uids))  # this STORE's own
        for line in removes + adds:
            await self.untagged(line)
        if by_uid:
            await self.report()
        if failed:
            return f"[MODIFIED {','.join(map(str, failed))}] conditional STORE failed"
        return "STORE completed"

    async def cmd_uid_store(self, tag: str, args: list[Token]) -> str:
        return await self.cmd_store(tag, args, by_uid=True)

    async def cmd_copy(self, tag: str, args: list[Token], by_uid: bool = False,
                       move: bool = False) -> str:
        sel = self.selected
        assert sel is not None
        if len(args) != 2:
            raise BadCommand("COPY takes a set and a mailbox")
        targets = self._targets(_text(args[0]), by_uid)
        account, name = self.resolve(_mailbox_name(args[1]))
        if account != sel.account:
            raise No("copying into another account's mailbox is not supported yet", "CANNOT")
        try:
            await self.call(self.face.mailbox_status, account, name)
        except No as no:
            if no.code == "NONEXISTENT":
                no.code = "TRYCREATE"
            raise
        source, dest = [], []
        uidvalidity = 0
        gone = 0
        for _seq, uid in targets:
            e = sel.entries[uid]
            try:
                if move:
                    change = await self.call(self.face.move, e.message_id, name)
                    extra = getattr(change, "extra", {}) or {}
                    new_uid = extra.get("uid")
                    uidvalidity = extra.get("uidvalidity", uidvalidity)
                else:
                    d = await self.call(self.face.copy, e.message_id, name)
                    new_uid, uidvalidity = d.uid, d.uidvalidity
            except No as no:
                if no.code not in GONE:
                    raise
                gone += 1  # expunged by another session meanwhile
                continue
            if new_uid:
                source.append(uid)
                dest.append(int(new_uid))
        if gone:
            await self.report()
            raise No("Some of the requested messages no longer exist", "EXPUNGEISSUED")
        code = ""
        if source:
            code = f"[COPYUID {uidvalidity} {_compact(source)} {_compact(dest)}] "
        if move:
            if code:
                await self.untagged(f"OK {code.strip()} moved")
            await self.report()
            moved = set(source)
            await self.settle(lambda s: not moved & set(s.entries))
            return "MOVE completed"
        if by_uid:
            await self.report()
        return f"{code}COPY completed"

    async def cmd_uid_copy(self, tag: str, args: list[Token]) -> str:
        return await self.cmd_copy(tag, args, by_uid=True)

    async def cmd_move(self, tag: str, args: list[Token]) -> str:
        return await self.cmd_copy(tag, args, move=True)

    async def cmd_uid_move(self, tag: str, args: list[Token]) -> str:
        return await self.cmd_copy(tag, args, by_uid=True, move=True)

    async def cmd_expunge(self, tag: str, args: list[Token], uids: str | None = None) -> str:
        sel = self.selected
        assert sel is not None
        if sel.readonly:
            raise No("the mailbox is read-only", "READ-ONLY")
        ranges = sequence_set(uids, sel.uids[-1] if sel.uids else 0) if uids else None
        for attempt in range(3):
            await self.report()
            ids = [e.message_id for e in sel.entries.values() if "\\Deleted" in e.flags
                   and (ranges is None or in_set(e.uid, ranges))]
            if not ids:
                break
            try:
                await self.call(self.face.expunge, ids)
                await self.settle(partial(_none_of, frozenset(ids)))
                break
            except No as no:
                # another session took \Deleted off (or expunged) one of them since this one
                # looked: look again, and expunge what is marked now
                if attempt == 2 or no.code not in ("CANNOT", *GONE):
                    raise
        await self.report()
        return "EXPUNGE completed"

    async def cmd_uid_expunge(self, tag: str, args: list[Token]) -> str:
        if not args:
            raise BadCommand("UID EXPUNGE needs a UID set")
        return await self.cmd_expunge(tag, [], uids=_text(args[0]))


def _apply(current: frozenset[str], change: frozenset[str], mode: str) -> frozenset[str]:
    if mode == "add":
        return current | change
    if mode == "remove":
        return current - change
    return change


def _none_of(ids: frozenset[Any], sel: Selected) -> bool:
    """Whether none of the messages ``ids`` is in the selected mailbox any more."""
    return not any(e.message_id in ids for e in sel.entries.values())
