"""SEARCH (RFC 3501 section 6.4.4, CONDSTORE's MODSEQ): the keys a client sends, read into
a tree (``Query``); ``searcher.Searcher`` finds the messages that match it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from adapters.imap.mailbox import Selected
from adapters.imap.wire import Atom, BadCommand, String, Token, sequence_set

MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")


class SearchError(ValueError):
    pass


@dataclass
class Key:
    name: str
    args: list[Any] = field(default_factory=list)


@dataclass
class Query:
    keys: list[Key]
    uses_modseq: bool = False
    returns: list[str] | None = None  # ESEARCH's RETURN options ([] for "RETURN ()")
    partial: tuple[int, int] | None = None  # RETURN (PARTIAL low:high): 1-based, or
    # negative: counted from the end (RFC 9394)


_FLAG_KEYS = {"ANSWERED": ("\\Answered", True), "DELETED": ("\\Deleted", True),
              "DRAFT": ("\\Draft", True), "FLAGGED": ("\\Flagged", True),
              "SEEN": ("\\Seen", True), "UNANSWERED": ("\\Answered", False),
              "UNDELETED": ("\\Deleted", False), "UNDRAFT": ("\\Draft", False),
              "UNFLAGGED": ("\\Flagged", False), "UNSEEN": ("\\Seen", False),
              "OLD": ("\\Recent", False), "RECENT": ("\\Recent", True)}
_STRING_KEYS = {"BCC", "BODY", "CC", "FROM", "SUBJECT", "TEXT", "TO"}
_DATE_KEYS = {"BEFORE", "ON", "SINCE", "SENTBEFORE", "SENTON", "SENTSINCE"}


def parse_search(args: list[Token], sel: Selected) -> Query:
    toks = list(args)
    if len(toks) >= 2 and isinstance(toks[0], Atom) and toks[0].upper() == "CHARSET":
        charset = _word(toks[1]).upper()
        if charset not in ("US-ASCII", "UTF-8"):
            raise SearchError(f"[BADCHARSET (US-ASCII UTF-8)] unsupported charset {charset}")
        toks = toks[2:]
    returns: list[str] | None = None
    if toks and isinstance(toks[0], Atom) and toks[0].upper() == "RETURN":
        if len(toks) < 2 or not isinstance(toks[1], list):
            raise SearchError("RETURN needs a list of options")
        returns, partial = return_options(toks[1])
        toks = toks[2:]
    if len(toks) >= 2 and isinstance(toks[0], Atom) and toks[0].upper() == "CHARSET":
        charset = _word(toks[1]).upper()
        if charset not in ("US-ASCII", "UTF-8"):
            raise SearchError(f"[BADCHARSET (US-ASCII UTF-8)] unsupported charset {charset}")
        toks = toks[2:]
    query = Query([], returns=returns)
    if returns is not None:
        query.partial = partial
    pos = [0]
    while pos[0] < len(toks):
        query.keys.append(_key(toks, pos, sel, query))
    if not query.keys:
        raise SearchError("SEARCH needs a key")
    return query


RETURN_OPTIONS = ("MIN", "MAX", "ALL", "COUNT", "UPDATE", "PARTIAL")


def return_options(options: list[Token]) -> tuple[list[str], tuple[int, int] | None]:
    """ESEARCH's and ESORT's RETURN options (RFC 4731, RFC 5267 with UPDATE and PARTIAL),
    PARTIAL's range apart, its ends in order (``4:2`` is ``2:4``)."""
    returns: list[str] = []
    partial = None
    i = 0
    while i < len(options):
        option = _word(options[i]).upper()
        if option not in RETURN_OPTIONS:
            raise SearchError(f"unknown RETURN option {option}")
        if option == "PARTIAL":
            i += 1
            given = _word(options[i]) if i < len(options) else ""
            m = re.match(r"^(-?)([1-9]\d*):(-?)([1-9]\d*)$", given)
            if not m or m.group(1) != m.group(3):
                raise SearchError(f"PARTIAL needs a range low:high, not {given!r}")
            sign = -1 if m.group(1) else 1
            a, b = sign * int(m.group(2)), sign * int(m.group(4))
            partial = (min(a, b), max(a, b)) if sign > 0 else (max(a, b), min(a, b))
        returns.append(option)
        i += 1
    return returns, partial


