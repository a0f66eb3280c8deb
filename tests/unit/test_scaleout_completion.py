"""The scale-out completion's own logic, without servers (the real-server test is
tests/services/test_erasure_scaleout.py): records, a read side that is behind, and a
compactor that fails or cannot be run."""

from __future__ import annotations

import stat
import time
from types import SimpleNamespace

import pytest

from adapters.lifecycle.scaleout import (
    CompactionFailed,
    ScaleOutPending,
    complete,
    major_compact,
    pending,
    record_erasure,
)


class FakeStore:
    def __init__(self, data):
        self.settings = SimpleNamespace(data=data)
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
