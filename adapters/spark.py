"""Launching the Spark job (``spark_replay``) from the letterlog CLI, as a separate driver.

Import direction is ``spark_replay -> adapters``, never back, so the CLI starts the job the
way a user does: the pyspark package's ``spark-submit`` with ``spark_replay/submit.py``
(found beside this package, not imported), ``--master`` from the option or
``LETTERLOG_SPARK_MASTER``, ``JAVA_HOME`` a JDK 17, ``PYSPARK_PYTHON`` this interpreter,
the settings in ``LETTERLOG_`` variables. The job prints one JSON object; its errors
(``letterlog: error: ...``) are passed through with its exit code.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

from domain.errors import SettingsError

SUBMIT = Path(__file__).resolve().parent.parent / "spark_replay" / "submit.py"
LOCALHOST = "127.0.0.1"
RUN_DIRS = (".spark-runs-", ".spark-warm-up-")
"""The scratch directories a Spark rebuild makes in the data directory: each task's folded
tables (plain text: subjects, senders) as a run file, merged by the driver."""
_OWNER = ".owner"
_UNOWNED_GRACE_S = 60.0  # a directory made but not locked yet: its driver is starting


@contextlib.contextmanager
def run_directory(data: Path, prefix: str = RUN_DIRS[0]) -> Iterator[str]:
    """A scratch directory for one job's run files in ``data``, locked by this process for
    as long as the job runs and deleted when it ends, failed or not. A driver killed before
    it could delete it leaves it unlocked: ``remove_stale_runs`` deletes it then."""
    path = tempfile.mkdtemp(prefix=prefix, dir=data)
    owner = open(Path(path) / _OWNER, "a+")  # noqa: SIM115 - held for the whole job
    try:
        fcntl.flock(owner, fcntl.LOCK_EX)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
        owner.close()


def remove_stale_runs(data: Path) -> list[str]:
    """Deletes the run directories in ``data`` whose job is gone (no process holds their
    lock); returns their names. A running job's directory is left alone."""
    removed = []
    for prefix in RUN_DIRS:
        for path in sorted(Path(data).glob(prefix + "*")):
            lock = path / _OWNER
            try:
                if not lock.exists():
                    if time.time() - path.stat().st_mtime < _UNOWNED_GRACE_S:
                        continue
                    shutil.rmtree(path, ignore_errors=True)
                    removed.append(path.name)
                    continue
                with open(lock, "a+") as fh:
                    try:
                        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except BlockingIOError:
                        continue  # its job runs
                    shutil.rmtree(path, ignore_errors=True)
                    removed.append(path.name)
            except FileNotFoundError:
                continue  # its job ended meanwhile
    return removed


def spark_home() -> Path:
    """The installed ``pyspark`` package directory (it ships ``bin/spark-class``, jars)."""
    try:
        import pyspark
    except ImportError as exc:
        raise SettingsError("Spark: pyspark is not installed (pip install '.[spark]')") from exc
    return Path(pyspark.__file__).resolve().parent


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
    """What a Spark JVM or driver needs here: JAVA_HOME, SPARK_HOME, SPARK_LOCAL_IP (and with
    ``workdir`` worker and log directories in it)."""
    env = {"JAVA_HOME": str(java_home()), "SPARK_HOME": str(spark_home()),
           "SPARK_LOCAL_IP": os.environ.get("SPARK_LOCAL_IP", LOCALHOST)}
    if workdir is not None:
        env.update(SPARK_WORKER_DIR=str(workdir / "work"), SPARK_LOG_DIR=str(workdir / "logs"),
                   SPARK_PID_DIR=str(workdir))
    return env


def submit_command(args: Sequence[str], master: str) -> list[str]:
    return [str(spark_home() / "bin" / "spark-submit"), "--master", master,
            "--conf", "spark.ui.enabled=false", "--conf", "spark.driver.host=127.0.0.1",
            "--conf", "spark.ui.showConsoleProgress=false", str(SUBMIT), *args]


def submit_env(data: Path | None = None) -> dict[str, str]:
    env = dict(os.environ, **spark_env())
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if data is not None:
        env["LETTERLOG_DATA"] = str(Path(data).resolve())
    return env


def submit(args: Sequence[str], master: str | None, *, data: Path | None,
           fail: Callable[[str, int], NoReturn]) -> dict[str, Any]:
    """Runs the job to completion; its JSON result, or ``fail(message, code)``."""
    from adapters.settings import load_settings

    master = master or load_settings(data=data).spark_master
    return _result(subprocess.run(submit_command(args, master), env=submit_env(data),
                                  stdin=subprocess.DEVNULL, capture_output=True, check=False),
                   fail)


def run_module(args: Sequence[str], *, fail: Callable[[str, int], NoReturn]) -> dict[str, Any]:
    """``python -m spark_replay ARGS`` (a driver that starts its own sessions: the bench);
    its progress goes to this process's stderr."""
    done = subprocess.run([sys.executable, "-m", "spark_replay", *args], env=submit_env(),
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, check=False)
    return _result(done, fail)


def _result(done: subprocess.CompletedProcess[bytes],
            fail: Callable[[str, int], NoReturn]) -> dict[str, Any]:
    stderr = (done.stderr or b"").decode(errors="replace")
    errors = [line for line in stderr.splitlines()
              if line.startswith("letterlog: error: ")]
    if done.returncode != 0:
        if errors:
            fail(errors[-1].removeprefix("letterlog: error: "), done.returncode)
        tail = "\n".join(stderr.splitlines()[-15:])
        fail(f"the Spark job failed (exit {done.returncode}):\n{tail}", 1)
    for line in reversed(done.stdout.decode(errors="replace").splitlines()):
        if line.startswith("{"):
            return dict(json.loads(line))
    fail("the Spark job printed no result", 1)