def partial_of(found: list[int], partial: tuple[int, int]) -> list[int]:
    """The results at PARTIAL's positions (1-based; negative ones from the end)."""
    low, high = partial
    if low > 0:
        return found[low - 1:high]
    n = len(found)
    return found[max(n + high, 0):max(n + low + 1, 0)]


def _word(token: Token) -> str:
    if isinstance(token, Atom):
        return token.value
    if isinstance(token, String):
        return token.text()
    raise SearchError("expected a string")


def _next(toks: list[Token], pos: list[int]) -> Token:
    if pos[0] >= len(toks):
        raise SearchError("missing search argument")
    t = toks[pos[0]]
    pos[0] += 1
    return t


def _date(text: str) -> date:
    m = re.match(r"^(\d{1,2})-([A-Za-z]{3})-(\d{4})$", text)
    if not m or m.group(2).lower() not in MONTHS:
        raise SearchError(f"invalid date {text!r}")
    return date(int(m.group(3)), MONTHS.index(m.group(2).lower()) + 1, int(m.group(1)))


def _key(toks: list[Token], pos: list[int], sel: Selected, query: Query) -> Key:
    t = _next(toks, pos)
    if isinstance(t, list):
        inner_pos = [0]
        inner: list[Key] = []
        while inner_pos[0] < len(t):
            inner.append(_key(t, inner_pos, sel, query))
        return Key("AND", inner)
    if not isinstance(t, Atom):
        raise SearchError("expected a search key")
    name = t.upper()
    if name in ("ALL",):
        return Key("ALL")
    if name == "NEW":
        return Key("AND", [Key("FLAG", ["\\Recent", True]), Key("FLAG", ["\\Seen", False])])
    if name in _FLAG_KEYS:
        return Key("FLAG", list(_FLAG_KEYS[name]))
    if name in ("KEYWORD", "UNKEYWORD"):
        return Key("FLAG", [_word(_next(toks, pos)), name == "KEYWORD"])
    if name in _STRING_KEYS:
        return Key(name, [_word(_next(toks, pos))])
    if name == "HEADER":
        return Key(name, [_word(_next(toks, pos)), _word(_next(toks, pos))])
    if name in _DATE_KEYS:
        return Key(name, [_date(_word(_next(toks, pos)))])
    if name in ("LARGER", "SMALLER"):
        value = _word(_next(toks, pos))
        if not value.isdigit():
            raise SearchError(f"{name} needs a number")
        return Key(name, [int(value)])
    if name == "NOT":
        return Key("NOT", [_key(toks, pos, sel, query)])
    if name == "OR":
        return Key("OR", [_key(toks, pos, sel, query), _key(toks, pos, sel, query)])
    if name == "UID":
        try:
            return Key("UID", [sequence_set(_word(_next(toks, pos)),
                                            sel.uids[-1] if sel.uids else 0)])
        except BadCommand as e:
            raise SearchError(str(e)) from None
    if name == "MODSEQ":
        value = _word(_next(toks, pos))
        if not value.isdigit():  # an entry name and type come first
            _next(toks, pos)
            value = _word(_next(toks, pos))
        query.uses_modseq = True
        return Key("MODSEQ", [int(value)])
    if re.match(r"^[\d*:,]+$", name):
        try:
            return Key("SEQ", [sequence_set(name, len(sel.uids))])
        except BadCommand as e:
            raise SearchError(str(e)) from None
    raise SearchError(f"unknown search key {t.value}")
