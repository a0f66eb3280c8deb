"""Erasure intents in the log's PostgreSQL database (scale-out: many hosts, one store; ADR
0084): one row of ``letterlog_erasure_intents`` each (``SharedIntents``), committed before
anything is appended, and held by a session advisory lock on a connection of its own for
as long as its process runs. A process that dies lets go of it at once (its kernel closes
the connection); a host that vanishes lets go of it once the server's TCP keepalives (set
on that session: ``KEEPALIVE_IDLE``, ``KEEPALIVE_INTERVAL``, ``KEEPALIVE_COUNT``) find it
gone, within ``RELEASE_BOUND`` seconds; then any host's next command takes it over. Intent
files a scale-out host wrote before are still read and finished there (``SharedIntents``
lists both)."""

from __future__ import annotations

import contextlib
import json
import math
import os
import socket
import time
import zlib
from typing import Any

import psycopg
from psycopg.errors import UndefinedTable

from adapters.eventlog.schemalock import SCHEMA_LOCK_KEY
from adapters.lifecycle.intentfiles import Held, Intents, _Fields, _Holding

TABLE = "letterlog_erasure_intents"
LOCK_CLASS = zlib.crc32(b"letterlog erasure intent") & 0x7FFFFFFF
"""The first key of an intent's advisory lock (the second: its id); the two-key form never
meets the one-key locks of the schema (``adapters.eventlog.schemalock.SCHEMA_LOCK_KEY``)."""
KEEPALIVE_IDLE, KEEPALIVE_INTERVAL, KEEPALIVE_COUNT = 10, 5, 3
"""The server's TCP keepalives on a holding session (seconds idle, seconds between probes,
probes unanswered): a host gone without closing its connection is found gone after them."""
RELEASE_BOUND = KEEPALIVE_IDLE + KEEPALIVE_INTERVAL * KEEPALIVE_COUNT
"""Seconds from a host's loss until its intents' locks are let go (25); a process killed on
a living host lets go at once (its kernel closes the connection)."""
CONNECT_TIMEOUT = 10


class SharedIntent(_Fields):
    """One row of ``letterlog_erasure_intents``, locked by this process's session until
    ``finish`` or ``release``."""

    def __init__(self, owner: SharedIntents, conn: Any, intent_id: int,
                 body: dict[str, Any]) -> None:
        self._owner, self._conn, self.id, self.body = owner, conn, intent_id, body

    def finish(self) -> None:
        """Done: the row deleted (committed), then the lock let go with the session."""
        try:
            self._conn.execute(f"DELETE FROM {TABLE} WHERE id = %s", (self.id,))  # noqa: S608
        except (psycopg.OperationalError, psycopg.InterfaceError):
            # the session was cut (a server restart): the lock went with it, so another
            # host may be finishing the same steps (each idempotent); the row goes anyway
            with self._owner.connect() as conn:
                conn.execute(f"DELETE FROM {TABLE} WHERE id = %s", (self.id,))  # noqa: S608
        self.release()

    def release(self) -> None:
        """Not done (an error, not a crash): the row stays for whoever comes next."""
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()  # the advisory lock goes with the session
            self._conn = None


