"""A Spark job that cannot start says why in one line, within its start timeout, and a
healthy one shows its progress (issue 42 item 16, ADR 0093).

Each case hung silently before (the CLI printed nothing until killed from outside, for
minutes): executor memory above what any worker offers, a Python-worker memory limit too
small for a Python worker to start, no worker at all, executors that cannot reach the
address the driver advertises (a worker in a network namespace of its own,
``tests/spark/netns.py``). Each run here is bounded by ``spark.letterlog.startTimeout`` plus
the driver's own start and stop; ``timeout=`` on the subprocess is what would catch a hang.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.services.servers import in_ci
from tests.spark.netns import NamespacedCluster, can_make_namespaces
from tests.spark.support import _need_pyspark, make_store

pytestmark = [pytest.mark.spark, pytest.mark.slow]
LETTERLOG = [sys.executable, "-m", "adapters.cli"]
HANG = 240  # seconds: far below the 200-400 s hangs, far above a bounded failure


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cannot-start") / "data"
    make_store(path, messages=20)
    return path


def run(data: Path, *args: str, timeout: str = "15s") -> subprocess.CompletedProcess[str]:
    return subprocess.run([*LETTERLOG, "--data", str(data), *args,
                           "--conf", f"spark.letterlog.startTimeout={timeout}"],
                          capture_output=True, text=True, check=False, timeout=HANG)


def last_line(done: subprocess.CompletedProcess[str]) -> str:
    return done.stderr.strip().splitlines()[-1]


def test_a_healthy_job_shows_stages_tasks_and_positions_as_json_lines(spark_cluster, data):
    done = run(data, "--json", "rebuild", "--all", "--engine", "spark",
               "--master", spark_cluster.master_url)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)  # stdout keeps its one result object
    events = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    kinds = [e["event"] for e in events]
    assert kinds[:2] == ["starting", "started"], kinds
    assert events[1]["executors"] >= 1
    stages = [e for e in events if e["event"] == "stage"]
    assert stages and all(0 <= s["done"] <= s["tasks"] for s in stages)
    folded = [e for e in events if e["event"] == "events"]
    assert folded[-1] == {"event": "events", "folded": result["position"],
                          "of": result["position"]}
    assert [f["folded"] for f in folded] == sorted(f["folded"] for f in folded)


def test_on_a_terminal_the_progress_is_lines_for_a_person(data, tmp_path):
    done = run(data, "export", "--format", "parquet", "events", str(tmp_path / "events"),
               "--master", "local[2,2]")
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stderr.splitlines()
    assert any(line.startswith("spark: starting on local[2,2]") for line in lines), lines
    assert any(line.startswith("spark: started in ") for line in lines), lines
    assert not any(line.startswith("{") for line in lines)


def test_executor_memory_above_what_any_worker_offers_is_named(spark_cluster, data):
    done = run(data, "rebuild", "--all", "--engine", "spark", "--master",
               spark_cluster.master_url, "--conf", "spark.executor.memory=64g")
    assert done.returncode == 1, done.stderr[-3000:]
    line = last_line(done)
    assert line.startswith("letterlog: error: the Spark job cannot start within 15 s "
                           "(spark.letterlog.startTimeout): spark.executor.memory asks 64 GiB "
                           "per executor, more than any worker offers"), line
    assert "Spark's log: " in line


def test_a_python_worker_memory_limit_too_small_to_start_one_is_named(spark_cluster, data,
                                                                       tmp_path):
    done = run(data, "export", "--format", "parquet", "events", str(tmp_path / "events"),
               "--master", spark_cluster.master_url,
               "--conf", "spark.executor.pyspark.memory=2m")
    assert done.returncode == 1, done.stderr[-3000:]
    line = last_line(done)  # whether its worker crashed or never connected back
    assert line.startswith("letterlog: error: the Spark job cannot start"), line
    assert ("no Python worker started in the executors: spark.executor.pyspark.memory=2m"
            in line or "executors registered, but no Python worker started in them: "
            "spark.executor.pyspark.memory=2m" in line), line


@pytest.fixture
def bare_master(tmp_path: Path) -> Iterator[str]:
    """A standalone master with no worker."""
    from adapters.sparkjob.environment import spark_env, spark_home
    from devtools.devservers._common import free_ports, log_contains, spawn, terminate, wait_for

    port, ui = free_ports(2)
    log = tmp_path / "master.out"
    env = dict(os.environ, **spark_env(tmp_path))
    env.pop("PYSPARK_SUBMIT_ARGS", None)
    master = spawn([str(spark_home() / "bin" / "spark-class"),
                    "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                    "--port", str(port), "--webui-port", str(ui)], log=log, cwd=tmp_path,
                   env=env)
    try:
        wait_for(lambda: log_contains(log, "I have been elected leader"),
                 what="a bare Spark master", timeout=180, log_paths=[log], procs=[master])
        yield f"spark://127.0.0.1:{port}"
    finally:
        terminate(master, timeout=20)


def test_no_worker_at_all_is_named(bare_master, data, tmp_path):
    _need_pyspark()
    done = run(data, "export", "--format", "parquet", "events", str(tmp_path / "events"),
               "--master", bare_master, timeout="10s")
    assert done.returncode == 1, done.stderr[-3000:]
    assert last_line(done).startswith(
        "letterlog: error: the Spark job cannot start within 10 s "
        f"(spark.letterlog.startTimeout): no worker is registered with the master "
        f"{bare_master}"), last_line(done)


@pytest.fixture(scope="module")
def lone_namespace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NamespacedCluster]:
    """A master on the host side of a veth pair, its only worker in a namespace."""
    _need_pyspark()
    reason = can_make_namespaces()
    if reason is not None:
        if in_ci():
            pytest.fail(f"the multi-node Spark test cannot run: {reason}", pytrace=False)
        pytest.skip(reason)
    found = NamespacedCluster(tmp_path_factory.mktemp("netns-lone"), host_worker=False)
    found.start()
    try:
        yield found
    finally:
        found.stop()


def test_executors_that_cannot_reach_the_driver_are_named(lone_namespace, data):
    done = run(data, "rebuild", "counters", "--engine", "spark",
               "--master", lone_namespace.master_url,
               "--conf", "spark.driver.host=127.0.0.1", timeout="40s")
    assert done.returncode == 1, done.stderr[-3000:]
    line = last_line(done)
    assert f"launched on {lone_namespace.ns_ip}, none registered with the driver at " \
           "127.0.0.1:" in line, line
    assert "cannot reach that address; set spark.driver.host" in line
    assert "Connection refused" in lone_namespace.executor_logs("b")
