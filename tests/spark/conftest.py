"""Real Spark for the replay tests: one ``local[2,2]`` session for the whole test session
(two cores; ``,2`` lets a failed task be retried once, as a cluster does), and a standalone
cluster (master + worker JVMs from the pyspark package) for the cluster legs, which run the
CLI in a separate driver process (one Spark context per process).

Without pyspark or a JDK the tests skip, except under ``CI=true``, where they fail.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adapters.devservers import SparkCluster
from tests.services.conftest import _fixture, hbase_server, in_ci, postgres_server  # noqa: F401


def _need_pyspark() -> None:
    try:
        import pyspark  # noqa: F401
    except ImportError as e:
        if in_ci():
            pytest.fail(f"pyspark is not installed: {e}", pytrace=False)
        pytest.skip(f"pyspark is not installed: {e}")


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    _need_pyspark()
    from spark_replay.session import spark_session

    session = spark_session("local[2,2]", "letterlog-tests")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def spark_cluster() -> Iterator[SparkCluster]:
    _need_pyspark()
    yield from _fixture("spark", SparkCluster)  # type: ignore[misc]


def make_store(data: Path, messages: int = 40, **settings: Any) -> None:
    """A data directory whose log holds every kind of command (the demo's script)."""
    from adapters.cli.demo import run_demo
    from adapters.embedded import Letterlog

    with Letterlog.open(data, **settings) as store:
        run_demo(store, messages=messages, as_json=True)
