"""``\\Recent`` (RFC 3501 2.3.2): a message is recent to exactly one session, the first
to see it with its mailbox selected read-write. The claims are kept per mailbox (its first
UID not yet claimed) in a small SQLite file beside the store (``DATA/imap-recent.sqlite``,
0600), shared by every IMAP server process of the host and kept across restarts; servers
on other hosts keep their own (a message may then be recent once per host).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from adapters.files.filemodes import private_file

NAME = "imap-recent.sqlite"


class RecentClaims:
    def __init__(self, data: Path) -> None:
        path = private_file(Path(data) / NAME)
        self._db = sqlite3.connect(str(path), timeout=30, isolation_level=None,
                                   check_same_thread=False)
        self._db.execute("PRAGMA synchronous=OFF")  # state of the sessions, not mail
        self._db.execute("CREATE TABLE IF NOT EXISTS recent (mailbox TEXT PRIMARY KEY, "
                         "first INTEGER NOT NULL)")

    def first(self, mailbox: str) -> int:
        row = self._db.execute("SELECT first FROM recent WHERE mailbox = ?",
                               (mailbox,)).fetchone()
        return int(row[0]) if row else 1

    def claim(self, mailbox: str, uids: list[int], *, claim: bool) -> set[int]:
        """Of ``uids``, those recent to the asking session; with ``claim`` they are then
        no other session's."""
        if not claim:
            start = self.first(mailbox)
            return {u for u in uids if u >= start}
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            start = self.first(mailbox)
            mine = {u for u in uids if u >= start}
            if uids and max(uids) + 1 > start:
                db.execute("INSERT INTO recent (mailbox, first) VALUES (?, ?) ON CONFLICT"
                           "(mailbox) DO UPDATE SET first = excluded.first",
                           (mailbox, max(uids) + 1))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return mine

    def close(self) -> None:
        self._db.close()
