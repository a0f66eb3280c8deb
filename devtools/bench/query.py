"""``letterlog bench query``: listings and counters against raw SELECTs.

Returns (and the CLI prints) one JSON object holding letterlog's numbers, the raw
baseline measured in the same run on the same machine, their ratio and the target.
The mailbox is built by ``query_store`` (its own history).

``bench_query``: p50/p99 of the newest-50 listing, a random page (``before_uid``) and the
counters reads in a 100k-message mailbox, through the query functions and through what a
user calls, the ``Letterlog`` API (``messages``, ``mailbox_status``, ``counters``).
Baseline: raw ``SELECT``s of the same cells on the same file (the listing columns of 50
rows; the counters row's count family ``c``, without its soft-delete markers).
"""

from __future__ import annotations

import bisect
import gc
import math
import os
import random
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

from devtools.bench.common import SYNCHRONOUS, bar_panels, counted, load_avg, progress_bars
from devtools.bench.synthetic import DOMAIN, LABELS, MailFactory, deliver
from domain.account import Account
from domain.mailbox import Mailbox
from domain.service import new_message_id
from domain.values import Role

TARGET_LISTING_P99_MS = 2.0
TARGET_LISTING_P99_VS_RAW = 2.0  # letterlog's newest-50 p99 at most twice the raw SELECT's
TARGET_COUNTERS_P99_MS = 1.0
QUERY_ACCOUNT = f"bench@{DOMAIN}"  # owns the big INBOX of ``bench_query``


@dataclass
class _QueryFixture:
    account_id: UUID
    mailbox_id: UUID
    listed: list[int]  # UIDs of listed messages, ascending
    messages: int
    unread: int
    octets: int
    events: int


