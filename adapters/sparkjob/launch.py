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
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

from adapters.config.settings import load_settings
from adapters.files.datadir import check_data_dir
from adapters.files.filemodes import create_private, private_dir
from domain.errors import LetterlogError, SettingsError

SUBMIT = Path(__file__).resolve().parents[2] / "spark_replay" / "submit.py"
LOCALHOST = "127.0.0.1"
DEFAULT_MASTER = "local[2,2]"
"""Two cores; a failed task is tried twice (``local[N]`` never retries one)."""
_PROPERTY = re.compile(r"([^\s=:]+)\s*[\s=:]\s*(.*)")
RUN_DIRS = (".spark-runs-", ".spark-warm-up-")
"""The scratch directories a Spark rebuild makes in the data directory: each task's folded
tables (plain text: subjects, senders) as a run file, merged by the driver."""
PROGRESS_PREFIX = "letterlog-progress "
"""What starts a progress line on the driver's standard output (``submit.py --progress``):
the rest of the line is one JSON object (``spark_replay.watch``)."""
LOGS = "spark-logs"
"""The data directory's folder for the logs of failed Spark jobs started by the CLI."""
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


class SparkJobFailed(LetterlogError):
    """The Spark job could not run or did not finish: the master unreachable, a task's
    Python exception. Not the user's input: exit status 1."""

    exit_code = 1


def require_store(settings: Any, *, read_only: bool = False) -> None:
    """``StoreUnavailable`` (exit 2) unless ``settings.data`` holds a store: a rebuild or an
    export never makes one (a mistyped ``--data`` is not an empty store at position 0).
    ``read_only``: the export, which only reads, takes a data directory it cannot write."""
    check_data_dir(Path(settings.data), settings.event_store == "sqlite", False,
                   allow_shared=settings.allow_shared_keys, vault=settings.key_vault,
                   writable=not read_only)


def check_master(master: str, timeout: float = 5.0) -> None:
    """``SparkJobFailed`` unless one of a ``spark://`` master's addresses answers a TCP
    connection within ``timeout`` (Spark itself retries for about a minute, then logs only
    that the masters are unresponsive); other masters are not checked."""
    if not master.startswith("spark://"):
        return
    errors = []
    for address in master.removeprefix("spark://").split(","):
        host, _, port = address.rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=timeout):
                return
        except (OSError, ValueError) as e:
            errors.append(f"{address}: {getattr(e, 'strerror', None) or e}")
    raise SparkJobFailed(f"the Spark master {master} is unreachable ({'; '.join(errors)})")


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


def spark_home() -> Path:
    """The installed ``pyspark`` package directory (it ships ``bin/spark-class``, jars)."""
    try:
        # local: an optional dependency, tried where it is used
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


def parse_conf(items: Sequence[str]) -> list[tuple[str, str]]:
    """``--conf K=V`` options as pairs; ``SettingsError`` naming a malformed one."""
    pairs = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or key != key.strip():
            raise SettingsError(f"--conf: {item!r} is not KEY=VALUE (e.g. "
                                "spark.executor.memory=4g)")
        pairs.append((key, value))
    return pairs


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


def submit_command(args: Sequence[str], master: str,
                   conf: Sequence[tuple[str, str]] = ()) -> list[str]:
    """``spark-submit --master M [--conf K=V ...] submit.py ARGS``: nothing else is set on
    the command line, so ``spark-defaults.conf`` applies to what ``conf`` leaves."""
    options = [part for key, value in conf for part in ("--conf", f"{key}={value}")]
    return [str(spark_home() / "bin" / "spark-submit"), "--master", master, *options,
            str(SUBMIT), *args]


def submit_env(data: Path | None = None) -> dict[str, str]:
    env = dict(os.environ, **spark_env())
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if data is not None:
        env["LETTERLOG_DATA"] = str(Path(data).resolve())
    return env


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
    return _result(done, fail, result, log)


def logs_dir(data: Path) -> Path:
    """Where the CLI keeps a Spark job's log: ``<data>/spark-logs``, else (a read-only
    store: a snapshot, a backup mount) ``letterlog-spark-logs-<uid>`` in the temporary
    directory, 0700 either way."""
    try:
        return private_dir(data / LOGS)
    except OSError:
        return private_dir(Path(tempfile.gettempdir()) / f"letterlog-{LOGS}-{os.getuid()}")


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
        done = subprocess.run([sys.executable, "-m", "spark_replay", "--result", str(result),
                               *args], env=submit_env(), stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, check=False)
        return _result(done, fail, result)


def _result(done: subprocess.CompletedProcess[bytes], fail: Callable[[str, int], NoReturn],
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
