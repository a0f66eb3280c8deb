"""The one place a Spark session is made.

The operator's Spark configuration wins (ADR 0054): whatever ``spark-submit --conf``,
``spark-defaults.conf`` (in ``SPARK_CONF_DIR``, else ``$SPARK_HOME/conf``), ``SPARK_LOCAL_IP``
or a ``log4j2.properties`` already says is never set over. ``safe_defaults`` names the few
settings letterlog adds where nothing is configured:

* ``spark.ui.enabled=false``, ``spark.ui.showConsoleProgress=false`` (a batch job: no web
  server on a port, no progress bars in the job's log);
* ``spark.log.level=WARN`` unless a log4j2 configuration is in the configuration directory;
* on a ``local`` master only, ``spark.driver.host`` / ``spark.driver.bindAddress``
  ``127.0.0.1`` unless ``SPARK_LOCAL_IP`` or ``SPARK_LOCAL_HOSTNAME`` is set (on a cluster
  Spark's own choice stands: ``SPARK_LOCAL_IP``, else the host's address; executors on
  other hosts must reach the driver there);
* ``spark.sql.execution.arrow.maxRecordsPerBatch=2000``.

``JAVA_HOME`` (a JDK 17) and ``PYSPARK_PYTHON`` (this interpreter) are set in the
environment only when unset. Under ``spark-submit`` its ``--master`` applies unless a master
is given; started from Python, the master is the one given, else ``spark.master`` from
``spark-defaults.conf``, else ``local[2,2]`` (two cores, a failed task retried once).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession

from adapters.bootstrap.spark import (
    DEFAULT_MASTER,
    check_master,
    conf_dir,
    defaults_file,
    java_home,
)

DEFAULTS_KEY = "spark.letterlog.defaults"
"""Where a session records which settings were letterlog's defaults (``effective_conf``)."""
REPORTED = ("spark.master", "spark.driver.host", "spark.ui.enabled", "spark.log.level",
            "spark.sql.shuffle.partitions", "spark.task.maxFailures")
LOCALHOST = "127.0.0.1"
_LOG4J_FILES = ("log4j2.properties", "log4j2.xml", "log4j2.yaml", "log4j2.json")


def prepare_environment() -> None:
    """JAVA_HOME and PYSPARK_PYTHON for a driver started from Python (only when unset)."""
    if not os.environ.get("JAVA_HOME"):
        os.environ["JAVA_HOME"] = str(java_home())
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def safe_defaults(configured: Mapping[str, str], master: str,
                  environ: Mapping[str, str]) -> dict[str, str]:
    """The settings letterlog adds to a session: only those nothing in ``configured`` (the
    session's Spark configuration before it starts) or ``environ`` already decides."""
    wanted = {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
              "spark.sql.execution.arrow.maxRecordsPerBatch": "2000"}
    if not _log4j_configured(configured, environ):
        wanted["spark.log.level"] = "WARN"
    if master.startswith("local") and not (environ.get("SPARK_LOCAL_IP")
                                           or environ.get("SPARK_LOCAL_HOSTNAME")):
        wanted["spark.driver.host"] = LOCALHOST
        if "spark.driver.host" not in configured:
            wanted["spark.driver.bindAddress"] = LOCALHOST
    return {k: v for k, v in wanted.items() if k not in configured}


def _log4j_configured(configured: Mapping[str, str], environ: Mapping[str, str]) -> bool:
    options = configured.get("spark.driver.extraJavaOptions", "")
    if "log4j.configurationFile" in options or "log4j2.configurationFile" in options:
        return True
    found = conf_dir(environ)
    return found is not None and any((found / name).is_file() for name in _LOG4J_FILES)


def configured_conf() -> dict[str, str]:
    """The Spark configuration a session would start with: ``spark-submit``'s options and
    ``spark-defaults.conf`` (read by the JVM that ``spark-submit`` or PySpark starts)."""
    SparkContext._ensure_initialized()  # the JVM gateway: it has read the operator's conf
    return dict(SparkConf().getAll())


def spark_session(master: str | None = None, app_name: str = "letterlog-replay",
                  conf: dict[str, str] | None = None) -> Any:
    """A Spark session on ``master`` (see the module docstring), or the active one."""
    active = SparkSession.getActiveSession()
    if active is not None and (master is None or active.sparkContext.master == master):
        return active
    if active is not None:
        active.stop()
    prepare_environment()
    under_submit = "PYSPARK_GATEWAY_PORT" in os.environ
    if master is None and not under_submit:
        master = defaults_file(os.environ).get("spark.master") or DEFAULT_MASTER
    configured = {**configured_conf(), **(conf or {})}
    if master is not None:
        configured["spark.master"] = master
    check_master(configured.get("spark.master", ""))  # at once, not after a minute of retries
    builder = SparkSession.builder
    if master is not None:
        builder = builder.master(master)
    if not under_submit:  # else spark-submit's --name (or the script's name)
        builder = builder.appName(app_name)
    added = safe_defaults(configured, configured.get("spark.master", ""), os.environ)
    for key, value in {**added, **(conf or {}), DEFAULTS_KEY: ",".join(sorted(added))}.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def effective_conf(session: Any) -> dict[str, Any]:
    """What the running session was configured with, for a job's result: the settings
    operators ask about, and which of them were letterlog's defaults (``defaults``)."""
    conf = session.sparkContext.getConf()
    shown = {key: conf.get(key) for key in REPORTED if conf.contains(key)}
    added = conf.get(DEFAULTS_KEY, "")
    return {**shown, "defaults": [k for k in added.split(",") if k]}