class SharedIntents(_Holding):
    """The intents of a store whose log is in PostgreSQL: rows in the log's database, each
    held by a session advisory lock (``LOCK_CLASS``, its id); and the intent files this
    host's data directory may still hold from before (read and finished, never written)."""

    def __init__(self, dsn: str, data: str | os.PathLike[str], *,
                 timeout: float = CONNECT_TIMEOUT) -> None:
        self.dsn = dsn
        self.files = Intents(data)
        self.timeout = max(2, math.ceil(timeout))  # libpq: whole seconds, at least 2

    def connect(self) -> Any:
        """A session of its own, its server-side TCP keepalives short (``RELEASE_BOUND``),
        and libpq's too (this side finds a vanished server as soon)."""
        conn = psycopg.connect(
            self.dsn, autocommit=True, connect_timeout=self.timeout, keepalives=1,
            keepalives_idle=KEEPALIVE_IDLE, keepalives_interval=KEEPALIVE_INTERVAL,
            keepalives_count=KEEPALIVE_COUNT, application_name="letterlog erasure intent")
        # tcp_user_timeout too: keepalive probes are not sent while the server has data the
        # vanished host never acknowledged (retransmissions then last ~15 minutes); the user
        # timeout bounds both cases
        for name, value in (("tcp_keepalives_idle", KEEPALIVE_IDLE),
                            ("tcp_keepalives_interval", KEEPALIVE_INTERVAL),
                            ("tcp_keepalives_count", KEEPALIVE_COUNT),
                            ("tcp_user_timeout", RELEASE_BOUND * 1000)):
            conn.execute(f"SET {name} = {int(value)}")
        return conn

    def _rows(self, conn: Any) -> list[tuple[int, dict[str, Any]]]:
        """Every intent row, oldest first; none while the table was never made."""
        try:
            rows = conn.execute(f"SELECT id, body FROM {TABLE} ORDER BY id").fetchall()  # noqa: S608
        except UndefinedTable:
            return []
        return [(int(i), b if isinstance(b, dict) else {}) for i, b in rows]

    def any(self) -> bool:
        """Whether any intent exists (one query; the files of before too)."""
        if self.files.any():
            return True
        with self.connect() as conn:
            try:
                return bool(conn.execute(f"SELECT EXISTS (SELECT 1 FROM {TABLE})").fetchone()[0])  # noqa: S608
            except UndefinedTable:
                return False

    def begin(self, kind: str, position: int, **fields: Any) -> SharedIntent:
        """A new intent, committed, and locked by this session before any other session
        can see it (the lock is taken in the inserting transaction)."""
        body = {"kind": kind, "position": position, "began": time.time(),
                "host": socket.gethostname(), "pid": os.getpid(), **fields}
        conn = self.connect()
        try:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK_KEY,))
                conn.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} (id integer GENERATED "
                             "ALWAYS AS IDENTITY PRIMARY KEY, body jsonb NOT NULL)")
            with conn.transaction():
                (intent_id,) = conn.execute(
                    f"INSERT INTO {TABLE} (body) VALUES (%s::jsonb) RETURNING id",  # noqa: S608
                    (json.dumps(body),)).fetchone()
                conn.execute("SELECT pg_advisory_lock(%s, %s)", (LOCK_CLASS, intent_id))
        except BaseException:
            conn.close()
            raise
        return SharedIntent(self, conn, int(intent_id), body)

    def abandoned(self) -> list[Held]:
        """The intents no live session holds (their process or host is gone), each locked
        now by a session of this process; the caller finishes or releases each. The files
        of before first."""
        out: list[Held] = list(self.files.abandoned())
        with self.connect() as probe:
            rows = self._rows(probe)
        for intent_id, _ in rows:
            conn = self.connect()
            taken = False
            try:
                got = conn.execute("SELECT pg_try_advisory_lock(%s, %s)",
                                   (LOCK_CLASS, intent_id)).fetchone()[0]
                found = got and conn.execute(
                    f"SELECT body FROM {TABLE} WHERE id = %s", (intent_id,)).fetchone()  # noqa: S608
                if found:  # not finished between our read and our lock
                    body = found[0] if isinstance(found[0], dict) else {}
                    out.append(SharedIntent(self, conn, intent_id, body))
                    taken = True
            finally:
                if not taken:
                    conn.close()
        return out

    def listing(self) -> list[dict[str, Any]]:
        """Every intent (``erase status``), as ``Intents.listing``; ``running``: a live
        session holds it (on this host or another)."""
        out = self.files.listing()
        with self.connect() as conn:
            for intent_id, body in self._rows(conn):
                free = conn.execute("SELECT pg_try_advisory_lock(%s, %s)",
                                    (LOCK_CLASS, intent_id)).fetchone()[0]
                if free:
                    conn.execute("SELECT pg_advisory_unlock(%s, %s)", (LOCK_CLASS, intent_id))
                out.append({"kind": body.get("kind", "?"), "position": body.get("position", 0),
                            "began": body.get("began", 0.0), "running": not free,
                            "host": body.get("host", "?"),
                            "messages": len(body.get("messages", []))})
        return out
