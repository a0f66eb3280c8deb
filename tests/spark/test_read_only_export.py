"""An export from a read-only store (a snapshot, a backup mount) works: it only reads
(issue 42 item 15). The store is really read-only: a read-only bind mount, which refuses
writes to root too, of a copy taken while the store was open (its ``-wal`` and ``-shm``
beside it, committed events still in the ``-wal``), and of one closed cleanly (no ``-wal``).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.services.servers import in_ci
from tests.spark.support import _need_pyspark, fill

pytestmark = [pytest.mark.spark, pytest.mark.slow]
LETTERLOG = [sys.executable, "-m", "adapters.cli"]


def _mounted_read_only(source: Path, target: Path) -> None:
    target.mkdir()
    subprocess.run(["mount", "--bind", str(source), str(target)], check=True, timeout=30)
    subprocess.run(["mount", "-o", "remount,bind,ro", str(target)], check=True, timeout=30)


@pytest.fixture(params=["open", "closed"])
def snapshot(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """A read-only mount of a store's copy (``open``: taken while the store was open);
    and the number of events in it."""
    _need_pyspark()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        reason = "a read-only bind mount needs root and mount(8)"
        if in_ci():
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    from adapters.embedded import Letterlog

    data, copy = tmp_path / "data", tmp_path / "copy"
    with Letterlog.open(data) as store:
        fill(store, 12)
        events = sum(1 for _ in store.events())
        if request.param == "open":
            shutil.copytree(data, copy / "data")
            assert (copy / "data" / "events.sqlite-wal").exists()
    if request.param == "closed":
        shutil.copytree(data, copy / "data")
        assert not (copy / "data" / "events.sqlite-wal").exists()
    mount = tmp_path / "mnt"
    _mounted_read_only(copy, mount)
    try:
        yield mount / "data", events
    finally:
        subprocess.run(["umount", str(mount)], check=False, timeout=60)


def listing(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*"))}


def test_an_export_from_a_read_only_store_reads_every_event(snapshot, tmp_path):
    import pyarrow.dataset as ds

    data, events = snapshot
    with pytest.raises(OSError) as refused:
        (data / "probe").touch()
    assert refused.value.errno == errno.EROFS  # really read-only, for root too
    before = listing(data)
    done = subprocess.run([*LETTERLOG, "--data", str(data), "--json", "export", "--format",
                           "parquet", "events", str(tmp_path / "events")],
                          capture_output=True, text=True, check=False, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["rows"] == result["rows_added"] == events
    table = ds.dataset(tmp_path / "events", format="parquet", partitioning="hive").to_table(
        columns=["position"])
    assert sorted(table.column("position").to_pylist()) == list(range(1, events + 1))
    assert listing(data) == before


def test_a_rebuild_of_a_read_only_store_is_refused_in_one_line(snapshot):
    data, _ = snapshot
    done = subprocess.run([*LETTERLOG, "--data", str(data), "rebuild", "--all", "--engine",
                           "spark"], capture_output=True, text=True, check=False, timeout=600)
    assert done.returncode == 2
    assert done.stderr.strip() == f"letterlog: error: {data}: on a read-only filesystem"
