"""What erasures on scale-out still owe, as rows of ``letterlog_scaleout_pending`` in the
log's PostgreSQL database (``SharedPending``), so that no host's disk holds it and any
host's ``erase complete`` finishes it, the host that erased being gone or not."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from psycopg.errors import UndefinedTable

from adapters.eventlog.schemalock import SCHEMA_LOCK_KEY
from adapters.lifecycle.scaleoutrecords import ScaleOutPending

SHARED_TABLE = "letterlog_scaleout_pending"


class SharedPending:
    """The records in the log's PostgreSQL database (one row each, ``kind`` ``erase`` or the
    one ``purges`` row purge runs share), so that no host's disk holds what an erasure still
    owes; the files this host's data directory may hold from before are read and cleared
    too (never written)."""

    def __init__(self, dsn: str, data: str | os.PathLike[str], *, timeout: float = 10) -> None:
        self.dsn, self.files = dsn, ScaleOutPending(data)
        self.timeout = max(2, int(timeout))

    def _connect(self) -> Any:
        return psycopg.connect(self.dsn, autocommit=True, connect_timeout=self.timeout,
                               application_name="letterlog erasure completion")

    def _ensure(self, conn: Any) -> None:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK_KEY,))
            conn.execute(f"CREATE TABLE IF NOT EXISTS {SHARED_TABLE} (id bigint GENERATED "
                         "ALWAYS AS IDENTITY PRIMARY KEY, kind text NOT NULL, "
                         "body jsonb NOT NULL)")
            conn.execute(f"CREATE UNIQUE INDEX IF NOT EXISTS {SHARED_TABLE}_purges ON "
                         f"{SHARED_TABLE} (kind) WHERE kind = 'purges'")

    def records(self) -> list[tuple[Any, dict[str, Any]]]:
        found: list[tuple[Any, dict[str, Any]]] = list(self.files.records())
        with self._connect() as conn:
            try:
                rows = conn.execute(f"SELECT id, body FROM {SHARED_TABLE} "  # noqa: S608
                                    "ORDER BY id").fetchall()
            except UndefinedTable:
                rows = []
        return found + [(int(i), dict(b)) for i, b in rows]

    def record(self, *, position: int, began: float, payloads: Iterable[str],
               messages: int) -> int:
        body = {"since": datetime.now(UTC).isoformat(), "position": position, "began": began,
                "messages": messages, "payloads": sorted(set(payloads))}
        with self._connect() as conn:
            self._ensure(conn)
            (row,) = conn.execute(f"INSERT INTO {SHARED_TABLE} (kind, body) VALUES "  # noqa: S608
                                  "('erase', %s::jsonb) RETURNING id",
                                  (json.dumps(body),)).fetchone()
        return int(row)

    def record_purge(self, *, position: int, messages: int) -> int:
        body = {"since": datetime.now(UTC).isoformat(), "position": position, "began": 0.0,
                "messages": messages, "payloads": []}
        with self._connect() as conn:
            self._ensure(conn)
            (row,) = conn.execute(
                f"INSERT INTO {SHARED_TABLE} AS p (kind, body) VALUES ('purges', %s::jsonb) "  # noqa: S608
                "ON CONFLICT (kind) WHERE kind = 'purges' DO UPDATE SET body = "
                "p.body || jsonb_build_object('position', GREATEST((p.body->>'position')::bigint,"
                " %s), 'messages', (p.body->>'messages')::bigint + %s) RETURNING id",
                (json.dumps(body), position, messages)).fetchone()
        return int(row)

    def clear(self, records: Iterable[tuple[Any, dict[str, Any]]]) -> int:
        """Removes the records ``complete`` finished, unless one changed since it was read
        (purges added to the shared row meanwhile: it stays for the next run)."""
        records = list(records)
        cleared = self.files.clear([(k, r) for k, r in records if isinstance(k, Path)])
        rows = [(k, r) for k, r in records if not isinstance(k, Path)]
        if rows:
            with self._connect() as conn:
                for row_id, seen in rows:
                    done = conn.execute(f"DELETE FROM {SHARED_TABLE} WHERE id = %s AND "  # noqa: S608
                                        "body = %s::jsonb", (row_id, json.dumps(seen)))
                    cleared += done.rowcount
        return cleared
