"""Erasure intents: what a purge run or an erasure must finish, durable before it starts.

An erasure (``erase-message``, ``erase-account``, the erasures a restore makes again) or a
purge run writes one small JSON file in ``<data>/erasures-intent/`` *before* it appends
anything, fsyncs it and its directory, and holds an exclusive ``flock`` on it while it runs:

- ``kind``: ``erase`` (the message ids asked for), ``erase-account`` (the account's id) or
  ``purge``;
- ``position``: the log's head when it began: every ``Message.Purged`` it appends comes
  after it;
- ``began``: when (payloads re-used since are kept).

Once every step is done (``Purged`` appended, the data keys destroyed and their KEKs gone
from the vault, the payloads deleted or their grace started, the SQLite files
checkpointed) the file is removed. A process killed on the way leaves the file, and the
kernel lets go of its lock: whoever opens the store next (any command, ``erase status``,
``erase complete``, ``purge run``, the ``purger``) takes the lock without waiting and
finishes it (``adapters.facade.erasure``): an erasure is made again from its ids (every
step is idempotent), and every ``Purged`` after the position has its key destroyed. A file
whose lock is held belongs to a running process and is left to it (ADR 0063).

No content and no address: message and account ids only (the log holds them anyway).

With the log in PostgreSQL (scale-out: many hosts, one store) an intent is a row of
``letterlog_erasure_intents`` in the log's database instead (``SharedIntents``, ADR 0084):
committed before anything is appended, and held by a session advisory lock on a connection
of its own for as long as its process runs. A process that dies lets go of it at once (its
kernel closes the connection); a host that vanishes lets go of it once the server's TCP
keepalives (set on that session: ``KEEPALIVE_IDLE``, ``KEEPALIVE_INTERVAL``,
``KEEPALIVE_COUNT``) find it gone, within ``RELEASE_BOUND`` seconds; then any host's next
command takes it over. Intent files a scale-out host wrote before are still read and
finished there (``SharedIntents`` lists both).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import socket
import time
import uuid
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from adapters.files.filemodes import create_private, fsync_dir, private_dir

if TYPE_CHECKING:
    from adapters.config.settings import Settings

INTENT_DIR = "erasures-intent"


class Held(Protocol):
    """One intent held by this process: a file (``Intent``) or a row (``SharedIntent``)."""

    body: dict[str, Any]

    @property
    def kind(self) -> str: ...
    @property
    def position(self) -> int: ...
    @property
    def began(self) -> float: ...
    def finish(self) -> None: ...
    def release(self) -> None: ...


def of(settings: Settings) -> Intents | SharedIntents:
    """Where ``settings``' store keeps its intents: the log's PostgreSQL database on
    scale-out (every host sees them), ``<data>/erasures-intent/`` on the embedded store."""
    if settings.event_store == "postgres" and settings.postgres_dsn:
        return SharedIntents(settings.postgres_dsn, settings.data,
                             timeout=settings.postgres_timeout)
    return Intents(settings.data)


class _Fields:
    body: dict[str, Any]

    @property
    def kind(self) -> str:
        return str(self.body.get("kind", ""))

    @property
    def position(self) -> int:
        return int(self.body.get("position", 0))

    @property
    def began(self) -> float:
        return float(self.body.get("began", 0.0))


class _Holding:
    """``held`` over ``begin``: the intent removed when the block ends, left if it raises."""

    def begin(self, kind: str, position: int, **fields: Any) -> Held:
        raise NotImplementedError

    @contextlib.contextmanager
    def held(self, kind: str, position: int, **fields: Any) -> Iterator[Held]:
        """``begin``; removed when the block ends normally, left (unlocked) if it raises."""
        intent = self.begin(kind, position, **fields)
        try:
            yield intent
        except BaseException:
            intent.release()
            raise
        intent.finish()


@dataclass
class Intent(_Fields):
    """One intent, its file locked by this process until ``finish`` or ``release``."""

    path: Path
    fd: int
    body: dict[str, Any] = field(default_factory=dict)

    def finish(self) -> None:
        """Done: the file removed (durably), then its lock let go."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
            fsync_dir(self.path.parent)
        self.release()

    def release(self) -> None:
        """Not done (an error, not a crash): the file stays for whoever comes next."""
        if self.fd >= 0:
            os.close(self.fd)  # the lock goes with the descriptor
            self.fd = -1


