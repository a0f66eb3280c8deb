"""Launching the Spark job (``spark_replay``) from the letterlog CLI, as a separate driver.

Import direction is ``spark_replay -> adapters``, never back, so the CLI starts the job the
way a user does: the pyspark package's ``spark-submit`` with ``spark_replay/submit.py``
(found beside this package, not imported), ``--master`` from the option or
``LETTERLOG_SPARK_MASTER``, ``JAVA_HOME`` a JDK 17, ``PYSPARK_PYTHON`` this interpreter,
the settings in ``LETTERLOG_`` variables. The job prints one JSON object; its errors
(``letterlog: error: ...``) are passed through with its exit code.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

SUBMIT = Path(__file__).resolve().parent.parent / "spark_replay" / "submit.py"


def submit_command(args: Sequence[str], master: str) -> list[str]:
    from adapters.devservers.spark import spark_home

    return [str(spark_home() / "bin" / "spark-submit"), "--master", master,
            "--conf", "spark.ui.enabled=false", "--conf", "spark.driver.host=127.0.0.1",
            "--conf", "spark.ui.showConsoleProgress=false", str(SUBMIT), *args]


def submit_env(data: Path | None = None) -> dict[str, str]:
    from adapters.devservers.spark import spark_env

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
