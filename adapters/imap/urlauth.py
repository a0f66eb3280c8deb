"""URLAUTH (RFC 4467, RFC 5092 URLs) and URLAUTH=BINARY (RFC 5524): a user makes a URL of
one of its messages (or a part of it) that others may fetch with ``URLFETCH`` without
access to the mailbox.

``GENURLAUTH`` signs the URL with the ``INTERNAL`` mechanism: an HMAC-SHA256 of the URL
(up to and including ``;URLAUTH=<access>``) under a random key of the owner's mailbox,
written as 64 hex digits. The keys live in a small SQLite file beside the store
(``DATA/imap-urlauth.sqlite``, 0600; one key per user and mailbox), shared by the host's
server processes; ``RESETKEY`` replaces the user's key of a mailbox, and every URL the
user signed with the old one stops working. A URL is
fetched as its owner: the owner's face reads the message (its rights apply), so a URL dies
with the owner's right to read the message.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

from adapters.files.filemodes import private_file

NAME = "imap-urlauth.sqlite"
MECHANISM = "INTERNAL"

_URL = re.compile(
    r"^imap://(?P<user>[^@/;]+)@(?P<host>[^/:;]+)(?::\d+)?"
    r"/(?P<mailbox>[^;]*?)(?:;UIDVALIDITY=(?P<uidvalidity>\d+))?"
    r"/;UID=(?P<uid>\d+)(?:/;SECTION=(?P<section>[^/;]*))?"
    r"(?:/;PARTIAL=(?P<offset>\d+)(?:\.(?P<length>\d+))?)?"
    r"(?:;EXPIRE=(?P<expire>[^;]+))?"
    r";URLAUTH=(?P<access>[^:;]+)(?::(?P<mechanism>[^:;]+):(?P<token>[0-9A-Fa-f]+))?$",
    re.I)


class BadUrl(ValueError):
    """A URL this server cannot sign or fetch."""


@dataclass(frozen=True)
class Url:
    text: str          # as the client sent it
    user: str          # the owner's user name, decoded
    host: str
    mailbox: str       # decoded (the client's name: modified UTF-7 decoded later)
    uidvalidity: int | None
    uid: int
    section: str
    partial: tuple[int, int | None] | None
    access: str        # "authuser", "anonymous", "user+NAME", "submit+NAME"
    mechanism: str | None
    token: str | None

    @property
    def rump(self) -> str:
        """The URL as signed: up to and including ``;URLAUTH=<access>``."""
        return self.text[:self.text.upper().rindex(";URLAUTH=") + 9 + len(self.access)]

    def owned_by(self, user: str) -> bool:
        """Whether ``user`` owns the URL: the URL's user, or (for an address, as
        ``imap://ada@example.org/...`` writes it) the URL's user at the URL's host."""
        return user in (self.user, f"{self.user}@{self.host}")

    def owners(self) -> list[str]:
        """Who may own the URL: its user, and its user at its host (``owned_by``); only
        the one who signed it has a key that verifies it."""
        return [self.user] + ([f"{self.user}@{self.host}"] if "@" not in self.user else [])

    @property
    def mailbox_name(self) -> str:
        """The mailbox's name (RFC 5092: UTF-8, percent-decoded; INBOX in any case)."""
        return "INBOX" if self.mailbox.upper() == "INBOX" else self.mailbox

    def may_fetch(self, user: str) -> bool:
        """Whether ``user`` (logged in) may fetch the URL, by its access identifier."""
        access = self.access.lower()
        if access in ("authuser", "anonymous"):
            return True
        if access.startswith("user+"):
            return unquote(self.access[5:]) == user
        return False  # submit+: for a submission server this server is not


def parse(text: str) -> Url:
    m = _URL.match(text)
    if not m:
        raise BadUrl(f"not an IMAP URL with URLAUTH: {text!r}")
    offset = m.group("offset")
    return Url(text, unquote(m.group("user")), m.group("host"), unquote(m.group("mailbox")),
               int(m.group("uidvalidity")) if m.group("uidvalidity") else None,
               int(m.group("uid")), unquote(m.group("section") or ""),
               (int(offset), int(m.group("length")) if m.group("length") else None)
               if offset is not None else None,
               m.group("access"), m.group("mechanism"), m.group("token"))


class UrlKeys:
    """The mailboxes' URLAUTH keys (a mailbox is its owner's account, name and
    UIDVALIDITY: a mailbox made again under the same name has a new key)."""

    def __init__(self, data: Path) -> None:
        path = private_file(Path(data) / NAME)
        self._db = sqlite3.connect(str(path), timeout=30, isolation_level=None,
                                   check_same_thread=False)
        self._db.execute("CREATE TABLE IF NOT EXISTS keys (user TEXT NOT NULL, "
                         "account TEXT NOT NULL, name TEXT NOT NULL, "
                         "uidvalidity INTEGER NOT NULL, key BLOB NOT NULL, "
                         "PRIMARY KEY (user, account, name, uidvalidity))")

    def _key(self, mailbox: tuple[str, str, str, int], *, create: bool) -> bytes | None:
        where = "user = ? AND account = ? AND name = ? AND uidvalidity = ?"
        row = self._db.execute(f"SELECT key FROM keys WHERE {where}", mailbox).fetchone()
        if row is not None:
            return bytes(row[0])
        if not create:
            return None
        self._db.execute("INSERT OR IGNORE INTO keys (user, account, name, uidvalidity, key) "
                         "VALUES (?, ?, ?, ?, ?)", (*mailbox, secrets.token_bytes(32)))
        return self._key(mailbox, create=False)

    def sign(self, mailbox: tuple[str, str, str, int], url: Url) -> str:
        """The URL with its ``:INTERNAL:<token>`` (``mailbox``: the URL's owner, and the
        account, name and UIDVALIDITY of the message's mailbox)."""
        key = self._key(mailbox, create=True)
        assert key is not None
        return f"{url.rump}:{MECHANISM}:{_token(key, url.rump)}"

    def verify(self, mailbox: tuple[str, str, str, int], url: Url) -> bool:
        key = self._key(mailbox, create=False)
        if key is None or url.token is None or (url.mechanism or "").upper() != MECHANISM:
            return False
        return hmac.compare_digest(_token(key, url.rump), url.token.lower())

    def reset(self, user: str, mailbox: tuple[str, str] | None = None) -> None:
        """New keys for ``user``'s URLs of a mailbox (account and name; without it, of
        every mailbox): the URLs signed with the old ones stop working."""
        if mailbox is None:
            self._db.execute("DELETE FROM keys WHERE user = ?", (user,))
        else:
            self._db.execute("DELETE FROM keys WHERE user = ? AND account = ? AND name = ?",
                             (user, *mailbox))

    def close(self) -> None:
        self._db.close()


def _token(key: bytes, rump: str) -> str:
    return hmac.new(key, rump.encode("utf-8"), hashlib.sha256).hexdigest()
