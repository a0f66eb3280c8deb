"""Real Spark for the replay tests: one ``local[2,2]`` session for the whole test session
(two cores; ``,2`` lets a failed task be retried once, as a cluster does), and a standalone
cluster (master + worker JVMs from the pyspark package) for the cluster legs, which run the
CLI in a separate driver process (one Spark context per process).

Without pyspark or a JDK the tests skip, except under ``CI=true``, where they fail.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from devtools.devservers import SparkCluster
from tests.services.conftest import hbase_server, postgres_server  # noqa: F401
from tests.services.servers import _fixture
from tests.spark.support import _need_pyspark


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








