"""A Spark driver's outcome as the CLI sees it: its JSON result, or one line saying why it
failed (its ``letterlog: error:`` line, the Python exception a task raised, else the JVM's
last exception line), naming the file that keeps Spark's log (``logs_dir``)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from adapters.files.filemodes import private_dir
from domain.errors import LetterlogError

LOGS = "spark-logs"
"""The data directory's folder for the logs of failed Spark jobs started by the CLI."""


class SparkJobFailed(LetterlogError):
    """The Spark job could not run or did not finish: the master unreachable, a task's
    Python exception. Not the user's input: exit status 1."""

    exit_code = 1



_TRACEBACK = "Traceback (most recent call last):"
_PY_RAISED = re.compile(r"^([A-Za-z_][\w.]*): (.+)$|^([A-Za-z_][\w.]*(?:Error|Exception))$")


def python_exception(text: str) -> str | None:
    """The Python exception a task raised, ``Type: message``, from the Java exception text
    Spark wraps it in (``PythonException: Traceback ...``), or ``None``."""
    start = text.rfind(_TRACEBACK)
    if start < 0:
        return None
    for line in text[start + len(_TRACEBACK):].splitlines():
        found = _PY_RAISED.match(line)
        if found and not line.startswith((" ", "\t", "org.", "java.", "py4j.", "scala.")):
            return line.strip()
    return None


def read_result(done: subprocess.CompletedProcess[bytes], fail: Callable[[str, int], NoReturn],
            result: Path, log: Path | None = None) -> dict[str, Any]:
    """The result the driver wrote to ``result`` (``--result``), or ``fail`` with its error
    line, its exception or the named log."""
    stderr = (done.stderr or b"").decode(errors="replace")
    output = stderr + "\n" + (done.stdout or b"").decode(errors="replace")
    errors = [line for line in output.splitlines()
              if line.startswith("letterlog: error: ")]
    if done.returncode != 0:
        where = f" (Spark's log: {log})" if log is not None else ""
        if errors:
            fail(errors[-1].removeprefix("letterlog: error: ") + where, done.returncode)
        fail(f"the Spark job failed (exit {done.returncode}): {_cause(stderr)}{where}", 1)
    try:
        found = dict(json.loads(result.read_text()))
    except (OSError, ValueError) as e:
        fail(f"the Spark job ended without writing its result ({e})", 1)
    result.unlink(missing_ok=True)
    return found


def _cause(stderr: str) -> str:
    """One line saying why a driver that printed no ``letterlog: error:`` line failed: a
    Python exception, else the JVM's last exception or error line."""
    found = python_exception(stderr)
    if found:
        return found
    for line in reversed(stderr.splitlines()):
        text = line.strip()
        if text.startswith(("Exception in thread", "Error: ")) or re.match(
                r"^[\w.$]+(Exception|Error): ", text):
            return text
    return "no error line in its log"


def logs_dir(data: Path) -> Path:
    """Where the CLI keeps a Spark job's log: ``<data>/spark-logs``, else (a read-only
    store: a snapshot, a backup mount) ``letterlog-spark-logs-<uid>`` in the temporary
    directory, 0700 either way."""
    try:
        return private_dir(data / LOGS)
    except OSError:
        return private_dir(Path(tempfile.gettempdir()) / f"letterlog-{LOGS}-{os.getuid()}")