class Intents(_Holding):
    """``<data>/erasures-intent/``."""

    def __init__(self, data: str | os.PathLike[str]) -> None:
        self.dir = Path(data) / INTENT_DIR

    def any(self) -> bool:
        """Whether any intent file exists (one ``listdir``: cheap enough for every open)."""
        try:
            return any(n.endswith(".json") for n in os.listdir(self.dir))
        except FileNotFoundError:
            return False

    def begin(self, kind: str, position: int, **fields: Any) -> Intent:
        """A new intent, durable (file and directory fsynced) and locked before it is
        visible under its final name."""
        private_dir(self.dir)
        name = f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        tmp = self.dir / f".{name}.tmp"
        body = {"kind": kind, "position": position, "began": time.time(), **fields}
        fd = create_private(tmp, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.write(fd, json.dumps(body).encode())
            os.fsync(fd)
            final = self.dir / f"{name}.json"
            os.replace(tmp, final)
            fsync_dir(self.dir)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            raise
        return Intent(final, fd, body)

    def abandoned(self) -> list[Intent]:
        """The intents no running process holds (their writer died), each locked now by
        this process; the caller finishes or releases each."""
        out = []
        for path in sorted(self.dir.glob("*.json")) if self.dir.is_dir() else []:
            try:
                fd = os.open(path, os.O_RDWR)
            except FileNotFoundError:
                continue  # finished meanwhile
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)  # a live process holds it: its own to finish
                continue
            if not path.exists():  # finished (removed) between our open and our lock
                os.close(fd)
                continue
            try:
                body = json.loads(os.pread(fd, 1 << 20, 0) or b"{}")
            except ValueError:
                body = {}
            out.append(Intent(path, fd, body if isinstance(body, dict) else {}))
        return out

    def listing(self) -> list[dict[str, Any]]:
        """Every intent (``erase status``): kind, position, began, and whether a live process
        holds it (``running``); ids are not listed."""
        out = []
        for path in sorted(self.dir.glob("*.json")) if self.dir.is_dir() else []:
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                continue
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                    running = False
                except BlockingIOError:
                    running = True
                try:
                    body = json.loads(os.pread(fd, 1 << 20, 0) or b"{}")
                except ValueError:
                    body = {}
            finally:
                os.close(fd)
            out.append({"kind": body.get("kind", "?"), "position": body.get("position", 0),
                        "began": body.get("began", 0.0), "running": running,
                        "messages": len(body.get("messages", []))})
        return out


# -- scale-out: the intents in the log's PostgreSQL database (ADR 0084) ---------------------

TABLE = "letterlog_erasure_intents"
LOCK_CLASS = zlib.crc32(b"letterlog erasure intent") & 0x7FFFFFFF
"""The first key of an intent's advisory lock (the second: its id); the two-key form never
meets the one-key locks of the schema (``adapters.eventlog.keypostgres.SCHEMA_LOCK_KEY``)."""
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
        # local: psycopg, a client library, loaded only when this runs
        import psycopg

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
        # local: psycopg, a client library, loaded only when this runs
        import psycopg

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
        # local: psycopg, a client library, loaded only when this runs
        from psycopg.errors import UndefinedTable

        try:
            rows = conn.execute(f"SELECT id, body FROM {TABLE} ORDER BY id").fetchall()  # noqa: S608
        except UndefinedTable:
            return []
        return [(int(i), b if isinstance(b, dict) else {}) for i, b in rows]

    def any(self) -> bool:
        """Whether any intent exists (one query; the files of before too)."""
        if self.files.any():
            return True
        # local: psycopg, a client library, loaded only when this runs
        from psycopg.errors import UndefinedTable

        with self.connect() as conn:
            try:
                return bool(conn.execute(f"SELECT EXISTS (SELECT 1 FROM {TABLE})").fetchone()[0])  # noqa: S608
            except UndefinedTable:
                return False

    def begin(self, kind: str, position: int, **fields: Any) -> SharedIntent:
        """A new intent, committed, and locked by this session before any other session
        can see it (the lock is taken in the inserting transaction)."""
        # local: start-up: 2 more module(s) for commands that never use it
        from adapters.eventlog.keypostgres import SCHEMA_LOCK_KEY

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
