"""The embedded rebuild over several processes (``adapters.readside.rangefold``, ADR 0113):
the tables it switches in are the one-process fold's, cell for cell; a corrupt event in a
child's range or a child killed mid-fold fails the rebuild, switches nothing and leaves no
run file (they hold plain text) in the data directory."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from adapters.embedded import Letterlog
from adapters.readside import rangefold
from adapters.readside.rangefold import FoldProcessLost, cut
from domain.errors import CorruptEvent
from projections.registry import ALL
from projections.tablestore import table_digest
from tests.factories import make_mail
from tests.rebuild_support import ADA, TABLES, digests, history, run_dirs


@pytest.fixture(autouse=True)
def parallel_from_the_first_event(monkeypatch):
    """Logs of a test's size are folded in several processes too (the threshold is for
    speed alone: below it one process is faster)."""
    monkeypatch.setattr(rangefold, "PARALLEL_FROM", 0)


@pytest.fixture
def store(tmp_path):
    s = Letterlog.open(tmp_path / "data", durability="normal")
    history(s)
    yield s
    s.close()


@pytest.fixture
def folds(monkeypatch) -> list[dict[str, Any]]:
    """The figures of every fold that ran over several processes, in order."""
    done: list[dict[str, Any]] = []
    fold = rangefold.RangeFold._fold

    def counted(self, *args):
        runner = fold(self, *args)
        done.append(self.stats)
        return runner

    monkeypatch.setattr(rangefold.RangeFold, "_fold", counted)
    return done


@pytest.mark.parametrize("workers", [2, 3])
def test_a_fold_over_several_processes_switches_in_the_tables_of_one(store, workers, folds):
    live = digests(store)
    one = store.rebuild(workers=1)
    assert digests(store) == live
    assert folds == []
    several = store.rebuild(workers=workers)
    assert [f["workers"] for f in folds] == [workers]
    assert several["position"] == one["position"]
    assert digests(store) == live  # cell for cell, tracking positions included
    assert run_dirs(store) == []
    # the switched-in tables are the live ones: a new command lands in them
    store.deliver(account=ADA, raw=make_mail("after", message_id="<after@x>"))
    assert all(r.identical for r in store.verify())


def test_the_ranges_cover_the_log_once_in_order():
    for stop, parts in ((10, 3), (3, 4), (1_000_003, 2), (7, 1)):
        spans = cut(stop, parts)
        covered = [p for a, b in spans for p in range(a, b + 1)]
        assert covered == list(range(1, stop + 1)), (stop, parts)


def test_a_corrupt_event_in_a_childs_range_fails_the_rebuild_and_switches_nothing(store):
    before = digests(store)
    physical = store.read_side().physical("messages")
    con = sqlite3.connect(Path(store.settings.data) / "events.sqlite")
    last = con.execute("SELECT max(rowid) FROM stored_events").fetchone()[0]
    con.execute("UPDATE stored_events SET state = x'c1c1c1' WHERE rowid = ?", (last,))
    con.commit()
    con.close()
    with pytest.raises(CorruptEvent, match=f"position {last} "):
        store.rebuild(workers=2)  # the last range is a child's
    assert store.read_side().physical("messages") == physical
    assert digests(store) == before
    assert run_dirs(store) == []


def test_a_child_killed_mid_fold_fails_the_rebuild_and_switches_nothing(store):
    before = digests(store)
    killed: list[int] = []

    def kill_a_child(done: int, total: int) -> None:
        for child in multiprocessing.active_children():
            if child.name.startswith("letterlog-rebuild-") and not killed:
                killed.append(child.pid or 0)
                os.kill(child.pid or 0, signal.SIGKILL)

    with pytest.raises(FoldProcessLost, match=r"range 2 of the log ended \(exit code -9\)"):
        store.rebuild(progress=kill_a_child, workers=2)
    assert killed  # the child was running when it was killed
    assert digests(store) == before
    assert run_dirs(store) == []
    assert store.rebuild(workers=2)["position"] > 0  # and the next rebuild goes through
    assert digests(store) == before


def test_a_view_folded_over_several_processes_is_the_one_process_view(store, monkeypatch):
    """``rebuild --until-position``: the view's tables as one process folds them."""
    from adapters.readside.readview import view_physical

    stop = store.max_position() // 2
    host = store.read_side()
    built = {}
    for view, workers in (("one", 1), ("three", 3)):
        monkeypatch.setattr(rangefold, "default_workers", lambda workers=workers: workers)
        assert store.build_view(view, None, stop)["position"] == stop
        built[view] = {t: table_digest(host.tables, view_physical(view)(t)) for t in TABLES}
    assert built["three"] == built["one"]
    assert run_dirs(store) == []


@pytest.mark.parametrize("names", [["counters"], ["messages"], ["counters", "threads"]])
def test_rebuilding_some_projections_over_several_processes_touches_no_other(store, names,
                                                                           folds):
    live = digests(store)
    others = {t: store.read_side().physical(t) for t in TABLES}
    result = store.rebuild(names, workers=2)
    assert [f["workers"] for f in folds] == [2]
    assert sorted(result["projections"]) == sorted(names)
    rebuilt = {t for p in ALL if p.name in names for t in (s.name for s in p.tables)}
    for table in TABLES:  # only the named projections' tables were switched
        assert (store.read_side().physical(table) != others[table]) == (table in rebuilt), table
    assert digests(store) == live
