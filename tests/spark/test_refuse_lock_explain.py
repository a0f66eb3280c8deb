"""Refuse, lock, explain: a missing store is refused on every engine (exit 2, one line,
nothing made); one rebuild at a time per store, and a driver killed with SIGKILL leaves no
lock behind; a failed job says why in one line and names the file keeping Spark's log."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import NoReturn

import pytest

from adapters.readside.rebuild_lock import RebuildRunning, check_not_running, rebuild_lock
from adapters.sparkjob.outcome import python_exception
from tests.spark.support import make_store

pytestmark = [pytest.mark.spark]
LETTERLOG = [sys.executable, "-m", "adapters.cli"]


def run(*args: str, env: dict[str, str] | None = None,
        cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), capture_output=True, text=True, check=False, timeout=600,
                          env={**os.environ, **(env or {})}, cwd=cwd)


def one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in (done.stderr + done.stdout).splitlines()
             if line.startswith("letterlog: error: ")]
    assert len(lines) == 1, done.stderr[-2000:] + done.stdout[-2000:]
    assert "Traceback" not in done.stderr.split("letterlog: error:")[-1]
    return lines[0]


def test_the_python_exception_is_found_in_the_java_text_spark_wraps_it_in():
    text = ("org.apache.spark.SparkException: Job aborted due to stage failure: Task 1 in "
            "stage 0.0 failed 2 times\norg.apache.spark.api.python.PythonException: Traceback "
            "(most recent call last):\n  File \"/x/worker.py\", line 1, in main\n    raise "
            "ValueError('no')\nspark_replay.fold.InjectedFault: injected failure: partition 1"
            "\n\n\tat org.apache.spark.api.python.BasePythonRunner.handle(Runner.scala:1)\n")
    assert python_exception(text) == (
        "spark_replay.fold.InjectedFault: injected failure: partition 1")
    assert python_exception("java.net.ConnectException: refused") is None


def test_a_rebuild_lock_held_refuses_a_second_and_is_free_again_after(tmp_path):
    with rebuild_lock(tmp_path):
        with pytest.raises(RebuildRunning, match="another rebuild of this store is running"):
            check_not_running(tmp_path)
        with pytest.raises(RebuildRunning, match=f"pid {os.getpid()}"), rebuild_lock(tmp_path):
            pass
    check_not_running(tmp_path)


@pytest.mark.parametrize("engine", ["embedded", "spark"])
@pytest.mark.parametrize("what", ["no such directory", "an empty directory"])
def test_the_cli_refuses_a_directory_holding_no_store_and_makes_nothing(tmp_path, engine, what):
    data = tmp_path / "data"
    if what == "an empty directory":
        data.mkdir()
    done = run(*LETTERLOG, "--data", str(data), "rebuild", "--all", "--engine", engine)
    assert done.returncode == 2
    assert "no letterlog store here" in one_error_line(done) or "holds no letterlog store" in (
        done.stderr)
    assert not data.exists() or not any(data.iterdir())


def test_the_cli_export_refuses_a_directory_holding_no_store(tmp_path):
    done = run(*LETTERLOG, "--data", str(tmp_path / "data"), "export", "events",
               str(tmp_path / "out"))
    assert done.returncode == 2 and "no letterlog store here" in one_error_line(done)
    assert not (tmp_path / "data").exists() and not (tmp_path / "out").exists()


@pytest.mark.slow
def test_spark_submit_of_the_driver_refuses_a_directory_holding_no_store(tmp_path):
    from adapters.sparkjob.environment import spark_env, spark_home
    from adapters.sparkjob.launch import SUBMIT

    (tmp_path / "data").mkdir()
    done = run(str(spark_home() / "bin" / "spark-submit"), "--master", "local[1]", str(SUBMIT),
               "rebuild", "--all", cwd=tmp_path,
               env={**spark_env(), "LETTERLOG_DATA": str(tmp_path / "data"),
                    "PYSPARK_PYTHON": sys.executable})
    assert done.returncode == 2
    assert "holds no letterlog store" in one_error_line(done)
    assert list((tmp_path / "data").iterdir()) == []


@pytest.mark.slow
def test_an_unreachable_master_is_one_line_naming_it_and_spark_logs_file(tmp_path):
    from devtools.devservers._common import free_port

    make_store(tmp_path / "data", messages=4)
    master = f"spark://127.0.0.1:{free_port()}"
    started = time.monotonic()
    done = run(*LETTERLOG, "--data", str(tmp_path / "data"), "rebuild", "--all",
               "--engine", "spark", "--master", master)
    assert done.returncode == 1
    line = one_error_line(done)
    assert f"the Spark master {master} is unreachable" in line
    assert time.monotonic() - started < 45  # not Spark's minute of retries
    log = Path(line.rsplit("(Spark's log: ", 1)[1].rstrip(")"))
    assert log.is_file() and log.parent == (tmp_path / "data" / "spark-logs").resolve()
    assert log.stat().st_mode & 0o077 == 0


@pytest.mark.slow
def test_a_tasks_python_exception_is_the_one_line_and_the_full_log_is_kept(tmp_path):
    """Executors on a Python without letterlog: each task fails importing it."""
    make_store(tmp_path / "data", messages=4)
    done = run(*LETTERLOG, "--data", str(tmp_path / "data"), "rebuild", "counters",
               "--engine", "spark", "--conf", "spark.pyspark.python=/usr/bin/python3.11",
               "--conf", f"spark.pyspark.driver.python={sys.executable}")
    assert done.returncode == 1
    line = one_error_line(done)
    assert "the Spark job failed: ModuleNotFoundError: No module named" in line
    log = Path(line.rsplit("(Spark's log: ", 1)[1].rstrip(")"))
    assert "PythonException" in log.read_text()  # the whole story is in the file


@pytest.mark.slow
def test_one_rebuild_at_a_time_and_a_driver_killed_leaves_no_lock(tmp_path):
    data = tmp_path / "data"
    make_store(data, messages=60)
    first = subprocess.Popen([*LETTERLOG, "--data", str(data), "rebuild", "--all",
                              "--engine", "spark"], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while True:  # the driver holds the lock
            assert first.poll() is None and time.monotonic() < deadline
            try:
                check_not_running(data)
            except RebuildRunning:
                break
            time.sleep(0.05)
        for engine in ("spark", "embedded"):
            second = run(*LETTERLOG, "--data", str(data), "rebuild", "--all", "--engine", engine)
            assert second.returncode == 2
            assert "another rebuild of this store is running (pid" in one_error_line(second)
        driver = int((data / "rebuild.lock").read_text().split()[1].rstrip(","))
        os.kill(driver, signal.SIGKILL)  # the driver only: the kernel frees its lock
        assert first.wait(timeout=120) != 0
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait()
    check_not_running(data)
    again = run(*LETTERLOG, "--data", str(data), "--json", "rebuild", "--all",
                "--engine", "spark")
    assert again.returncode == 0, again.stderr[-2000:]
    assert json.loads(again.stdout)["position"] > 0
    verify = run(*LETTERLOG, "--data", str(data), "verify", "--all")
    assert verify.returncode == 0, verify.stderr


class _Failed(Exception):
    pass


def test_the_bench_driver_is_this_installations_job_whatever_the_directory_holds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``python -P -m spark_replay``: started from a directory that holds another
    ``spark_replay`` (an old checkout), the driver is still the installed job's."""
    from adapters.sparkjob.launch import run_module

    foreign = tmp_path / "spark_replay"
    foreign.mkdir()
    marker = tmp_path / "the-foreign-job-ran"
    (foreign / "__init__.py").write_text("")
    (foreign / "__main__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    monkeypatch.chdir(tmp_path)

    def fail(message: str, code: int) -> NoReturn:
        raise _Failed(message, code)

    with pytest.raises(_Failed) as failed:  # --help: the real driver prints usage, no result
        run_module(["--help"], fail=fail)
    assert "without writing its result" in failed.value.args[0]
    assert not marker.exists()
