"""Value types of the mail domain: natural keys, account addresses, mailbox names and
roles, labels, a message's state (flags and keywords: ``flags``; the extraction policy:
``extraction_policy``).

Validation lives in these modules so that every entry point (API, CLI, Kafka, Spark)
shares it.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from enum import StrEnum
from functools import lru_cache

from domain.errors import InvalidCommand
from domain.identity import canonical_name
from domain.speedups import uuid_of_int

# The hierarchy delimiter of mailbox names (RFC 3501 LIST's delimiter): ``Archive/2024`` is an
# inferior of ``Archive``; rename and delete act on the hierarchy it makes.
DELIMITER = "/"
_MAILBOX_NAME = re.compile(r"^[^\x00-\x1f\x7f]{1,500}$")
_LABEL = re.compile(r"^[^\x00-\x1f\x7f/]{1,200}$")

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


def validate_label(label: str) -> str:
    lab = (label or "").strip()
    if not _LABEL.match(lab):
        raise InvalidCommand(f"label: {label!r} is not a valid label")
    return lab


def validate_labels(labels: list[str] | tuple[str, ...] | frozenset[str]) -> frozenset[str]:
    return frozenset(validate_label(lab) for lab in labels)


class MessageState(StrEnum):
    INCOMPLETE = "incomplete"
    ACTIVE = "active"
    EXPIRED = "expired"
    DELETED = "deleted"
    EXPUNGED = "expunged"
    PURGED = "purged"
