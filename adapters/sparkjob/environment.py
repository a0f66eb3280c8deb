"""Where Spark is and how it is set up for a job the CLI starts: the pyspark package
(``spark_home``), a JDK 17 (``java_home``), the environment a JVM or driver needs
(``spark_env``, and a driver's: ``submit_env``), the master (``resolve_master``) and the operator's
``spark-defaults.conf``."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from importlib.util import find_spec
from pathlib import Path

from domain.errors import SettingsError

LOCALHOST = "127.0.0.1"
DEFAULT_MASTER = "local[2,2]"
"""Two cores; a failed task is tried twice (``local[N]`` never retries one)."""
_PROPERTY = re.compile(r"([^\s=:]+)\s*[\s=:]\s*(.*)")


def spark_home() -> Path:
    """The installed ``pyspark`` package directory (it ships ``bin/spark-class``, jars)."""
    found = find_spec("pyspark")  # found, not imported: the CLI only runs its programs
    if found is None or found.origin is None:
        raise SettingsError("Spark: pyspark is not installed (pip install '.[spark]')")
    return Path(found.origin).resolve().parent


def java_home() -> Path:
    """A JDK for Spark: ``$LETTERLOG_JAVA_HOME``, ``$JAVA_HOME``, else a JDK 17 in
    ``/usr/lib/jvm`` (Spark 4.0 runs on 17 and 21)."""
    for var in ("LETTERLOG_JAVA_HOME", "JAVA_HOME"):
        home = os.environ.get(var)
        if home and (Path(home) / "bin" / "java").exists():
            return Path(home)
    for found in sorted(Path("/usr/lib/jvm").glob("*17*/bin/java")):
        return found.parent.parent
    raise SettingsError("Spark: no JDK 17 found; set LETTERLOG_JAVA_HOME")


def spark_env(workdir: Path | None = None) -> dict[str, str]:
    """What a Spark JVM or driver needs here: JAVA_HOME (a JDK 17 unless set), SPARK_HOME
    (the pyspark package unless set); with ``workdir`` (the test cluster's JVMs) also
    worker and log directories in it and SPARK_LOCAL_IP 127.0.0.1 unless set."""
    env = {"JAVA_HOME": os.environ.get("JAVA_HOME") or str(java_home()),
           "SPARK_HOME": os.environ.get("SPARK_HOME") or str(spark_home())}
    if workdir is not None:
        env.update(SPARK_WORKER_DIR=str(workdir / "work"), SPARK_LOG_DIR=str(workdir / "logs"),
                   SPARK_PID_DIR=str(workdir),
                   SPARK_LOCAL_IP=os.environ.get("SPARK_LOCAL_IP", LOCALHOST))
    return env


def resolve_master(master: str | None, settings_master: str | None) -> str:
    """``--master``, else ``LETTERLOG_SPARK_MASTER``, else ``spark.master`` in the operator's
    ``spark-defaults.conf``, else ``local[2,2]``."""
    env = dict(os.environ, **spark_env())
    return master or settings_master or defaults_file(env).get("spark.master") or DEFAULT_MASTER


def conf_dir(environ: Mapping[str, str]) -> Path | None:
    """Where Spark reads ``spark-defaults.conf`` and ``log4j2.properties``."""
    if environ.get("SPARK_CONF_DIR"):
        return Path(environ["SPARK_CONF_DIR"])
    if environ.get("SPARK_HOME"):
        return Path(environ["SPARK_HOME"]) / "conf"
    return None


def defaults_file(environ: Mapping[str, str]) -> dict[str, str]:
    """``spark-defaults.conf`` as Spark reads it (``key value`` or ``key=value`` lines)."""
    found = conf_dir(environ)
    path = found / "spark-defaults.conf" if found else None
    if path is None or not path.is_file():
        return {}
    values = {}
    for line in path.read_text(errors="replace").splitlines():
        match = _PROPERTY.match(line.strip())
        if match and not line.strip().startswith(("#", "!")):
            values[match.group(1)] = match.group(2).strip()
    return values


def submit_env(data: Path | None = None) -> dict[str, str]:
    env = dict(os.environ, **spark_env())
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if data is not None:
        env["LETTERLOG_DATA"] = str(Path(data).resolve())
    return env
