"""Where the outbox relay has published up to (``adapters.streaming.relay``): a file beside
an SQLite log, or a row in a PostgreSQL log's database; each held by one relay at a time
(``RelayBusy`` for a second one).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Protocol

from adapters.eventlog.schemalock import SCHEMA_LOCK_KEY
from adapters.files.filemodes import create_private, private_dir, private_file
from domain.errors import LetterlogError

try:  # the postgres extra: a relay on an SQLite log runs without it
    import psycopg
    import psycopg_pool
except ImportError:  # pragma: no cover - the test extras install it
    POSTGRES_TRANSIENT: tuple[type[BaseException], ...] = ()
else:
    POSTGRES_TRANSIENT = (psycopg.OperationalError, psycopg.InterfaceError,
                          psycopg_pool.PoolTimeout)
    """What a PostgreSQL log raises while its server is away (the relay waits it out)."""


class RelayError(LetterlogError):
    """The relay cannot go on: unreadable position, log out of order, topic not creatable..."""


class RelayBusy(RelayError):
    """Another relay already publishes from this position (one relay per topic and log)."""


# --------------------------------------------------------------------------- positions


class RelayPosition(Protocol):
    """The last position whose event the broker acknowledged (0: nothing yet)."""

    def load(self) -> int: ...

    def save(self, position: int) -> None: ...

    def acquire(self) -> None:
        """Take the exclusive right to publish from this position (``RelayBusy`` if taken)."""

    def release(self) -> None: ...


class FilePosition:
    """A small JSON file beside the data, replaced atomically (write, fsync, rename, fsync dir).

    ``acquire`` holds an ``flock`` on ``<file>.lock`` so two relays never share a position.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock: IO[str] | None = None

    def __repr__(self) -> str:
        return f"FilePosition({str(self.path)!r})"

    def load(self) -> int:
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return 0
        try:
            position = json.loads(text)["position"]
            if not isinstance(position, int) or isinstance(position, bool) or position < 0:
                raise ValueError(f"position {position!r} is not a non-negative integer")
        except Exception as e:
            raise RelayError(f"relay position file {self.path} is unreadable ({e}): "
                             f"{text[:80]!r}; fix or remove it (removing republishes "
                             f"everything)") from None
        return position

    def save(self, position: int) -> None:
        private_dir(self.path.parent)
        body = json.dumps({"position": int(position),
                           "saved_at": datetime.now(UTC).isoformat()}).encode() + b"\n"
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        tmp.unlink(missing_ok=True)  # left by a crash of a process with this pid
        fd = create_private(tmp)
        try:
            view = memoryview(body)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        dfd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)

    def acquire(self) -> None:
        if self._lock is not None:
            return
        private_dir(self.path.parent)
        lock = private_file(self.path.with_name(self.path.name + ".lock"))
        fh = open(lock, "a+")  # noqa: SIM115
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.close()
            raise RelayBusy(f"another relay holds {self.path}.lock") from None
        self._lock = fh

    def release(self) -> None:
        if self._lock is not None:
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            self._lock.close()
            self._lock = None


class PostgresPosition:
    """A row of ``letterlog_relay_positions`` in the event store's own database.

    ``acquire`` takes a session advisory lock on a connection the position keeps open.
    """

    TABLE = "letterlog_relay_positions"

    def __init__(self, dsn: str, name: str) -> None:
        self.dsn = dsn
        self.name = name
        self._conn: Any = None
        self._locked = False
        digest = hashlib.blake2b(f"letterlog-relay:{name}".encode(), digest_size=8).digest()
        self._lock_key = int.from_bytes(digest, "big", signed=True)

    def __repr__(self) -> str:
        return f"PostgresPosition(name={self.name!r})"

    def _connect(self) -> Any:
        if self._conn is not None and not self._conn.closed:
            return self._conn
        conn = psycopg.connect(self.dsn, autocommit=True, connect_timeout=30)
        # CREATE TABLE IF NOT EXISTS is not safe against itself (two relays starting at once,
        # on two hosts: DuplicateObject on pg_type): serialised with letterlog's schema
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK_KEY,))
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {self.TABLE} (name text PRIMARY KEY, "
                "position bigint NOT NULL, saved_at timestamptz NOT NULL DEFAULT now())"
            )
        self._conn = conn
        if self._locked:  # the session (and its advisory lock) was lost: take it again
            self._locked = False
            self.acquire()
        return conn

    def _run(self, sql: str, params: tuple[Any, ...]) -> Any:
        try:
            return self._connect().execute(sql, params).fetchone()
        except psycopg.OperationalError:
            # a dropped connection: reconnect once (re-taking the lock), then let it raise
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None
            return self._connect().execute(sql, params).fetchone()

    def load(self) -> int:
        row = self._run(f"SELECT position FROM {self.TABLE} WHERE name = %s", (self.name,))
        return int(row[0]) if row else 0

    def save(self, position: int) -> None:
        self._run(
            f"INSERT INTO {self.TABLE} (name, position) VALUES (%s, %s) ON CONFLICT (name) "
            "DO UPDATE SET position = EXCLUDED.position, saved_at = now() RETURNING position",
            (self.name, int(position)),
        )

    def acquire(self) -> None:
        if self._locked:
            return
        row = self._connect().execute("SELECT pg_try_advisory_lock(%s)",
                                      (self._lock_key,)).fetchone()
        if not row or not row[0]:
            raise RelayBusy(f"another relay holds the PostgreSQL position {self.name!r}")
        self._locked = True

    def release(self) -> None:
        """The lock given back before the session ends: a session's end drops its advisory
        locks only once the server has noticed it, so a relay started right after this one
        stopped could otherwise still find the position held."""
        locked, self._locked = self._locked, False
        if self._conn is not None:
            with contextlib.suppress(Exception):
                if locked and not self._conn.closed:
                    self._conn.execute("SELECT pg_advisory_unlock(%s)", (self._lock_key,))
            with contextlib.suppress(Exception):
                self._conn.close()  # ends the session (and any lock a failed unlock left)
            self._conn = None


