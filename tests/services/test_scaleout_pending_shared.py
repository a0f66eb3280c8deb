"""What scale-out erasures still owe (``erase complete``'s records) lives in the log's
PostgreSQL database, not on the disk of the host that erased: another host with an empty
data directory sees every record and clears it; purge runs share one row that a purge made
after ``complete`` read it keeps from being cleared; a record file an earlier version left
in a host's data directory is read and cleared too. On the real PostgreSQL."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from adapters.config.settings import load_settings
from adapters.lifecycle.scaleout import pending_records
from adapters.lifecycle.scaleoutrecords import ScaleOutPending
from adapters.lifecycle.sharedpending import SharedPending

pytestmark = pytest.mark.services


def test_another_host_sees_and_clears_what_one_hosts_erasures_owe(pg_dsn: str,
                                                                   tmp_path: Path) -> None:
    a, b = SharedPending(pg_dsn, tmp_path / "a"), SharedPending(pg_dsn, tmp_path / "b")
    assert b.records() == []  # no table yet: nothing owed
    a.record(position=10, began=time.time(), payloads=["aa" * 32, "aa" * 32], messages=2)
    for _ in range(3):  # a purger's batches share one row
        a.record_purge(position=20, messages=100)
    assert not (tmp_path / "a").exists(), "nothing on host A's disk"
    seen = b.records()
    assert [(r["position"], r["messages"], r["payloads"]) for _, r in seen] == [
        (10, 2, ["aa" * 32]), (20, 300, [])]
    a.record_purge(position=25, messages=5)  # after b read them
    assert b.clear(seen) == 1, "the changed purges row stays for the next completion"
    [(_, purges)] = a.records()
    assert (purges["position"], purges["messages"]) == (25, 305)
    assert b.clear(b.records()) == 1 and a.records() == []


def test_a_record_file_of_before_is_read_and_cleared(pg_dsn: str, tmp_path: Path) -> None:
    ScaleOutPending(tmp_path).record(position=7, began=0.0, payloads=["bb" * 32], messages=1)
    shared = SharedPending(pg_dsn, tmp_path)
    [(key, record)] = shared.records()
    assert isinstance(key, Path) and record["position"] == 7
    assert shared.clear([(key, record)]) == 1
    assert shared.records() == [] and ScaleOutPending(tmp_path).records() == []


def test_the_deployment_decides_where_the_records_live(pg_dsn: str, tmp_path: Path) -> None:
    scale_out = load_settings(data=tmp_path, event_store="postgres", postgres_dsn=pg_dsn)
    assert isinstance(pending_records(scale_out), SharedPending)
    embedded = load_settings(data=tmp_path, event_store="sqlite")
    assert isinstance(pending_records(embedded), ScaleOutPending)
