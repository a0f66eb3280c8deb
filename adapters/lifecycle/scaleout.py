"""Completing erasures on the scale-out deployment (stream workers projecting into HBase).

On scale-out, ``erase-message`` and ``erase-account`` append ``Message.Purged`` and destroy
the data keys at once, but the read-model rows are deleted later, by the stream workers,
once the relay has published the events and the workers have applied them. Two things can
only be decided after that:

- the payloads: whether another live message still refers to an erased message's payload
  is read from ``payload_refs``, a log-derived index that holds the erasure only once the
  workers have applied the ``Purged`` events (reading it earlier sees the erased message's
  own reference and keeps the payload);
- HBase's files: the workers' deletes (and the payloads' rows deleted from HBase's payload
  table, ADR 0072) are first in the region server's memstore and write-ahead log; the
  tables are flushed, then major-compacted (HBase's own
  ``MajorCompactor`` tool, which requests the compaction region by region and waits until
  no store file older than the request is left; Thrift1's ``majorCompact`` only requests a
  minor compaction on HBase 2.6).

So an erasure records what it owes (when, the log position of its last event, the payloads'
SHA-256, how many messages; no message id, no content): with the log in PostgreSQL, as a row
of ``letterlog_scaleout_pending`` in the log's database (``SharedPending``), which any host's
``erase complete`` finishes, the host that erased being gone or not; else in
``<data>/erasures-scaleout/`` (one JSON file each, ``ScaleOutPending``). ``letterlog erase
complete`` (``complete``) finishes every record: it waits,
within a bound, for the relay and the workers to pass the recorded positions, deletes each
payload nothing refers to any more and that no delivery re-used since the erasure began,
flushes and major-compacts the tables a purge deletes from, and removes the records.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shlex
import subprocess
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from adapters.eventlog.keypostgres import SCHEMA_LOCK_KEY
from adapters.files.filemodes import create_private, private_dir, private_file
from adapters.payloads.hbase import TABLE as PAYLOADS
from adapters.readside.views import erased_view_tables
from projections import names as pn
from projections.keys import payload_row

PENDING_DIR = "erasures-scaleout"
PURGES = "purges.json"

Progress = Callable[[str], None]
ReadSide = Callable[[int, float], str]  # (target position, deadline) -> '' or why not


class CompactionFailed(RuntimeError):
    """HBase's major compaction did not finish (the tool failed or timed out)."""


