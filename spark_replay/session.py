"""The one place a Spark session is made.

The operator's Spark configuration wins (ADR 0054); letterlog adds only the settings
nothing configures (``conf.safe_defaults``) and records which they were. Under
``spark-submit`` its ``--master`` applies unless a master is given; started from Python, the
master is the one given, else ``spark.master`` from ``spark-defaults.conf``, else
``local[2,2]`` (two cores, a failed task retried once).
"""

from __future__ import annotations

import os
from typing import Any

from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession

from adapters.bootstrap.spark import DEFAULT_MASTER, check_master, defaults_file
from spark_replay.conf import prepare_environment, safe_defaults

DEFAULTS_KEY = "spark.letterlog.defaults"
"""Where a session records which settings were letterlog's defaults (``effective_conf``)."""
REPORTED = ("spark.master", "spark.driver.host", "spark.ui.enabled", "spark.log.level",
            "spark.sql.shuffle.partitions", "spark.task.maxFailures")


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
