"""The CLI's Spark rebuild (``spark-submit`` underneath) on a real standalone cluster and on
local[2] in a driver process of its own: SQLite, PostgreSQL + HBase, a driver killed."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.spark.support import make_store

pytestmark = [pytest.mark.spark, pytest.mark.slow]
LETTERLOG = [sys.executable, "-m", "adapters.cli"]


def letterlog(data: Path, *args: str, env: dict[str, str] | None = None,
              check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([*LETTERLOG, "--data", str(data), *args], capture_output=True,
                          text=True, env={**os.environ, **(env or {})}, timeout=600,
                          check=False)
    if check:
        assert done.returncode == 0, done.stderr[-3000:]
    return done


def verified(data: Path, env: dict[str, str] | None = None) -> list[dict]:
    done = letterlog(data, "--json", "verify", "--all", env=env)
    reports = [json.loads(line) for line in done.stdout.splitlines()]
    assert reports and all(r["identical"] for r in reports), reports
    return reports


def generation(data: Path, env: dict[str, str] | None = None) -> int:
    from adapters.embedded import Letterlog

    saved = dict(os.environ)
    os.environ.update(env or {})
    try:
        with Letterlog.open(data) as store:
            return store.projections.catalog.generation
    finally:
        os.environ.clear()
        os.environ.update(saved)


def test_cli_rebuild_on_a_standalone_cluster_matches_the_live_tables(spark_cluster, tmp_path):
    make_store(tmp_path / "data")
    before = generation(tmp_path / "data")
    done = letterlog(tmp_path / "data", "--json", "rebuild", "--all", "--engine", "spark",
                     "--master", spark_cluster.master_url)
    result = json.loads(done.stdout)
    assert result["master"] == spark_cluster.master_url
    covering = result["folds"]["by_position" if result["layout"] == "by_position" else "by_account"]
    assert result["position"] == sum(covering["partition_events"])  # every event, once
    assert generation(tmp_path / "data") == before + 1
    assert any(r["cells"] for r in verified(tmp_path / "data"))


@pytest.mark.services
def test_postgres_log_rebuilt_into_hbase_on_the_cluster_verifies_identical(
        spark_cluster, postgres_server, hbase_server, tmp_path):
    env = {"LETTERLOG_EVENT_STORE": "postgres", "LETTERLOG_POSTGRES_DSN": postgres_server.dsn,
           "LETTERLOG_TABLE_STORE": "hbase", "LETTERLOG_HBASE_HOST": hbase_server.thrift_host,
           "LETTERLOG_HBASE_PORT": str(hbase_server.thrift_port),
           "LETTERLOG_HBASE_TABLE_PREFIX": "spark" + secrets.token_hex(3)}
    make_store(tmp_path / "data", messages=20,
               **{k.removeprefix("LETTERLOG_").lower(): v for k, v in env.items()})
    done = letterlog(tmp_path / "data", "--json", "rebuild", "--all", "--engine", "spark",
                     "--master", spark_cluster.master_url, env=env)
    result = json.loads(done.stdout)
    assert result["generation"] == generation(tmp_path / "data", env) >= 1
    reports = verified(tmp_path / "data", env)
    assert sum(r["cells"] for r in reports) > 100


def test_a_driver_killed_mid_load_leaves_the_old_tables_live_and_a_rerun_succeeds(tmp_path):
    data = tmp_path / "data"
    make_store(data, messages=60)
    before = generation(data)
    driver = subprocess.Popen([*LETTERLOG, "--data", str(data), "rebuild", "--all",
                               "--engine", "spark", "--master", "local[2]"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    deadline = time.monotonic() + 300
    while not any(data.glob(".spark-runs-*/run-*")):  # a task is loading its folded tables
        assert driver.poll() is None, "the job ended before any task loaded"
        assert time.monotonic() < deadline
        time.sleep(0.02)
    os.killpg(driver.pid, signal.SIGKILL)
    driver.wait()
    assert generation(data) == before
    verified(data)
    letterlog(data, "rebuild", "--all", "--engine", "spark", "--master", "local[2]")
    assert generation(data) == before + 1
    assert not any(data.glob(".spark-runs-*"))
    verified(data)
