"""Flags and keywords: their validation (every entry point shares it) and James' flag
update modes."""

from __future__ import annotations

import re
from enum import StrEnum

from domain.errors import InvalidCommand

SYSTEM_FLAGS = frozenset({"\\Seen", "\\Answered", "\\Flagged", "\\Deleted", "\\Draft"})
# RFC 3501 atom: no specials, no controls, no spaces; keywords may not start with a backslash.
_KEYWORD = re.compile(r"^[^\\\x00-\x20\x7f(){%*\"\]]{1,100}$")


def validate_flag(flag: str) -> str:
    """A system flag (``\\Seen``...) or a keyword (``$Forwarded``, ``work``)."""
    if flag.startswith("\\"):
        for f in SYSTEM_FLAGS:
            if f.lower() == flag.lower():
                return f
        raise InvalidCommand(f"flag: {flag!r} is not a system flag (one of {sorted(SYSTEM_FLAGS)})")
    if not _KEYWORD.match(flag):
        raise InvalidCommand(f"flag: {flag!r} is not a valid keyword")
    return flag


def validate_flags(flags: list[str] | tuple[str, ...] | frozenset[str]) -> frozenset[str]:
    return frozenset(validate_flag(f) for f in flags)


class FlagMode(StrEnum):
    """James' flag update modes."""

    ADD = "add"
    REMOVE = "remove"
    REPLACE = "replace"


def apply_flag_mode(
    current: frozenset[str], change: frozenset[str], mode: FlagMode
) -> frozenset[str]:
    if mode is FlagMode.ADD:
        return current | change
    if mode is FlagMode.REMOVE:
        return current - change
    return change
