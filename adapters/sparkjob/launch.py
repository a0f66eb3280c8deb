"""Launching the Spark job (``spark_replay``) from the letterlog CLI, as a separate driver.

Import direction is ``spark_replay -> adapters``, never back, so the CLI starts the job the
way a user does: the pyspark package's ``spark-submit`` with ``spark_replay/submit.py``
(found beside this package, not imported) in the environment ``environment`` sets up. The
job prints one JSON object; its errors are passed through with its exit code (``outcome``).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from adapters.config.settings import load_settings
from adapters.files.filemodes import create_private
from adapters.sparkjob.environment import resolve_master, spark_home, submit_env
from adapters.sparkjob.outcome import logs_dir, read_result

SUBMIT = Path(__file__).resolve().parents[2] / "spark_replay" / "submit.py"
PROGRESS_PREFIX = "letterlog-progress "
"""What starts a progress line on the driver's standard output (``submit.py --progress``):
the rest of the line is one JSON object (``spark_replay.watch``)."""


def submit_command(args: Sequence[str], master: str,
                   conf: Sequence[tuple[str, str]] = ()) -> list[str]:
    """``spark-submit --master M [--conf K=V ...] submit.py ARGS``: nothing else is set on
    the command line, so ``spark-defaults.conf`` applies to what ``conf`` leaves."""
    options = [part for key, value in conf for part in ("--conf", f"{key}={value}")]
    return [str(spark_home() / "bin" / "spark-submit"), "--master", master, *options,
            str(SUBMIT), *args]


def submit(args: Sequence[str], master: str | None, *, data: Path,
           fail: Callable[[str, int], NoReturn],
           conf: Sequence[tuple[str, str]] = (),
           progress: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Runs the job to completion; its JSON result, or ``fail(message, code)``: one line,
    naming the file that keeps Spark's whole log (``<data>/spark-logs/``, or a directory
    of this user's in the temporary directory when the data directory is read-only; a
    successful job's log is deleted). ``progress`` gets each of the driver's progress
    events (``spark_replay.watch``) as it comes."""
    master = resolve_master(master, load_settings(data=data).spark_master)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    log = logs_dir(Path(data).resolve()) / f"{args[0]}-{stamp}-{os.getpid()}.log"
    fd = create_private(log)
    result = log.with_suffix(".json")
    command = submit_command(["--result", str(result), "--progress", *args], master, conf)
    try:
        done = _run_reading_progress(command, submit_env(data), fd, progress)
    finally:
        os.close(fd)
    if done.returncode == 0:
        log.unlink(missing_ok=True)
    else:  # spark-submit passes the driver's stderr on to its stdout: both go in the log
        with open(log, "ab") as fh:
            fh.write(b"\n==> the driver's standard output <==\n" + done.stdout)
    done.stderr = log.read_bytes() if log.exists() else b""
    return read_result(done, fail, result, log)


def _run_reading_progress(command: list[str], env: dict[str, str], stderr: int,
                          progress: Callable[[dict[str, Any]], None] | None
                          ) -> subprocess.CompletedProcess[bytes]:
    """``command`` run to its end, its progress lines handed to ``progress`` as they come;
    its other output kept as the completed process's stdout."""
    prefix = PROGRESS_PREFIX.encode()
    kept: list[bytes] = []
    with subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=stderr) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            if not line.startswith(prefix):
                kept.append(line)
                continue
            if progress is not None:
                with contextlib.suppress(ValueError):
                    progress(dict(json.loads(line[len(prefix):])))
        code = proc.wait()
    return subprocess.CompletedProcess(command, code, b"".join(kept), b"")


def run_module(args: Sequence[str], *, fail: Callable[[str, int], NoReturn]) -> dict[str, Any]:
    """``python -m spark_replay ARGS`` (a driver that starts its own sessions: the bench);
    its progress goes to this process's stderr."""
    with tempfile.TemporaryDirectory(prefix="letterlog-spark-") as where:
        result = Path(where) / "result.json"
        done = subprocess.run([sys.executable, "-P", "-m", "spark_replay", "--result", str(result),
                               *args], env=submit_env(), stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, check=False)
        return read_result(done, fail, result)
