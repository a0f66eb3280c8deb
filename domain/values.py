"""Value types of the mail domain: flags, keywords, labels, roles, extraction policy.

Validation lives here so that every entry point (API, CLI, Kafka, Spark) shares it.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from functools import lru_cache
from typing import Literal

from domain.errors import InvalidCommand
from domain.identity import canonical_name
from domain.speedups import uuid_of_int

SYSTEM_FLAGS = frozenset({"\\Seen", "\\Answered", "\\Flagged", "\\Deleted", "\\Draft"})
# RFC 3501 atom: no specials, no controls, no spaces; keywords may not start with a backslash.
_KEYWORD = re.compile(r"^[^\\\x00-\x20\x7f(){%*\"\]]{1,100}$")
_LABEL = re.compile(r"^[^\x00-\x1f\x7f/]{1,200}$")
# The hierarchy delimiter of mailbox names (RFC 3501 LIST's delimiter): ``Archive/2024`` is an
# inferior of ``Archive``; rename and delete act on the hierarchy it makes.
DELIMITER = "/"
_MAILBOX_NAME = re.compile(r"^[^\x00-\x1f\x7f]{1,500}$")

NAMESPACE = uuid.UUID("7d0c6f0e-3c56-5f0c-9a8e-1b5f0c4e2a10")
_NAMESPACE_BYTES = NAMESPACE.bytes
_VERSION_BITS = ~((0xC000 << 48) | (0xF000 << 64))  # RFC 4122 variant and version fields
_VERSION_5 = (0x8000 << 48) | (5 << 76)
_SPACE = re.compile(r"\s")  # the characters str.isspace() is true for


def name_uuid(name: str) -> uuid.UUID:
    """``uuid.uuid5(NAMESPACE, name)``: the natural key of a name, made the same way."""
    digest = hashlib.sha1(_NAMESPACE_BYTES + name.encode(), usedforsecurity=False).digest()
    return uuid_of_int((int.from_bytes(digest[:16], "big") & _VERSION_BITS) | _VERSION_5)


class Role(StrEnum):
    """A mailbox's role (JMAP / RFC 8457 special-use)."""

    INBOX = "inbox"
    SENT = "sent"
    DRAFTS = "drafts"
    TRASH = "trash"
    JUNK = "junk"
    ARCHIVE = "archive"
    NONE = ""


def normalise_address(address: str) -> str:
    """An account is named by its address, as the identity rule has it
    (``domain.identity``: lower case; outside ASCII PRECIS UsernameCaseMapped, and a name it
    cannot make unambiguous is ``NameRefused``)."""
    a = (address or "").strip()
    local, sep, domain = a.rpartition("@")
    if not sep or not local or not domain or _SPACE.search(a) or "\x00" in a:
        raise InvalidCommand(f"account: {address!r} is not an e-mail address")
    return canonical_name(a, "account")


@lru_cache(maxsize=65536)
def account_id_for(address: str) -> uuid.UUID:
    """Accounts have natural keys: uuid5 of the normalised address (remembered: an import
    or a busy account asks for the same one with every message)."""
    return name_uuid("account:" + normalise_address(address))


def validate_mailbox_name(name: str) -> str:
    n = (name or "").strip()
    if n.upper() == "INBOX":
        return "INBOX"
    if (not _MAILBOX_NAME.match(n) or n.startswith(DELIMITER) or n.endswith(DELIMITER)
            or DELIMITER * 2 in n):
        raise InvalidCommand(f"mailbox: {name!r} is not a valid mailbox name")
    return n


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


def validate_label(label: str) -> str:
    lab = (label or "").strip()
    if not _LABEL.match(lab):
        raise InvalidCommand(f"label: {label!r} is not a valid label")
    return lab


def validate_labels(labels: list[str] | tuple[str, ...] | frozenset[str]) -> frozenset[str]:
    return frozenset(validate_label(lab) for lab in labels)


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


PolicyKind = Literal["indefinite", "count", "until"]


@dataclass(frozen=True)
class ExtractionPolicy:
    """Sterling Global Mailbox extraction limits."""

    kind: PolicyKind = "indefinite"
    limit: int | None = None
    until: datetime | None = None

    def __post_init__(self) -> None:
        if self.kind == "count" and (self.limit is None or self.limit < 1):
            raise InvalidCommand("extract_limit: must be a whole number ≥ 1")
        if self.kind == "until" and (self.until is None or self.until.tzinfo is None):
            raise InvalidCommand("extract_until: must be a timezone-aware date-time")
        if self.kind not in ("indefinite", "count", "until"):
            raise InvalidCommand(f"policy: unknown kind {self.kind!r}")

    @classmethod
    def of(cls, limit: int | None = None, until: datetime | None = None) -> ExtractionPolicy:
        if limit is not None and until is not None:
            raise InvalidCommand("policy: give an extraction limit or an until date, not both")
        if limit is not None:
            return cls("count", limit=limit)
        if until is not None:
            return cls("until", until=until)
        return cls()

    def as_dict(self) -> dict[str, object]:
        return {"kind": self.kind, "limit": self.limit, "until": self.until}

    @classmethod
    def from_dict(cls, d: dict[str, object]) -> ExtractionPolicy:
        until = d.get("until")
        limit = d.get("limit")
        return cls(
            str(d.get("kind", "indefinite")),  # type: ignore[arg-type]
            limit=int(limit) if isinstance(limit, int) else None,
            until=until if isinstance(until, datetime) else None,
        )


class MessageState(StrEnum):
    INCOMPLETE = "incomplete"
    ACTIVE = "active"
    EXPIRED = "expired"
    DELETED = "deleted"
    EXPUNGED = "expunged"
    PURGED = "purged"
