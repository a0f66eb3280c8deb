"""``letterlog bench ingest --rights`` and ``bench query --rights``: what the rights check
costs a delivery and a listing, measured in one run (ADR 0077).

Ingest: the same messages delivered one per command into another account's shared
mailbox, by the administrator (the store as opened: no check) and by a user with ``lri`` on
it (``Letterlog.open(data, user=...)``: the mailbox's ACL read from the command side's
current aggregates and checked first, the arrival's flags cut to the user's rights), into
two stores that differ only in who delivers, in rounds that alternate the two so that the
machine's drift falls on both; ``LETTERLOG_DURABILITY=normal`` by default (at ``full`` one
fsync per delivery hides a cost of microseconds in its noise). Query: the newest 50 of a
mailbox, and the user's whole mailbox list, as the administrator and as a user with ``lr``,
alternating, p50 and p99. Reported: both sides, and the difference (what the check costs).
A whole delivery takes about a millisecond and its mean varies by more than the check on a
shared machine (a stall of a few milliseconds now and then), so the medians are compared:
``rights_check_us_per_delivery`` is the user's p50 less the administrator's.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from adapters.demo.benchmail import bench_messages
from devtools.bench.common import bar_panels

OWNER, READER, SHARED = "ada@example.org", "bob@example.org", "Shared"
ROUNDS = 10


def _store(root: Path, durability: str) -> Any:
    from adapters.embedded import Letterlog

    store = Letterlog.open(root, durability=durability)
    store.create_mailbox(OWNER, SHARED, create_account=True)
    store.acl_set(OWNER, SHARED, READER, "lri")
    return store


def bench_rights_ingest(messages: int = 2000, *, durability: str = "normal",
                        plot: Path | None = None) -> dict[str, Any]:
    blobs = bench_messages(messages)
    spent = {"administrator": 0.0, "user": 0.0}
    each: dict[str, list[float]] = {"administrator": [], "user": []}  # µs per delivery
    with tempfile.TemporaryDirectory(prefix="letterlog-bench-rights-") as tmp:
        admin = _store(Path(tmp) / "admin", durability)
        user_store = _store(Path(tmp) / "user", durability)
        user = user_store.as_user(READER)
        try:
            step = max(1, messages // ROUNDS)
            for start in range(0, messages, step):
                chunk = blobs[start:start + step]
                for side, face in (("administrator", admin), ("user", user)):
                    for blob in chunk:
                        t0 = time.perf_counter()
                        face.deliver(account=OWNER, mailbox=SHARED, raw=blob)
                        took = time.perf_counter() - t0
                        spent[side] += took
                        each[side].append(took * 1e6)
            stored = (admin.mailbox_status(OWNER, SHARED)["messages"],
                      user.mailbox_status(OWNER, SHARED)["messages"])
        finally:
            admin.close()
            user_store.close()
    per = {side: seconds / messages * 1e6 for side, seconds in spent.items()}
    p50 = {side: statistics.median(s) for side, s in each.items()}
    result: dict[str, Any] = {
        "benchmark": "ingest", "leg": "rights", "messages": messages,
        "durability": durability, "stored": {"administrator": stored[0], "user": stored[1]},
        "deliveries_per_s": {side: round(messages / s, 1) for side, s in spent.items()},
        "us_per_delivery": {side: round(us, 1) for side, us in per.items()},
        "p50_us_per_delivery": {side: round(us, 1) for side, us in p50.items()},
        "rights_check_us_per_delivery": round(p50["user"] - p50["administrator"], 1),
        "rights_check_share": round((p50["user"] - p50["administrator"]) / p50["user"], 3),
    }
    if plot is not None:
        bar_panels(plot, "a delivery: administrator vs a user with lri (rights checked)",
                   [("p50 µs per delivery", {"letterlog as administrator": p50["administrator"],
                                             "letterlog as user": p50["user"]})],
                   fmt="{:,.1f}")
        result["plot"] = str(plot)
    return result


def _timed(call: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    call()
    return (time.perf_counter() - t0) * 1e6


def _percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"p50_us": round(statistics.median(ordered), 1),
            "p99_us": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 1)}


def bench_rights_query(messages: int = 2000, samples: int = 2000, *,
                       plot: Path | None = None) -> dict[str, Any]:
    from adapters.embedded import Letterlog

    blobs = bench_messages(min(messages, 500))
    with tempfile.TemporaryDirectory(prefix="letterlog-bench-rights-") as tmp:
        data = Path(tmp) / "data"
        with Letterlog.open(data, durability="normal") as store:
            store.create_mailbox(OWNER, SHARED, create_account=True)
            store.acl_set(OWNER, SHARED, READER, "lr")
            store.deliver_many({"account": OWNER, "mailbox": SHARED,
                                "raw": blobs[i % len(blobs)]} for i in range(messages))
        admin = Letterlog.open(data, create=False)
        user = admin.as_user(READER)
        listing: dict[str, list[float]] = {"administrator": [], "user": []}
        boxes: dict[str, list[float]] = {"administrator": [], "user": []}
        try:
            for face in (admin, user):  # warm: the first read opens what it reads
                face.messages(OWNER, SHARED)
            for _ in range(samples):
                listing["administrator"].append(_timed(lambda: admin.messages(OWNER, SHARED)))
                listing["user"].append(_timed(lambda: user.messages(OWNER, SHARED)))
                boxes["administrator"].append(_timed(lambda: admin.mailbox_list(OWNER)))
                boxes["user"].append(_timed(lambda: user.mailbox_list()))
            shown = (len(admin.messages(OWNER, SHARED)), len(user.messages(OWNER, SHARED)))
        finally:
            admin.close()
    newest = {side: _percentiles(s) for side, s in listing.items()}
    mailbox_list = {side: _percentiles(s) for side, s in boxes.items()}
    result = {
        "benchmark": "query", "leg": "rights", "messages": messages, "samples": samples,
        "listed": {"administrator": shown[0], "user": shown[1]},
        "newest_50": newest,
        "rights_check_us_per_listing": round(newest["user"]["p50_us"]
                                             - newest["administrator"]["p50_us"], 1),
        "mailbox_list": mailbox_list,
        "mailbox_list_note": "the administrator's: one account's; the user's: every mailbox "
                             "it may look up (its own and the shared ones, from the acl index)",
    }
    if plot is not None:
        bar_panels(plot, "newest 50 of a mailbox: administrator vs a user with lr",
                   [("p50 µs", {"letterlog as administrator": newest["administrator"]["p50_us"],
                                "letterlog as user": newest["user"]["p50_us"]}),
                    ("p99 µs", {"letterlog as administrator": newest["administrator"]["p99_us"],
                                "letterlog as user": newest["user"]["p99_us"]})],
                   fmt="{:,.1f}")
        result["plot"] = str(plot)
    return result
