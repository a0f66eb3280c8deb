"""The Spark rebuild's run files (each task's folded tables, plain text) are deleted when the
job ends; those a killed driver left are deleted by the next rebuild or the next purge run
or erasure, and a running job's are never touched."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from adapters.embedded import Letterlog
from adapters.files.rundirs import RUN_DIRS, remove_stale_runs, run_directory
from tests.erasure_support import ACCOUNT, files_holding, marked_mail

HOLD_A_RUN_DIRECTORY = """
import sys
from pathlib import Path
from adapters.files.rundirs import run_directory
with run_directory(Path(sys.argv[1]), sys.argv[3]) as spool:
    (Path(spool) / "run-0-0-0.sqlite").write_bytes(sys.argv[2].encode())
    print(spool, flush=True)
    sys.stdin.read()  # until the test closes it, or kills this driver
"""


def driver(data, marker: str, prefix: str = RUN_DIRS[0]) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", HOLD_A_RUN_DIRECTORY, str(data), marker,
                             prefix],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip()  # the directory exists and is locked
    return proc


def test_a_run_directory_goes_when_its_job_ends_even_on_an_error(tmp_path):
    try:
        with run_directory(tmp_path) as spool:
            assert list(tmp_path.glob(".spark-runs-*")) == [tmp_path / spool.rsplit("/", 1)[1]]
            raise RuntimeError("the job failed")
    except RuntimeError:
        pass
    assert list(tmp_path.glob(".spark-runs-*")) == []


def test_a_running_jobs_run_files_stay_and_a_killed_ones_go(tmp_path):
    running = driver(tmp_path, "running")
    killed = driver(tmp_path, "killed")
    try:
        killed.kill()
        killed.wait()
        assert len(list(tmp_path.glob(".spark-runs-*"))) == 2  # the killed one left its own
        removed = remove_stale_runs(tmp_path)
        assert len(removed) == 1
        assert files_holding(tmp_path, [b"killed"]) == {}
        assert files_holding(tmp_path, [b"running"])  # a running job is never touched
    finally:
        running.communicate("")
    assert list(tmp_path.glob(".spark-runs-*")) == []  # it removed its own on ending


def test_an_unlocked_directory_is_left_while_its_driver_may_still_be_starting(tmp_path):
    young = tmp_path / ".spark-runs-young"
    young.mkdir()
    assert remove_stale_runs(tmp_path) == []
    old = time.time() - 3600

    os.utime(young, (old, old))
    assert remove_stale_runs(tmp_path) == [".spark-runs-young"]


@pytest.mark.parametrize("prefix", [RUN_DIRS[0], RUN_DIRS[2]], ids=["spark", "embedded"])
def test_an_erasure_deletes_the_run_files_a_killed_rebuild_left(tmp_path, prefix):
    data = tmp_path / "data"
    raw, markers = marked_mail("r", attachment=False)
    with Letterlog.open(data) as store:
        d = store.deliver(account=ACCOUNT, raw=raw)
        killed = driver(data, markers[0].decode(), prefix)  # its run file holds the subject
        killed.kill()
        killed.wait()
        assert any(n.startswith(prefix) for n in files_holding(data, markers))
        store.erase_message(d.message_id)
    assert files_holding(data, markers) == {}
