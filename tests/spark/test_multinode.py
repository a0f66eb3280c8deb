"""The rebuild and the export on a standalone cluster over two network stacks: a worker in
a network namespace of its own (``tests/spark/netns.py``), whose executor reaches the
driver only at the address the driver advertises (``--conf spark.driver.host``)."""

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


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NamespacedCluster]:
    _need_pyspark()
    reason = can_make_namespaces()
    if reason is not None:
        if in_ci():
            pytest.fail(f"the multi-node Spark test cannot run: {reason}", pytrace=False)
        pytest.skip(reason)
    found = NamespacedCluster(tmp_path_factory.mktemp("netns-spark"))
    found.start()  # stops what it started if it fails
    try:
        yield found
    finally:
        found.stop()


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("netns-data") / "data"
    make_store(path, messages=40, hierarchy=True)
    return path


def on_cluster(cluster: NamespacedCluster, data: Path, *args: str,
               driver_host: str | None = None, wait: str = "60s") -> dict:
    done = subprocess.run(
        [*LETTERLOG, "--data", str(data), "--json", *args, "--master", cluster.master_url,
         "--conf", f"spark.driver.host={driver_host or cluster.host_ip}",
         "--conf", "spark.cores.max=2", "--conf", "spark.executor.cores=1",
         "--conf", "spark.executor.memory=640m",
         "--conf", f"spark.scheduler.maxRegisteredResourcesWaitingTime={wait}"],
        capture_output=True, text=True, check=False, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads(done.stdout.splitlines()[-1]))


def test_the_rebuild_runs_on_both_network_stacks_and_verifies_identical(cluster, data):
    result = on_cluster(cluster, data, "rebuild", "--all", "--engine", "spark")
    assert result["master"] == cluster.master_url
    assert result["spark_conf"]["spark.driver.host"] == cluster.host_ip
    # both executors registered (the namespace's reached the driver), and the layout and
    # partitions were chosen for their 2 cores
    assert (result["executors_registered"], result["executors_expected"]) == (2, 2)
    assert result["cores"] == 2 and result["spark_partitions"] == 8
    assert result["failed_task_attempts"] == 0
    inside = cluster.executor_logs("b")
    assert "Successfully registered with driver" in inside and "Running task" in inside
    verify = subprocess.run([*LETTERLOG, "--data", str(data), "--json", "verify", "--all"],
                            capture_output=True, text=True, check=False, timeout=600)
    reports = [json.loads(line) for line in verify.stdout.splitlines()]
    assert verify.returncode == 0 and reports and all(r["identical"] for r in reports)
    assert sum(r["cells"] for r in reports) > 100


def test_the_export_runs_there_and_holds_every_event_once(cluster, data, tmp_path):
    import pyarrow.dataset as ds

    from adapters.embedded import Letterlog

    result = on_cluster(cluster, data, "export", "events", str(tmp_path / "events"))
    table = ds.dataset(tmp_path / "events", format="parquet", partitioning="hive").to_table(
        columns=["position", "type"])
    exported = sorted(zip(table.column("position").to_pylist(),
                          table.column("type").to_pylist(), strict=True))
    with Letterlog.open(data, create=False) as store:
        logged = [(p, type(e).__qualname__) for p, e in store.events()]
    assert exported == logged and result["rows"] == len(logged)


def test_a_driver_advertised_where_the_namespace_cannot_reach_it_loses_that_executor(
        cluster, data):
    """What the first test's assertion rests on: with the driver on 127.0.0.1, the
    namespace's executor never registers (its loopback is its own)."""
    result = on_cluster(cluster, data, "rebuild", "counters", "--engine", "spark",
                        driver_host="127.0.0.1", wait="12s")
    assert result["spark_conf"]["spark.driver.host"] == "127.0.0.1"
    assert (result["executors_registered"], result["executors_expected"]) == (1, 2)
    assert result["executors_wait_s"] >= 11


def test_teardown_leaves_no_namespace_or_process(tmp_path):
    if can_make_namespaces() is not None:
        pytest.skip("needs root")
    probe = NamespacedCluster(tmp_path)
    probe._network()
    probe.stop()
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                           check=True).stdout
    links = subprocess.run(["ip", "-br", "link"], capture_output=True, text=True,
                           check=True).stdout
    assert probe.netns not in names and probe.host_if not in links
    assert os.path.exists(tmp_path)