def _query_history(messages: int, seed: int) -> tuple[Iterator[tuple[int, Any]], _QueryFixture]:
    """Events of one big INBOX (plus neighbours): deliveries in groups, most read, some
    labelled, a few soft-deleted; positions from 1."""
    rng = random.Random(seed)
    factory = MailFactory(rng)
    start = datetime(2024, 1, 8, 7, 0, tzinfo=UTC)

    def open_account(address: str) -> tuple[Any, Any]:
        acc = Account.open(address)
        mailbox_id, uidvalidity = acc.register_mailbox("INBOX", Role.INBOX)
        box = Mailbox.create(mailbox_id, acc.id, "INBOX", "inbox", uidvalidity)
        acc.define_labels(frozenset(LABELS))
        return acc, box

    main_acc, main_box = open_account(QUERY_ACCOUNT)
    fixture = _QueryFixture(main_acc.id, main_box.id, [], 0, 0, 0, 0)
    neighbours = [open_account(f"neighbour{i}@{DOMAIN}") for i in range(4)]
    plan = [(main_acc, main_box, messages),
            *((a, b, max(1, messages // 40)) for a, b in neighbours)]

    def history() -> Iterator[Any]:
        for acc, box in [(main_acc, main_box), *neighbours]:
            yield from acc.collect_events()
            yield from box.collect_events()
        now = start
        for acc, box, count in plan:
            main = box is main_box
            done = 0
            while done < count:
                k = min(count - done, rng.randint(1, 200))
                now += timedelta(minutes=rng.randint(1, 30))
                group: list[tuple[Any, UUID, list[str], list[str]]] = []
                for _ in range(k):
                    mail = factory.make(acc.id, acc.address, now,
                                        attachment=rng.random() < 0.08)
                    labels = [rng.choice(LABELS)] if rng.random() < 0.1 else []
                    group.append((mail, new_message_id(), [], labels))
                msgs = deliver(box, group, now)
                yield from box.collect_events()
                for msg in msgs:
                    yield from msg.collect_events()
                for msg in msgs:
                    r = rng.random()
                    if r < 0.02:
                        msg.soft_delete(now + timedelta(days=30))
                    else:
                        if r < 0.72:
                            msg.change_flags(frozenset({"\\Seen"}))
                        if main:
                            fixture.listed.append(msg.uid)
                            fixture.messages += 1
                            fixture.octets += msg.size
                            fixture.unread += "\\Seen" not in msg.flags
                    yield from msg.collect_events()
                done += k

    def numbered() -> Iterator[tuple[int, Any]]:
        for position, event in enumerate(history(), 1):
            fixture.events = position
            yield position, event

    return numbered(), fixture


def query_store(path: Path, messages: int, progress: Any = None) -> tuple[Any, _QueryFixture]:
    """A SqliteTableStore at ``path`` holding every read model of ``_query_history``."""
    from adapters.tables.sqlite import SqliteTableStore
    from projections.registry import ALL
    from projections.runner import ProjectionRunner

    store = SqliteTableStore(path, synchronous=SYNCHRONOUS)
    runner = ProjectionRunner(store, ALL)
    runner.create_tables()
    items, fx = _query_history(messages, seed=3)
    if progress is not None:
        task = progress.add_task(f"projecting a {messages:,}-message mailbox", total=None)
        items = counted(items, progress, task)
    runner.apply_events(items, fold=True)
    store.checkpoint("TRUNCATE")
    return store, fx


def _percentiles(ns: list[int]) -> dict[str, float]:
    s = sorted(ns)

    def q(p: float) -> float:
        return round(s[min(len(s) - 1, max(0, math.ceil(p * len(s)) - 1))] / 1e6, 4)

    return {"p50_ms": q(0.50), "p99_ms": q(0.99), "max_ms": round(s[-1] / 1e6, 4)}


Call = tuple[Callable[[int], Any], Callable[[int, Any], None]]  # a read and its check


def _timed(samples: int, call: Callable[[int], Any], check: Callable[[int, Any], None]
           ) -> dict[str, float]:
    return _timed_together(samples, {"": (call, check)})[""]


def _timed_together(samples: int, calls: dict[str, Call]) -> dict[str, dict[str, float]]:
    """Times each ``call(i)`` ``samples`` times, the calls taking turns sample by sample (so
    letterlog and its raw baseline meet the same machine: a burst of other work lands on
    both, not on whichever ran second), checking each result right after its call (outside
    the timed window) and dropping it, as a caller would: results kept for checking later
    would grow the heap and charge the cyclic GC's full collections to the queries."""
    for i in range(min(50, samples)):  # warm-up (statement cache, pages)
        for call, check in calls.values():
            check(i, call(i))
    gc.collect()
    ns: dict[str, list[int]] = {name: [] for name in calls}
    timed = [(ns[name], call, check) for name, (call, check) in calls.items()]
    clock = time.perf_counter_ns
    for i in range(samples):
        for times, call, check in timed:
            t0 = clock()
            got = call(i)
            times.append(clock() - t0)
            check(i, got)
    return {name: _percentiles(times) for name, times in ns.items()}


@dataclass
class _QueryChecks:
    """What every timed read must return, from the fixture's history."""

    fx: _QueryFixture
    befores: list[int]

    def page(self, before: int | None) -> list[int]:
        listed = self.fx.listed
        i = len(listed) if before is None else bisect.bisect_left(listed, before)
        return list(reversed(listed[max(0, i - 50):i]))

    def newest(self, i: int, got: list[Any]) -> None:
        self._uids(got, self.page(None), "newest-50 listing")

    def before(self, i: int, got: list[Any]) -> None:
        self._uids(got, self.page(self.befores[i]), f"page before UID {self.befores[i]}")

    @staticmethod
    def _uids(got: list[Any], expected: list[int], what: str) -> None:
        uids = [m.uid for m in got]
        if uids != expected:
            raise AssertionError(f"{what}: got UIDs {uids[:5]}..., expected {expected[:5]}...")

    def counts(self, i: int, got: Any) -> None:
        found = (got["messages"], got["unread"], got["bytes"]) if isinstance(got, dict) else (
            got.messages, got.unread, got.bytes)
        expected = (self.fx.messages, self.fx.unread, self.fx.octets)
        if found != expected:
            raise AssertionError(f"counters: got {found}, expected {expected}")

    def all_counts(self, i: int, got: Any) -> None:
        self.counts(i, got[0][self.fx.mailbox_id])

    def account_counts(self, i: int, got: dict[str, Any]) -> None:
        self.counts(i, got["mailboxes"]["INBOX"])

    def status(self, i: int, got: dict[str, Any]) -> None:
        self.counts(i, {"messages": got["messages"], "unread": got["unseen"],
                        "bytes": got["bytes"]})


def _query_calls(store: Any, checks: _QueryChecks) -> dict[str, Call]:
    """The query functions the embedded API calls, on the table store (same cells as raw)."""
    from projections import queries as q

    mb, acc, befores = checks.fx.mailbox_id, checks.fx.account_id, checks.befores
    return {
        "newest_50": (lambda i: q.mailbox_messages(store, mb, limit=50), checks.newest),
        "random_page_50": (lambda i: q.mailbox_messages(store, mb, limit=50,
                                                        before_uid=befores[i]), checks.before),
        "mailbox_counts": (lambda i: q.mailbox_counts(store, acc, mb), checks.counts),
        "counters_row": (lambda i: q.counters(store, acc), checks.all_counts),
    }


def _time_embedded(root: Path, checks: _QueryChecks, samples: int) -> dict[str, Any]:
    """What a user calls: ``Letterlog.messages`` / ``counters`` / ``mailbox_status`` on a
    ``Letterlog`` opened on the benchmark's tables (name lookups, validation and all)."""
    from adapters.embedded import Letterlog

    befores = checks.befores
    with Letterlog.open(root, event_store="sqlite", table_store="embedded",
                        durability="normal") as mail:
        return {
            "messages_newest_50": _timed(
                samples, lambda i: mail.messages(QUERY_ACCOUNT, "INBOX", limit=50),
                checks.newest),
            "messages_page_50": _timed(
                samples, lambda i: mail.messages(QUERY_ACCOUNT, "INBOX", limit=50,
                                                 before_uid=befores[i]), checks.before),
            "mailbox_status": _timed(samples, lambda i: mail.mailbox_status(QUERY_ACCOUNT),
                                     checks.status),
            "counters": _timed(samples, lambda i: mail.counters(QUERY_ACCOUNT),
                               checks.account_counts),
        }


def _listing_sql(columns: list[bytes]) -> str:
    from projections import names as pn

    col_in = f" AND col IN ({', '.join('?' * len(columns))})"
    return (f'SELECT row, col, value, version FROM "cells:{pn.MESSAGES}" '
            f"WHERE row >= ? AND row < ?{col_in} ORDER BY row, col LIMIT ?")


def _raw_calls(con: sqlite3.Connection, checks: _QueryChecks) -> dict[str, Call]:
    """Plain SELECTs of the cells letterlog reads, on the same file: 50 rows of the listing
    columns; the mailbox's count cell; the account's count family (``c:``)."""
    from projections import names as pn
    from projections import queries as q
    from projections.keys import account_row, message_row, messages_prefix
    from projections.tablestore import key_range

    fx, befores = checks.fx, checks.befores
    columns = list(q._LISTING_COLUMNS)
    listing_sql, cells_50 = _listing_sql(columns), 50 * len(columns)
    high = key_range(prefix=messages_prefix(fx.mailbox_id), start=None, stop=None,
                     reverse=False).high
    counters_sql = f'SELECT col, value, version FROM "cells:{pn.COUNTERS}" WHERE row = ?'
    family = pn.CT_COUNTS
    row, column = account_row(fx.account_id), pn.CT_MAILBOX + fx.mailbox_id.bytes

    def listing(low: bytes) -> list[Any]:
        return con.execute(listing_sql, [low, high, *columns, cells_50]).fetchall()

    def full(i: int, got: list[Any]) -> None:
        if len(got) != cells_50:
            raise AssertionError(f"raw listing: {len(got)} cells, expected {cells_50}")

    def unchecked(i: int, got: Any) -> None:
        pass

    return {
        "newest_50": (lambda i: listing(messages_prefix(fx.mailbox_id)), full),
        "random_page_50": (lambda i: listing(message_row(fx.mailbox_id, befores[i] - 1)),
                           unchecked),
        "mailbox_counts": (lambda i: con.execute(counters_sql + " AND col = ?",
                                                 (row, column)).fetchall(), unchecked),
        "counters_row": (lambda i: con.execute(counters_sql + " AND col >= ? AND col < ?",
                                               (row, family, family[:-1] + b";")).fetchall(),
                         unchecked),
    }


def _time_against_raw(store: Any, path: Path, checks: _QueryChecks, samples: int
                      ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Each query and its raw SELECT, timed taking turns (``_timed_together``): letterlog's
    percentiles and the raw ones."""
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA cache_size=-32768")
    try:
        ours, raw = _query_calls(store, checks), _raw_calls(con, checks)
        timed = {name: _timed_together(samples, {"letterlog": ours[name], "raw": raw[name]})
                 for name in ours}
    finally:
        con.close()
    return ({name: t["letterlog"] for name, t in timed.items()},
            {name: t["raw"] for name, t in timed.items()})


def _counters_row_cells(store: Any, fx: _QueryFixture) -> dict[str, int]:
    """How the benchmark account's counters row divides: counts read, markers not."""
    from projections import names as pn
    from projections.keys import account_row

    row = store.get(pn.COUNTERS, account_row(fx.account_id))
    markers = sum(1 for column in row if column.startswith(pn.CT_DELETED))
    return {"counts": len(row) - markers, "soft_delete_markers": markers}


def bench_query(messages: int = 100_000, samples: int = 2000,
                plot: Path | None = None) -> dict[str, Any]:
    """p50/p99 of listings and counter reads in a ``messages``-message mailbox on the
    embedded SqliteTableStore -- through the query functions and through the ``Letterlog``
    API -- vs raw SELECTs of the same cells on the same file."""
    from projections import queries as q

    rng = random.Random(7)
    with progress_bars() as progress, tempfile.TemporaryDirectory(prefix="letterlog-bench-") as tmp:
        path = Path(tmp) / "tables.sqlite"
        t0 = time.perf_counter()
        store, fx = query_store(path, messages, progress)
        build_s = time.perf_counter() - t0
        load_before = load_avg()
        checks = _QueryChecks(fx, [rng.randint(2, fx.listed[-1]) for _ in range(samples)])
        task = progress.add_task("timing queries", total=None)
        row_cells = _counters_row_cells(store, fx)
        results, raw = _time_against_raw(store, path, checks, samples)
        store.close()
        embedded = _time_embedded(Path(tmp), checks, samples)
        progress.update(task, completed=samples)
        size = path.stat().st_size

    result: dict[str, Any] = {
        "benchmark": "query",
        "messages": messages,
        "listed_messages": fx.messages,
        "events_projected": fx.events,
        "build_seconds": round(build_s, 2),
        "table_file_mb": round(size / 1e6, 1),
        "samples": samples,
        "table_store": "SqliteTableStore",
        "raw_listing_cells": 50 * len(q._LISTING_COLUMNS),
        "counters_row_cells": row_cells,
        "newest_uid": fx.listed[-1],
        "verified": "every timed listing and counters read was checked against the history",
        "letterlog": results,
        "embedded_api": embedded,
        "raw_sqlite": raw,
        "timing": "each query and its raw SELECT alternate, sample by sample",
        "ratio_p50": {k: round(raw[k]["p50_ms"] / results[k]["p50_ms"], 3)
                      if results[k]["p50_ms"] else 0.0 for k in results},
        "listing_p99_vs_raw": round(results["newest_50"]["p99_ms"]
                                    / raw["newest_50"]["p99_ms"], 3),
        "target_listing_p99_ms": TARGET_LISTING_P99_MS,
        "target_listing_p99_vs_raw": TARGET_LISTING_P99_VS_RAW,
        "target_counters_p99_ms": TARGET_COUNTERS_P99_MS,
        "load_avg_1m": [load_before, load_avg()],
        "cpu_count": os.cpu_count(),
    }
    result["meets_targets"] = (_meets_query_targets(results, embedded)
                               and result["listing_p99_vs_raw"] <= TARGET_LISTING_P99_VS_RAW)
    if plot is not None:
        _plot_queries(plot, messages, samples, results, embedded, raw)
        result["plot"] = str(plot)
    return result


def _meets_query_targets(results: dict[str, Any], embedded: dict[str, Any]) -> bool:
    def worst(side: dict[str, Any], names: tuple[str, ...]) -> float:
        return float(max(side[name]["p99_ms"] for name in names))

    listing = max(worst(results, ("newest_50", "random_page_50")),
                  worst(embedded, ("messages_newest_50", "messages_page_50")))
    counters = max(worst(results, ("mailbox_counts", "counters_row")),
                   worst(embedded, ("mailbox_status", "counters")))
    return listing <= TARGET_LISTING_P99_MS and counters <= TARGET_COUNTERS_P99_MS


_EMBEDDED_OF = {"newest_50": "messages_newest_50", "random_page_50": "messages_page_50",
                "mailbox_counts": "mailbox_status", "counters_row": "counters"}


def _plot_queries(plot: Path, messages: int, samples: int, results: dict[str, Any],
                  embedded: dict[str, Any], raw: dict[str, Any]) -> None:
    panels = []
    for k in results:
        api = embedded[_EMBEDDED_OF[k]]
        panels.append((f"{k} (ms)", {
            "letterlog p50": results[k]["p50_ms"], "letterlog p99": results[k]["p99_ms"],
            f"letterlog API {_EMBEDDED_OF[k]} p50": api["p50_ms"],
            f"letterlog API {_EMBEDDED_OF[k]} p99": api["p99_ms"],
            "raw SQLite p50": raw[k]["p50_ms"], "raw SQLite p99": raw[k]["p99_ms"]}))
    bar_panels(plot, f"queries on a {messages:,}-message mailbox ({samples} samples)",
                panels, fmt="{:,.3f}")
