"""The one place a Spark session is made.

``spark_session(master)`` points Spark at a JDK 17 (``JAVA_HOME``), sets ``PYSPARK_PYTHON``
to this interpreter (executors import letterlog from the same environment), binds the
driver to 127.0.0.1 unless ``SPARK_LOCAL_IP`` says otherwise, and turns the web UI off.
Under ``spark-submit`` its ``--master`` (and other options) apply unless a master is given.
"""

from __future__ import annotations

import os
import sys
from typing import Any

DEFAULT_MASTER = "local[2]"


def prepare_environment() -> None:
    """JAVA_HOME, SPARK_LOCAL_IP and PYSPARK_PYTHON for a driver started from Python."""
    if not os.environ.get("JAVA_HOME"):
        from adapters.spark import java_home

        os.environ["JAVA_HOME"] = str(java_home())
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def spark_session(master: str | None = None, app_name: str = "letterlog-replay",
                  conf: dict[str, str] | None = None) -> Any:
    """A Spark session on ``master`` (default ``local[2]``), or the active one."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None and (master is None or active.sparkContext.master == master):
        return active
    if active is not None:
        active.stop()
    prepare_environment()
    builder = SparkSession.builder
    if master is not None or "PYSPARK_GATEWAY_PORT" not in os.environ:
        builder = builder.master(master or DEFAULT_MASTER)  # else spark-submit's --master
    builder = (builder.appName(app_name)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.host", os.environ["SPARK_LOCAL_IP"])
               .config("spark.sql.shuffle.partitions", "8")
               .config("spark.sql.execution.arrow.maxRecordsPerBatch", "2000")
               .config("spark.executorEnv.PYSPARK_PYTHON", os.environ["PYSPARK_PYTHON"]))
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
