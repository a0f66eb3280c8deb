"""LIST and LSUB, with LIST-EXTENDED (RFC 5258), LIST-STATUS (RFC 5819) and SPECIAL-USE
(RFC 6154)."""

from __future__ import annotations

import re
from typing import Any

from adapters.imap.session.core import SessionCore
from adapters.imap.session.words import ROLES, _listed_name, _pattern_name, _text
from adapters.imap.wire import Atom, BadCommand, Token, astring_out
from domain.errors import NotFound, PermissionDenied


class ListCommands(SessionCore):
    async def cmd_list(self, tag: str, args: list[Token], lsub: bool = False) -> str:
        """LIST and LSUB, with LIST-EXTENDED (RFC 5258: selection and return options,
        several patterns), LIST-STATUS (RFC 5819) and SPECIAL-USE (RFC 6154)."""
        word = "LSUB" if lsub else "LIST"
        select: list[str] = []
        extended = False
        if not lsub and args and isinstance(args[0], list):
            select, args, extended = [_text(a).upper() for a in args[0]], args[1:], True
        if len(args) < 2:
            raise BadCommand(f"{word} takes a reference and a pattern")
        ref = _text(args[0])
        extended |= isinstance(args[1], list)
        patterns = [_pattern_name(p) for p in
                    (args[1] if isinstance(args[1], list) else [args[1]])]
        returns, status_items = _list_returns(args[2:]) if not lsub else ([], [])
        extended |= bool(args[2:])
        if set(select) - {"SUBSCRIBED", "REMOTE", "RECURSIVEMATCH", "SPECIAL-USE"}:
            raise BadCommand(f"unknown LIST selection option in {select}")
        if "RECURSIVEMATCH" in select and not set(select) - {"RECURSIVEMATCH", "REMOTE"}:
            raise BadCommand("RECURSIVEMATCH needs another selection option")
        if not extended and patterns == [""]:
            await self.untagged(f'{word} (\\Noselect) "/" ""')
            return f"{word} completed"
        rows, subscribed = await self.call(self._list_rows)
        existing = {r["path"]: r for r in rows}
        by_subscription = lsub or "SUBSCRIBED" in select
        candidates = sorted(subscribed) if by_subscription else list(existing)
        show_subscribed = "SUBSCRIBED" in select or "SUBSCRIBED" in returns
        out: list[tuple[str, list[str], str]] = []
        seen: set[str] = set()
        regexes = [_pattern(ref + p if not p.upper().startswith("INBOX") else p)
                   for p in patterns]
        for pattern, regex in zip(patterns, regexes, strict=True):
            for path in candidates:
                row = existing.get(path)
                if path in seen or not regex.match(path):
                    continue
                if "SPECIAL-USE" in select and (row is None or row.get("role") not in ROLES):
                    continue
                seen.add(path)
                attrs = []
                if row is None:
                    attrs.append("\\NonExistent" if extended else "\\Noselect")
                elif row.get("noselect"):
                    attrs.append("\\Noselect")
                if not lsub and row is not None:
                    children = any(n.startswith(path + "/") for n in existing)
                    attrs.append("\\HasChildren" if children else "\\HasNoChildren")
                    if row.get("role") in ROLES:
                        attrs.append(ROLES[row["role"]])
                if show_subscribed and path in subscribed:
                    attrs.append("\\Subscribed")
                out.append((path, attrs, ""))
            parents: set[str] = set()
            for path in (subscribed if by_subscription else existing):
                parts = path.split("/")
                parents |= {"/".join(parts[:i]) for i in range(1, len(parts))}
            for parent in sorted(parents - seen):
                if not regex.match(parent):
                    continue
                if "RECURSIVEMATCH" in select and by_subscription:
                    if all(any(r.match(c) for r in regexes) for c in subscribed
                           if c.startswith(parent + "/")):
                        continue  # every subscribed child is listed itself
                    seen.add(parent)
                    row = existing.get(parent)
                    attrs = [] if row is not None else ["\\NonExistent"]
                    if row is not None and "CHILDREN" in returns:
                        attrs.append("\\HasChildren")
                    out.append((parent, attrs, ' ("CHILDINFO" ("SUBSCRIBED"))'))
                elif (lsub or "%" in pattern) and parent not in existing \
                        and not by_subscription:
                    seen.add(parent)
                    out.append((parent, ["\\Noselect"] if not extended
                                else ["\\NonExistent"], ""))
                elif lsub and "%" in pattern:
                    seen.add(parent)
                    out.append((parent, ["\\Noselect"], ""))
        for path, attrs, extra in out:
            await self.untagged(f"{word} ({' '.join(attrs)}) \"/\" ".encode()
                                + astring_out(_listed_name(path)) + extra.encode())
            row = existing.get(path)
            if status_items and row is not None and not row.get("noselect"):
                await self._status_line(path, status_items, quiet=True)
        return f"{word} completed"

    def _list_rows(self) -> tuple[list[dict[str, Any]], set[str]]:
        """The mailboxes the user may look up, and the paths of its subscriptions (its own
        account's: subscriptions are the owner's)."""
        self.server.catch_up()
        rows = self.face.mailboxes()
        account, _ = self.face.root()
        subscribed: set[str] = set()
        if account:
            try:
                names = self.face.subscriptions(account)
            except (PermissionDenied, NotFound):
                names = []
            subscribed = {self.face.path_of(account, n) for n in names}
        return rows, subscribed

    async def cmd_lsub(self, tag: str, args: list[Token]) -> str:
        return await self.cmd_list(tag, args, lsub=True)


def _list_returns(rest: list[Token]) -> tuple[list[str], list[str]]:
    """LIST's ``RETURN (...)``: its options, and the STATUS items it asks for."""
    if not rest:
        return [], []
    if len(rest) != 2 or not isinstance(rest[0], Atom) or rest[0].upper() != "RETURN" \
            or not isinstance(rest[1], list):
        raise BadCommand("LIST: expected RETURN (options) after the patterns")
    options: list[str] = []
    status: list[str] = []
    tokens_ = rest[1]
    i = 0
    while i < len(tokens_):
        option = _text(tokens_[i]).upper()
        if option == "STATUS":
            items = tokens_[i + 1] if i + 1 < len(tokens_) else None
            if not isinstance(items, list):
                raise BadCommand("RETURN (STATUS ...) needs a list of items")
            status = [_text(t).upper() for t in items]
            i += 1
        elif option not in ("SUBSCRIBED", "CHILDREN", "SPECIAL-USE"):
            raise BadCommand(f"unknown LIST return option {option}")
        options.append(option)
        i += 1
    return options, status


def _pattern(pattern: str) -> re.Pattern[str]:
    regex = "".join(".*" if c == "*" else "[^/]*" if c == "%" else re.escape(c)
                    for c in pattern)
    if pattern.upper().startswith("INBOX"):
        regex = "(?i:INBOX)" + regex[5:] if len(pattern) >= 5 else regex
    return re.compile(f"^{regex}$")
