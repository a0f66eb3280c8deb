"""What the session's commands share: its constants, and the small readers and writers
of the protocol's words (strings, mailbox names, flags, sets of numbers)."""

from __future__ import annotations

import logging

from adapters.imap.utf7 import decode, encode
from adapters.imap.wire import Atom, BadCommand, String, Token

log = logging.getLogger("letterlog.imap")


SYSTEM_FLAGS = ("\\Answered", "\\Flagged", "\\Deleted", "\\Seen", "\\Draft")

MAX_LINE = 64 * 1024

SETTLE_SECONDS = 5.0
"""With read models kept by stream workers (scale-out), how long after a change of the log
sessions read their mailboxes again on every look, for the workers to project it."""

PARSED_BYTES = 8 << 20
"""At most this many bytes of messages kept parsed per session (FETCH of their parts)."""

AUTOLOGOUT = 30 * 60.0

AUTOLOGOUT_UNAUTHENTICATED = 120.0

ROLES = {"sent": "\\Sent", "drafts": "\\Drafts", "trash": "\\Trash", "junk": "\\Junk",
         "archive": "\\Archive"}

GONE = ("NONEXISTENT", "EXPUNGEISSUED")
"""The codes of a message another session expunged while this one still shows it."""

STATUS_ITEMS = ("MESSAGES", "RECENT", "UIDNEXT", "UIDVALIDITY", "UNSEEN", "HIGHESTMODSEQ",
                "DELETED", "DELETED-STORAGE")
"""DELETED and DELETED-STORAGE: RFC 9208 asks for them with QUOTA=RES-MESSAGE and
QUOTA=RES-STORAGE (the messages marked \\Deleted, and their size in KiB)."""

ANSWERED = "answered"
"""A handler's result when it has sent its tagged reply itself (STARTTLS)."""

def _text(token: Token) -> str:
    if isinstance(token, Atom):
        return token.value
    if isinstance(token, String):
        return token.text()
    raise BadCommand("expected a string")


def _mailbox_name(token: Token) -> str:
    name = _text(token)
    if name.upper() == "INBOX":
        return "INBOX"

    try:
        return decode(name)
    except ValueError:  # not modified UTF-7: a name of its own (that no mailbox has)
        return name


def _pattern_name(token: Token) -> str:
    """A LIST pattern, decoded from modified UTF-7 where it is that."""
    try:
        return decode(_text(token))
    except ValueError:
        return _text(token)


def _listed_name(path: str) -> str:
    return path if path == "INBOX" else encode(path)


def _quoted_code(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _flag_name(flag: str) -> str:
    """A system flag in its usual spelling (``\\seen`` -> ``\\Seen``); keywords as given."""
    if flag.startswith("\\"):
        for f in SYSTEM_FLAGS:
            if f.lower() == flag.lower():
                return f
        if flag.lower() == "\\recent":
            return "\\Recent"
        raise BadCommand(f"unknown system flag {flag}")
    return flag


def _compact(numbers: list[int]) -> str:
    out: list[str] = []
    start = prev = numbers[0]
    for n in numbers[1:] + [0]:
        if n == prev + 1:
            prev = n
            continue
        out.append(f"{start}:{prev}" if prev != start else str(start))
        start = prev = n
    return ",".join(out)

