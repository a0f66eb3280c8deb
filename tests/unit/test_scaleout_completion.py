"""The scale-out completion's own logic, without servers (the real-server test is
tests/services/test_erasure_scaleout.py): records, a read side that is behind, and a
compactor that fails or cannot be run."""

from __future__ import annotations

import stat
import time
from types import SimpleNamespace

import pytest

from adapters.lifecycle.compaction import CompactionFailed, major_compact
from adapters.lifecycle.scaleout import complete, pending, record_erasure
from adapters.lifecycle.scaleoutrecords import ScaleOutPending


class FakeStore:
    def __init__(self, data):
        self.settings = SimpleNamespace(data=data, event_store="sqlite")
        self.touched: list[str] = []

    def max_position(self) -> int:
        return 42

    @property
    def projections(self):
        raise AssertionError("HBase is not read before the read side has the erasures")


def test_an_erasure_is_recorded_privately_without_ids_and_listed(tmp_path):
    store = FakeStore(tmp_path)
    record_erasure(store, ["ab" * 32, "ab" * 32, "cd" * 32], 1000.0, 3)
    [(path, record)] = ScaleOutPending(tmp_path).records()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert record["position"] == 42 and record["payloads"] == ["ab" * 32, "cd" * 32]
    assert pending(store) == [{"since": record["since"], "position": 42, "messages": 3,
                               "payloads": 2}]


def test_nothing_pending_is_complete_at_once(tmp_path):
    done = complete(FakeStore(tmp_path), wait=1, read_side=lambda *_: "unreachable")
    assert done.complete and done.pending == 0


def test_a_read_side_behind_leaves_everything_pending_and_says_why(tmp_path):
    store = FakeStore(tmp_path)
    record_erasure(store, ["ab" * 32], time.time(), 1)
    done = complete(store, wait=0.1, read_side=lambda target, deadline: f"behind {target}")
    assert not done.complete and not done.workers_reached
    assert done.problem == "behind 42" and "behind 42" in done.line()
    assert len(ScaleOutPending(tmp_path).records()) == 1  # kept for the next attempt


def test_a_compactor_that_fails_or_is_missing_is_a_clear_error():
    with pytest.raises(CompactionFailed, match="exit 1"):
        major_compact("false", ["t"], deadline=time.monotonic() + 30, progress=print)
    with pytest.raises(CompactionFailed, match="cannot run '/nonexistent/hbase'"):
        major_compact("/nonexistent/hbase X", ["t"], deadline=time.monotonic() + 30,
                      progress=print)


class Tables:
    """``payload_refs`` as the workers left it, and flushes (Thrift2 available)."""

    def __init__(self, referred):
        self.referred = referred
        self.flushed = []

    def get(self, table, row):
        return {b"r:x": b"1"} if any(sha.encode() in row for sha in self.referred) else {}

    def flush(self, names):
        self.flushed += list(names)
        return True

    def scan(self, table, **_):  # no saved views (adapters.readside.views)
        return iter(())

    def physical_name(self, name):
        return f"p_{name}"

    def table_exists(self, name):
        return name == "payloads"  # HBase's payload table (ADR 0072)


class Payloads:
    def __init__(self, touched_at):
        self.touched_at = touched_at  # sha -> last write
        self.deleted = []

    def delete_unless_touched(self, sha, horizon):
        if self.touched_at[sha] > horizon:
            return None
        self.deleted.append(sha)
        return 1000


@pytest.mark.parametrize("in_hbase", [False, True], ids=["payload files", "payloads in hbase"])
def test_payloads_are_freed_after_the_read_side_unless_referred_or_reused(tmp_path, in_hbase):
    free, referred, reused = "aa" * 32, "bb" * 32, "cc" * 32
    tables = Tables({referred})
    store = SimpleNamespace(
        settings=SimpleNamespace(data=tmp_path, event_store="sqlite",
                                 hbase_compactor="true",  # real: services test
                                 payloads_in_hbase=lambda: in_hbase),
        max_position=lambda: 42, payloads=Payloads({free: 0.0, referred: 0.0, reused: 2000.0}),
        projections=SimpleNamespace(tables=tables, physical=lambda t: t))
    record_erasure(store, [free, referred, reused], 1000.0, 3)
    reached = []
    done = complete(store, wait=60, read_side=lambda t, d: reached.append(t) or "")
    assert reached == [42]  # waited for the erasure's position before reading payload_refs
    assert done.complete and done.pending_cleared == 1
    assert store.payloads.deleted == [free]
    assert (done.payloads_freed, done.payload_bytes_freed, done.payloads_kept) == (1, 1000, 2)
    assert len(tables.flushed) == len(done.tables_compacted) == 6 + in_hbase
    assert ("payloads" in tables.flushed) is ("p_payloads" in done.tables_compacted) is in_hbase
    assert ScaleOutPending(tmp_path).records() == []


def test_purge_runs_share_one_record_that_a_later_purge_keeps_from_being_cleared(tmp_path):
    store = FakeStore(tmp_path)
    pending_ = ScaleOutPending(tmp_path)
    for _ in range(3):  # a purger's batches
        record_erasure(store, [], time.time(), 200)
    [(path, seen)] = pending_.records()
    assert path.name == "purges.json" and seen["messages"] == 600 and seen["position"] == 42
    record_erasure(store, [], time.time(), 5)  # after complete() read it
    assert pending_.clear([(path, seen)]) == 0  # not cleared: it changed
    [(_, now)] = pending_.records()
    assert now["messages"] == 605
    assert pending_.clear([(path, now)]) == 1 and pending_.records() == []


def test_erase_complete_without_a_read_side_exits_3_with_one_line_and_keeps_the_record(
        tmp_path):
    import os
    import subprocess
    import sys

    data = tmp_path / "data"
    env = {**os.environ, "LETTERLOG_TABLE_STORE": "hbase", "LETTERLOG_DATA": str(data)}
    env.pop("LETTERLOG_KAFKA_BOOTSTRAP", None)
    subprocess.run([sys.executable, "-m", "adapters.cli", "init"], env=env, check=True,
                   capture_output=True)
    record_erasure(FakeStore(data), ["ab" * 32], 0.0, 1)
    done = subprocess.run([sys.executable, "-m", "adapters.cli", "erase", "complete"],
                          env=env, capture_output=True, text=True)
    assert done.returncode == 3
    assert done.stderr == ("letterlog: scale-out: erasure not complete: "
                           "LETTERLOG_KAFKA_BOOTSTRAP is not set: no relay and workers to "
                           "wait for\n")
    assert len(ScaleOutPending(data).records()) == 1
