"""What letterlog adds to a Spark session's configuration: only what the operator has not
configured (ADR 0054). Whatever ``spark-submit --conf``, ``spark-defaults.conf`` (in
``SPARK_CONF_DIR``, else ``$SPARK_HOME/conf``), ``SPARK_LOCAL_IP`` or a
``log4j2.properties`` already says is never set over. ``safe_defaults`` names the few
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
environment only when unset (``prepare_environment``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from adapters.bootstrap.spark import conf_dir, java_home

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
