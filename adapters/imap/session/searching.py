"""SEARCH and its ESEARCH answers (RFC 4731), the searches kept updated (CONTEXT=SEARCH,
RFC 5267) and CANCELUPDATE."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable

from adapters.imap.search import SearchError, parse_search, partial_of
from adapters.imap.searcher import Searcher
from adapters.imap.session.core import Context, SessionCore
from adapters.imap.session.words import _compact
from adapters.imap.wire import BadCommand, String, Token


class SearchCommands(SessionCore):
    async def cmd_search(self, tag: str, args: list[Token], by_uid: bool = False) -> str:
        sel = self.selected
        assert sel is not None
        if not by_uid:
            await self.report(expunges=False)
        try:
            query = parse_search(args, sel)
        except SearchError as e:
            raise BadCommand(str(e)) from None
        searcher = Searcher(sel, lambda uid: self.call(self.message, uid))
        found = await searcher.run(query)
        numbers = [uid if by_uid else sel.seq_of(uid) for uid in found]
        if query.uses_modseq:
            await self.enable_condstore()
        returned = found
        if query.returns and not {"ALL", "COUNT"} & set(query.returns) and found:
            returned = [u for u in found if ("MIN" in query.returns and u == found[0])
                        or ("MAX" in query.returns and u == found[-1])]
            if query.partial is not None:
                returned += partial_of(found, query.partial)
        modseq = max(sel.entries[u].modseq for u in returned) \
            if query.uses_modseq and returned else None
        if query.returns is None:
            line = "SEARCH" + "".join(f" {n}" for n in numbers)
            if modseq is not None:
                line += f" (MODSEQ {modseq})"
        else:  # ESEARCH (RFC 4731), CONTEXT=SEARCH (RFC 5267)
            line = f'ESEARCH (TAG "{tag}")' + (" UID" if by_uid else "")
            line += _esearch_results(numbers, query.returns, query.partial, _compact)
            if modseq is not None:
                line += f" MODSEQ {modseq}"
            if "UPDATE" in query.returns:
                self.contexts[tag] = Context(tag, query, by_uid, set(found))
        await self.untagged(line)
        if by_uid:
            await self.report()
        return "SEARCH completed"

    async def cmd_uid_search(self, tag: str, args: list[Token]) -> str:
        return await self.cmd_search(tag, args, by_uid=True)

    async def cmd_cancelupdate(self, tag: str, args: list[Token]) -> str:
        """CANCELUPDATE (RFC 5267 4.3): the named searches are no longer updated."""
        if not args:
            raise BadCommand("CANCELUPDATE needs the tags of searches")
        for t in args:
            if not isinstance(t, String):
                raise BadCommand("CANCELUPDATE takes quoted tags")
            self.contexts.pop(t.text(), None)
        return "CANCELUPDATE completed"

    async def context_changes(self, old_uids: list[int]
                              ) -> tuple[list[str], list[str]]:
        """The updates of the searches kept with RETURN (UPDATE) since their last report:
        REMOVEFROM lines (positions before this report's expunges: sent before them) and
        ADDTO lines (sent after EXISTS)."""
        sel = self.selected
        if sel is None or not self.contexts:
            return [], []
        removes: list[str] = []
        adds: list[str] = []
        searcher = Searcher(sel, lambda uid: self.call(self.message, uid))
        for ctx in list(self.contexts.values()):
            now = await searcher.run(ctx.query)
            if ctx.sort is not None:
                now = [uid for _, uid in await self._sorted(ctx.sort, now)]
            gone = sorted(ctx.result - set(now))
            new = [u for u in now if u not in ctx.result]
            ctx.result = set(now)
            head = f'ESEARCH (TAG "{ctx.tag}")' + (" UID" if ctx.by_uid else "")
            if gone:
                old = [u if ctx.by_uid else bisect_left(old_uids, u) + 1 for u in gone]
                removes.append(f"{head} REMOVEFROM (0 {_compact(sorted(old))})")
            if new and ctx.sort is None:
                numbers = [u if ctx.by_uid else sel.seq_of(u) for u in new]
                adds.append(f"{head} ADDTO (0 {_compact(sorted(numbers))})")
            elif new:  # sorted: each at its position in the new order
                for u in new:
                    adds.append(f"{head} ADDTO ({now.index(u) + 1} "
                                f"{u if ctx.by_uid else sel.seq_of(u)})")
        return removes, adds


def _esearch_results(numbers: list[int], returns: list[str],
                     partial: tuple[int, int] | None, listed: Callable[[list[int]], str]
                     ) -> str:
    """ESEARCH's result items for RETURN ``returns`` (``numbers`` in the result's order:
    ascending for SEARCH, sorted for SORT; ``listed`` writes a set of them)."""
    wanted = [r for r in returns if r != "UPDATE"] or ["ALL"]
    out = ""
    if numbers and "MIN" in wanted:
        out += f" MIN {min(numbers) if listed is _compact else numbers[0]}"
    if numbers and "MAX" in wanted:
        out += f" MAX {max(numbers) if listed is _compact else numbers[-1]}"
    if "COUNT" in wanted:
        out += f" COUNT {len(numbers)}"
    if numbers and "ALL" in wanted:
        out += f" ALL {listed(sorted(numbers) if listed is _compact else numbers)}"
    if partial is not None:
        part = partial_of(numbers, partial)
        shown = listed(sorted(part) if listed is _compact else part) if part else "NIL"
        out += f" PARTIAL ({partial[0]}:{partial[1]} {shown})"
    return out
