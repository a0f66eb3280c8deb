"""SORT (RFC 5256, SORT=DISPLAY, ESORT) and THREAD (ORDEREDSUBJECT, REFERENCES)."""

from __future__ import annotations

from typing import Any

from adapters.imap import sort, thread
from adapters.imap.search import SearchError, parse_search, return_options
from adapters.imap.searcher import Searcher
from adapters.imap.session.core import Context, SessionCore
from adapters.imap.session.searching import _esearch_results
from adapters.imap.session.words import GONE, _compact, _text
from adapters.imap.wire import Atom, BadCommand, No, Token


class SortCommands(SessionCore):
    async def cmd_sort(self, tag: str, args: list[Token], by_uid: bool = False) -> str:
        """SORT (RFC 5256, SORT=DISPLAY: RFC 5957), and ESORT's RETURN (RFC 5267)."""
        sel = self.selected
        assert sel is not None
        returns: list[str] | None = None
        partial_range = None
        if args and isinstance(args[0], Atom) and args[0].upper() == "RETURN":
            if len(args) < 2 or not isinstance(args[1], list):
                raise BadCommand("RETURN needs a list of options")
            try:
                returns, partial_range = return_options(args[1])
            except SearchError as e:
                raise BadCommand(str(e)) from None
            args = args[2:]
        if len(args) < 3 or not isinstance(args[0], list):
            raise BadCommand("SORT takes (criteria) charset search-keys")
        try:
            criteria = sort.parse_criteria([_text(t) for t in args[0]])
            query = parse_search([Atom("CHARSET"), args[1], *args[2:]], sel)
        except (sort.SortError, SearchError) as e:
            raise BadCommand(str(e)) from None
        found = await Searcher(sel, lambda uid: self.call(self.message, uid)).run(query)
        keyed = await self._sorted(criteria, found)
        numbers = [uid if by_uid else sel.seq_of(uid) for _, uid in keyed]
        if returns is None:
            await self.untagged("SORT" + "".join(f" {n}" for n in numbers))
        else:
            line = f'ESEARCH (TAG "{tag}")' + (" UID" if by_uid else "")
            line += _esearch_results(numbers, returns, partial_range, _in_order)
            await self.untagged(line)
            if "UPDATE" in returns:
                self.contexts[tag] = Context(tag, query, by_uid, {u for _, u in keyed},
                                             criteria)
        if by_uid:
            await self.report()
        return "SORT completed"

    async def cmd_uid_sort(self, tag: str, args: list[Token]) -> str:
        return await self.cmd_sort(tag, args, by_uid=True)

    async def _sorted(self, criteria: Any, found: list[int]) -> list[tuple[Any, int]]:
        """``found`` in the order of the SORT ``criteria``, each with its sort key."""
        sel = self.selected
        assert sel is not None
        keyed = []
        for uid in found:
            msg = None
            if sort.needs_message(criteria):
                try:
                    msg = await self.call(self.message, uid)
                except No as no:
                    if no.code not in GONE:
                        raise
            keyed.append((sort.sort_key(criteria, sel.seq_of(uid), sel.entries[uid], msg),
                          uid))
        keyed.sort(key=lambda pair: pair[0])
        return keyed

    async def cmd_thread(self, tag: str, args: list[Token], by_uid: bool = False) -> str:
        """THREAD (RFC 5256): ORDEREDSUBJECT and REFERENCES."""
        sel = self.selected
        assert sel is not None
        if len(args) < 3 or not isinstance(args[0], Atom):
            raise BadCommand("THREAD takes an algorithm, a charset and search keys")
        algorithm = args[0].upper()
        if algorithm not in ("ORDEREDSUBJECT", "REFERENCES"):
            raise BadCommand(f"unknown threading algorithm {algorithm}")
        try:
            query = parse_search([Atom("CHARSET"), args[1], *args[2:]], sel)
        except SearchError as err:
            raise BadCommand(str(err)) from None
        found = await Searcher(sel, lambda uid: self.call(self.message, uid)).run(query)
        messages = []
        for uid in found:
            seq, e = sel.seq_of(uid), sel.entries[uid]
            try:
                msg = await self.call(self.message, uid)
            except No as no:
                if no.code not in GONE:
                    raise
                continue
            messages.append(thread.Message(
                uid if by_uid else seq, (sort.key_of("DATE", seq, e, msg), seq),
                msg.get("subject"), msg.get("message-id"), msg.get("references"),
                msg.get("in-reply-to")))
        if algorithm == "ORDEREDSUBJECT":
            threads = thread.ordered_subject(messages)
        else:
            threads = thread.references(messages)
        await self.untagged("THREAD" + (" " + threads if threads else ""))
        if by_uid:
            await self.report()
        return "THREAD completed"

    async def cmd_uid_thread(self, tag: str, args: list[Token]) -> str:
        return await self.cmd_thread(tag, args, by_uid=True)


def _in_order(numbers: list[int]) -> str:
    """Numbers in the order given, ascending runs as ranges (ESORT's ALL): ``_compact``,
    which keeps the order it is given."""
    return _compact(numbers)
