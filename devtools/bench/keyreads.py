"""``letterlog bench keys``: reading sealed events, a data key read each (as before ADR 0117)
against a page's keys read in one query, on SQLite (``keys.sqlite``) and on PostgreSQL (the
scale-out key table, a throw-away server), alternated A B B A in the same run.

Each event is what a delivery of the bench's mail seals (its envelope, attachment names and
inline body, ``seal_personal`` with a key of the store's pool); reading it is the msgpack
decode with the extension hook every reader uses. The key table's reads are counted."""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from devtools.bench.common import bar_panels, load_avg

ROUNDS = 2


class CountedKeyTable:
    """A key table with its reads counted: of one key (``one``) and of many (``many``).
    ``wrap(store)`` puts it in front of ``store``'s table; ``unwrap()`` takes it away."""

    def __init__(self, table: Any) -> None:
        self.table, self.one, self.many = table, 0, 0

    @classmethod
    def wrap(cls, store: Any) -> CountedKeyTable:
        counted = store.table = cls(store.table)
        return counted

    def unwrap(self, store: Any) -> None:
        store.table = self.table

    @property
    def reads(self) -> int:
        return self.one + self.many

    def row(self, key_id: Any) -> Any:
        self.one += 1
        return self.table.row(key_id)

    def rows(self, key_ids: list[bytes]) -> Any:
        self.many += 1
        return self.table.rows(key_ids)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.table, name)


def _states(blobs: list[bytes], keys: Any) -> list[bytes]:
    from adapters.eventlog.transcoder import packb, seal_personal
    from domain.delivery import envelope_for_event
    from domain.personal import Personal
    from domain.rfc5322 import MessageLimits, inspect_message

    limits, states = MessageLimits(), []
    for blob in blobs:
        facts = inspect_message(blob, limits)
        personal = Personal({"envelope": envelope_for_event(facts),
                             "attachment_names": list(facts.attachment_names),
                             "body": blob if len(blob) <= 10 * 1024 else None})
        states.append(packb({"personal": seal_personal(personal, keys), "size": len(blob)}))
    return states


def _read(states: list[bytes], page: int, ahead: bool) -> None:
    import msgpack

    from adapters.eventlog.sealing import keys_read_ahead
    from adapters.eventlog.transcoder import ext_hook, ext_hook_for, sealed_key_ids

    for at in range(0, len(states), page):
        rows = states[at:at + page]
        hook = ext_hook_for(keys_read_ahead(sealed_key_ids(rows))) if ahead else ext_hook
        for state in rows:
            if msgpack.unpackb(state, ext_hook=hook, raw=False)["personal"].shredded:
                raise AssertionError("a live key read as destroyed")


def _legs(states: list[bytes], keys: Any, page: int,
          progress: Callable[[str], None], where: str) -> dict[str, Any]:
    counted = CountedKeyTable.wrap(keys)
    runs: dict[str, list[dict[str, float]]] = {"a_read_per_key": [], "a_read_per_page": []}
    try:
        for n in range(ROUNDS):
            for leg in (list(runs) if n % 2 == 0 else list(runs)[::-1]):  # A B, then B A
                progress(f"{where}, round {n + 1}: {leg.replace('_', ' ')}")
                counted.one = counted.many = 0
                wall, cpu = time.perf_counter(), time.process_time()
                _read(states, page, ahead=leg == "a_read_per_page")
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                runs[leg].append({"us_per_event": round(wall / len(states) * 1e6, 2),
                                  "cpu_us_per_event": round(cpu / len(states) * 1e6, 2),
                                  "key_table_reads": counted.reads})
    finally:
        counted.unwrap(keys)
    out: dict[str, Any] = {
        leg: {"us_per_event": round(statistics.median(r["us_per_event"] for r in rs), 2),
              "cpu_us_per_event": round(statistics.median(r["cpu_us_per_event"] for r in rs),
                                        2),
              "key_table_reads": rs[0]["key_table_reads"], "runs": rs}
        for leg, rs in runs.items()}
    out["speedup"] = round(out["a_read_per_key"]["us_per_event"]
                           / out["a_read_per_page"]["us_per_event"], 3)
    return out


def bench_key_reads(events: int = 5000, page: int = 500, *, plot: Path | None = None,
                    progress: Callable[[str], None] = lambda line: None) -> dict[str, Any]:
    from adapters.demo.benchmail import bench_messages
    from adapters.eventlog.keypostgres import PostgresKeyStore
    from adapters.eventlog.keysqlite import SqliteKeyStore
    from devtools.bench.scaleout import _database
    from devtools.devservers.postgres import PostgresServer

    blobs = bench_messages(events)
    result: dict[str, Any] = {"benchmark": "key-reads", "events": len(blobs), "page": page,
                              "load_average_before": load_avg()}
    with ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="letterlog-keys-")))
        progress("sealing the events (SQLite key store)")
        keys = SqliteKeyStore(tmp / "keys.sqlite", synchronous="NORMAL")
        stack.callback(keys.close)
        result["sqlite"] = _legs(_states(blobs, keys), keys, page, progress, "SQLite")
        progress("starting PostgreSQL")
        pg = stack.enter_context(PostgresServer())
        dsn = stack.enter_context(_database(pg.admin_dsn, pg.user, pg.dsn))
        progress("sealing the events (PostgreSQL key table)")
        remote = PostgresKeyStore(dsn, vault=tmp / "vault-pg.sqlite")
        stack.callback(remote.close)
        result["postgres"] = _legs(_states(blobs, remote), remote, page, progress,
                                   "PostgreSQL")
    result["load_average_after"] = load_avg()
    if plot is not None:
        bar_panels(plot, f"reading {len(blobs):,} sealed events: a key read each vs a page's "
                         f"keys in one query (page {page})",
                   [(f"{where}: µs an event (wall)",
                     {"letterlog: a read per page": result[where]["a_read_per_page"][
                         "us_per_event"],
                      "a read per key (before)": result[where]["a_read_per_key"][
                          "us_per_event"]})
                    for where in ("sqlite", "postgres")], fmt="{:,.1f}")
        result["plot"] = str(plot)
    return result