class ScaleOutPending:
    """``<data>/erasures-scaleout/``: one JSON record per erasure not yet completed."""

    def __init__(self, data: str | os.PathLike[str]) -> None:
        self.dir = Path(data) / PENDING_DIR

    def records(self) -> list[tuple[Path, dict[str, Any]]]:
        if not self.dir.is_dir():
            return []
        found = []
        for path in sorted(self.dir.glob("*.json")):
            try:
                found.append((path, json.loads(path.read_text())))
            except (OSError, ValueError):
                continue  # removed meanwhile
        return found

    def record(self, *, position: int, began: float, payloads: Iterable[str],
               messages: int) -> Path:
        """One erasure: a record of its own."""
        now = datetime.now(UTC)
        path = self.dir / f"{now.strftime('%Y%m%dT%H%M%S%f')}-{uuid.uuid4().hex[:8]}.json"
        with self._locked():
            self._write(path, {"since": now.isoformat(), "position": position, "began": began,
                               "messages": messages, "payloads": sorted(set(payloads))})
        return path

    def record_purge(self, *, position: int, messages: int) -> Path:
        """Purge runs (no payloads: those keep their grace period; the payloads a run
        deleted from HBase are compacted by the same completion) share one record,
        ``purges.json``, which grows until ``complete`` clears it (a purger's batches do not
        make a file each)."""
        path = self.dir / PURGES
        with self._locked():
            try:
                found = json.loads(path.read_text())
            except (OSError, ValueError):
                found = {"since": datetime.now(UTC).isoformat(), "position": 0, "began": 0.0,
                         "messages": 0, "payloads": []}
            found["position"] = max(int(found["position"]), position)
            found["messages"] = int(found["messages"]) + messages
            self._write(path, found)
        return path

    def clear(self, records: Iterable[tuple[Path, dict[str, Any]]]) -> int:
        """Removes the records ``complete`` finished, unless one changed since it was read
        (a purge added to ``purges.json`` meanwhile: then it stays for the next run)."""
        cleared = 0
        with self._locked():
            for path, seen in records:
                try:
                    if json.loads(path.read_text()) != seen:
                        continue
                    path.unlink()
                except (OSError, ValueError):
                    continue
                cleared += 1
        return cleared

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        private_dir(self.dir)
        fd = os.open(private_file(self.dir / ".lock"), os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _write(self, path: Path, body: dict[str, Any]) -> None:
        tmp = self.dir / f".{path.name}.{uuid.uuid4().hex[:8]}.tmp"
        fd = create_private(tmp)
        try:
            os.write(fd, json.dumps(body).encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)


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
        # local: psycopg, a client library, loaded only when this runs
        import psycopg

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
        # local: psycopg, a client library, loaded only when this runs
        from psycopg.errors import UndefinedTable

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


def pending_records(settings: Any) -> ScaleOutPending | SharedPending:
    """Where this deployment keeps what its erasures owe: the log's PostgreSQL database when
    the log is there (every host sees them), else the data directory."""
    if settings.event_store == "postgres" and settings.postgres_dsn:
        return SharedPending(settings.postgres_dsn, settings.data,
                             timeout=settings.postgres_timeout)
    return ScaleOutPending(settings.data)


@dataclass
class ScaleOutCompletion:
    """What ``complete`` did."""

    complete: bool = True
    pending: int = 0  # records found
    position: int = 0  # the log position the workers were waited for
    workers_reached: bool = True
    waited_seconds: float = 0.0
    payloads_freed: int = 0
    payload_bytes_freed: int = 0
    payloads_kept: int = 0  # still referred to, or re-used since the erasure began
    tables_compacted: list[str] = field(default_factory=list)
    compaction_seconds: float = 0.0
    pending_cleared: int = 0
    problem: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def line(self) -> str:
        if not self.pending:
            return "scale-out: no erasure pending"
        if not self.complete:
            return f"scale-out: erasure not complete: {self.problem}"
        return (f"scale-out: {self.pending_cleared} erasure(s) completed: workers at position "
                f"{self.position} (waited {self.waited_seconds:.1f} s); freed "
                f"{self.payloads_freed} payloads ({self.payload_bytes_freed} bytes), kept "
                f"{self.payloads_kept}; flushed and major-compacted "
                f"{len(self.tables_compacted)} tables in {self.compaction_seconds:.1f} s")


# -- HBase -----------------------------------------------------------------------------------
def major_compact(command: str, tables: list[str], *, deadline: float,
                  progress: Progress) -> None:
    """Major-compacts the HBase tables with HBase's ``MajorCompactor`` tool (``command``: how
    to run it, e.g. ``hbase org.apache.hadoop.hbase.util.compaction.MajorCompactor``), one
    process per table, all at once: every store holding a file older than the request is
    compacted region by region; the tool then waits for the region server to discharge the
    compacted files (``hbase.hfile.compaction.discharger.interval``, 2 min by default),
    checks that no older file is left, and exits 0. ``CompactionFailed`` if one fails or the
    deadline passes."""
    base = shlex.split(command)
    since = str(int(time.time() * 1000))
    progress(f"major-compacting {len(tables)} tables: {', '.join(tables)}")
    running: dict[str, subprocess.Popen[str]] = {}
    try:
        for table in tables:
            try:
                running[table] = subprocess.Popen(
                    [*base, "-table", table, "-servers", "1", "-sleep", "1000",
                     "-minModTime", since],
                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            except OSError as error:
                raise CompactionFailed(f"cannot run {base[0]!r} (LETTERLOG_HBASE_COMPACTOR): "
                                       f"{error.strerror}") from None
        for table, proc in running.items():
            try:
                _, err = proc.communicate(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise CompactionFailed(f"compacting {table} did not finish in time") from None
            if proc.returncode != 0:
                tail = " | ".join((err or "").strip().splitlines()[-3:])
                raise CompactionFailed(f"compacting {table}: exit {proc.returncode}: {tail}")
            progress(f"compacted {table}")
    finally:
        for proc in running.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()


# -- completion ------------------------------------------------------------------------------
def record_erasure(store: Any, payloads: Iterable[str], began: float, messages: int) -> None:
    """An erasure (or purge) on scale-out: what ``complete`` must still do (one without
    payloads, as a purge run's batch, goes into the shared ``purges.json``)."""
    pending = pending_records(store.settings)
    payloads = list(payloads)
    if payloads:
        pending.record(position=store.max_position(), began=began, payloads=payloads,
                       messages=messages)
    else:
        pending.record_purge(position=store.max_position(), messages=messages)


def pending(store: Any) -> list[dict[str, Any]]:
    """The records not yet completed (``letterlog erase status``), without payload hashes."""
    return [{"since": r["since"], "position": r["position"], "messages": r["messages"],
             "payloads": len(r.get("payloads", []))}
            for _, r in pending_records(store.settings).records()]


def complete(store: Any, *, wait: float, read_side: ReadSide,
             progress: Progress = lambda _: None) -> ScaleOutCompletion:
    """Finishes every pending scale-out erasure within ``wait`` seconds (module docstring).
    ``read_side(target, deadline)`` waits until the relay and the workers have applied the
    log up to ``target`` or ``deadline`` (``time.monotonic``) passes: '' when they have,
    else why not (``adapters.streaming.lag.wait_until_applied``)."""
    settings = store.settings
    records = pending_records(settings).records()
    outcome = ScaleOutCompletion(pending=len(records))
    if not records:
        return outcome
    began = time.monotonic()
    deadline = began + wait
    outcome.position = max(int(r["position"]) for _, r in records)
    problem = read_side(outcome.position, deadline)
    outcome.waited_seconds = round(time.monotonic() - began, 3)
    if problem:
        outcome.complete, outcome.workers_reached, outcome.problem = False, False, problem
        return outcome
    host = store.projections
    tables = host.tables
    refs = host.physical(pn.PAYLOAD_REFS)
    for _, r in records:
        for sha in r.get("payloads", []):
            freed = None
            if not tables.get(refs, payload_row(sha)):
                freed = store.payloads.delete_unless_touched(sha, float(r["began"]))
            if freed is None:
                outcome.payloads_kept += 1
            else:
                outcome.payloads_freed += 1
                outcome.payload_bytes_freed += freed

    # saved views lost the purged rows at the erasure (Shredding.erase_from_views)
    names = [host.physical(t) for t in pn.PURGED_FROM] + erased_view_tables(tables)

    if settings.payloads_in_hbase() and tables.table_exists(PAYLOADS):  # created on first use
        names.append(PAYLOADS)  # the payloads deleted above, and by purge runs
    compacted = time.monotonic()
    try:
        progress(f"flushing {len(names)} tables")
        if not tables.flush(names):
            raise CompactionFailed("no Thrift2 gateway (LETTERLOG_HBASE_THRIFT2_PORT): the "
                                   "memstores holding the deletes cannot be flushed")
        hbase_names = [tables.physical_name(name) for name in names]
        major_compact(settings.hbase_compactor, hbase_names, deadline=deadline,
                      progress=progress)
    except CompactionFailed as error:
        outcome.complete, outcome.problem = False, str(error)
        return outcome
    outcome.compaction_seconds = round(time.monotonic() - compacted, 3)
    outcome.tables_compacted = hbase_names
    outcome.pending_cleared = pending_records(settings).clear(records)
    return outcome
