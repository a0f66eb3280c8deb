"""Shared machinery for the real test/dev servers: ports, logs, waiting, processes and the
``Service`` base class (installing what they need: ``toolchain``).

Nothing here imports a client library at module import time: the probes import psycopg,
happybase or aiokafka lazily, so `import adapters.devservers` works without the extras.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pwd
import re
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Self

from adapters.supervision import Handle, Launch, Program

__all__ = [
    "Handle",
    "Launch",
    "Program",
    "ServiceFailed",
    "Service",
    "cache_dir",
    "free_port",
    "free_ports",
    "wait_for",
    "tail_file",
    "terminate",
]

LOCALHOST = "127.0.0.1"
PRIVATE_UMASK = 0o077  # what a private server's processes create: 0600 files, 0700 dirs
OPEN_TO_OTHERS = 0o077


class ServiceFailed(RuntimeError):
    """A server could not be installed, started or probed.

    The message names the log files and carries their tail, so a failing test shows why.
    """

    def __init__(self, message: str, *, log_paths: Sequence[Path] = (), tail: str = "") -> None:
        self.log_paths = [Path(p) for p in log_paths]
        self.tail = tail
        text = message
        if self.log_paths:
            text += "\nlog files:\n" + "\n".join(f"  {p}" for p in self.log_paths)
        if tail:
            text += "\n" + tail
        super().__init__(text)


# --------------------------------------------------------------------------- paths


def cache_dir() -> Path:
    """`${LETTERLOG_CACHE:-~/.cache/letterlog}`, created on demand."""
    raw = os.environ.get("LETTERLOG_CACHE") or os.path.join("~", ".cache", "letterlog")
    path = Path(raw).expanduser().resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def file_lock(name: str) -> Iterator[None]:
    """An exclusive advisory lock under `<cache>/locks` (two installs never race)."""
    import fcntl

    lock_dir = cache_dir() / "locks"
    lock_dir.mkdir(parents=True, exist_ok=True)
    with open(lock_dir / f"{name}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def make_private(root: Path) -> int:
    """Every directory and file under ``root`` (and ``root``) closed to group and others
    (their bits taken away; symbolic links left alone); how many were changed. Run on a
    server's work dir after ``prepare`` (its configuration, written by this process, and
    data kept from a start made before the servers' files were private)."""
    changed = 0
    for dirpath, dirs, files in os.walk(root):
        for name in [dirpath, *(os.path.join(dirpath, n) for n in dirs + files)]:
            try:
                st = os.lstat(name)
            except FileNotFoundError:
                continue  # a server's cleaner removed it meanwhile
            if stat.S_ISLNK(st.st_mode) or not st.st_mode & OPEN_TO_OTHERS:
                continue
            os.chmod(name, stat.S_IMODE(st.st_mode) & ~OPEN_TO_OTHERS)
            changed += 1
    return changed


def _open_log(log: Path, umask: int | None) -> Any:
    """``log`` opened for appending; created 0600 (its missing directories 0700) when
    ``umask`` asks for private files."""
    if umask is None:
        log.parent.mkdir(parents=True, exist_ok=True)
        return open(log, "ab")  # noqa: SIM115 - the caller closes it
    for missing in reversed([d for d in (log.parent, *log.parent.parents) if not d.exists()]):
        with contextlib.suppress(FileExistsError):
            os.mkdir(missing, 0o777 & ~umask)
            os.chmod(missing, 0o777 & ~umask)
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666 & ~umask)
    return os.fdopen(fd, "ab")


# --------------------------------------------------------------------------- ports


def free_ports(count: int, host: str = LOCALHOST) -> list[int]:
    """`count` distinct ports that were free on `host` a moment ago.

    All sockets are held open until every port is chosen, so the ports are distinct.
    """
    socks: list[socket.socket] = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def free_port(host: str = LOCALHOST) -> int:
    return free_ports(1, host)[0]


def port_open(host: str, port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


# --------------------------------------------------------------------------- logs


def tail_file(path: Path, n: int = 40, max_bytes: int = 256 * 1024) -> list[str]:
    """The last `n` lines of a (possibly large, possibly missing) text file."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - max_bytes))
            data = fh.read()
    except OSError:
        return []
    lines = data.decode("utf-8", errors="replace").splitlines()
    return lines[-n:] if n > 0 else []


def format_tails(paths: Sequence[Path], n: int = 40) -> str:
    parts = []
    for p in paths:
        lines = tail_file(p, n)
        if not Path(p).exists():
            continue
        parts.append(f"==> {p} (last {len(lines)} lines) <==")
        parts.extend(lines)
    return "\n".join(parts)


def log_contains(path: Path, needle: str | re.Pattern[str]) -> bool:
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    if isinstance(needle, str):
        return needle in text
    return needle.search(text) is not None


# --------------------------------------------------------------------------- waiting


def wait_for(
    probe: Callable[[], Any],
    *,
    what: str,
    timeout: float,
    log_paths: Sequence[Path] = (),
    procs: Sequence[Handle] = (),
    interval: float = 0.5,
    tail_lines: int = 60,
) -> Any:
    """Call `probe` until it returns a truthy value; return that value.

    Exceptions raised by the probe count as "not yet" (the last one is reported).
    If one of `procs` exits, or `timeout` seconds pass, raise ServiceFailed naming the log
    files, with their tail and the last probe error. Short sleeps between attempts only.
    """
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while True:
        for proc in procs:
            code = proc.poll()
            if code is not None:
                args = getattr(proc, "args", None) or [repr(proc)]
                program = args[0] if isinstance(args, list | tuple) else args
                label = program.decode() if isinstance(program, bytes) else str(program)
                raise ServiceFailed(
                    f"{what}: process {label}"
                    f" (pid {proc.pid}) exited with code {code} before it was ready"
                    + (f"; last probe error: {last_error!r}" if last_error else ""),
                    log_paths=log_paths,
                    tail=format_tails(log_paths, tail_lines),
                )
        try:
            result = probe()
        except Exception as exc:  # noqa: BLE001 - every failure means "not ready yet"
            last_error = exc
        else:
            if result:
                return result
        if time.monotonic() >= deadline:
            raise ServiceFailed(
                f"{what}: not ready after {timeout:.0f} s"
                + (f"; last probe error: {last_error!r}" if last_error else ""),
                log_paths=log_paths,
                tail=format_tails(log_paths, tail_lines),
            )
        time.sleep(interval)


# --------------------------------------------------------------------------- processes


def spawn(
    cmd: Sequence[str],
    *,
    log: Path,
    cwd: Path,
    env: dict[str, str] | None = None,
    user: int | None = None,
    group: int | None = None,
    umask: int | None = None,
) -> subprocess.Popen[bytes]:
    """Start a long-running server process in its own session, stdout+stderr to `log`
    (``umask``: the process's, e.g. ``PRIVATE_UMASK``; the log then 0600 too)."""
    out = _open_log(log, umask)
    try:
        kwargs: dict[str, Any] = {}
        if user is not None:
            kwargs.update(user=user, group=group, extra_groups=[])
        if umask is not None:
            kwargs.update(umask=umask)
        return subprocess.Popen(
            list(cmd),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=str(cwd),
            env=env,
            start_new_session=True,
            **kwargs,
        )
    finally:
        out.close()


def terminate(
    proc: subprocess.Popen[bytes] | None,
    *,
    sig: int = signal.SIGTERM,
    timeout: float = 30.0,
) -> int | None:
    """Send `sig` to the process group, wait up to `timeout` s, then SIGKILL. Idempotent."""
    if proc is None:
        return None
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    # the group may still hold stragglers (e.g. a JVM's helper); make sure they are gone
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    return proc.returncode


def run_checked(
    cmd: Sequence[str],
    *,
    what: str,
    log: Path,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 1800,
    user: int | None = None,
    group: int | None = None,
    umask: int | None = None,
) -> None:
    """Run a short command to completion, output appended to `log`; ServiceFailed on error
    (``umask`` as for ``spawn``)."""
    kwargs: dict[str, Any] = {}
    if user is not None:
        kwargs.update(user=user, group=group, extra_groups=[])
    if umask is not None:
        kwargs.update(umask=umask)
    with _open_log(log, umask) as out:
        out.write(("$ " + " ".join(cmd) + "\n").encode())
        out.flush()
        try:
            code = subprocess.run(
                list(cmd),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=str(cwd) if cwd else None,
                env=env,
                timeout=timeout,
                check=False,
                **kwargs,
            ).returncode
        except subprocess.TimeoutExpired:
            raise ServiceFailed(
                f"{what}: timed out after {timeout:.0f} s",
                log_paths=[log],
                tail=format_tails([log]),
            ) from None
        except OSError as exc:
            raise ServiceFailed(f"{what}: cannot run {cmd[0]}: {exc}", log_paths=[log]) from exc
    if code != 0:
        raise ServiceFailed(
            f"{what}: `{' '.join(cmd)}` exited with code {code}",
            log_paths=[log],
            tail=format_tails([log]),
        )


def popen_launch(program: Program, umask: int | None = None) -> subprocess.Popen[bytes]:
    """Starts ``program`` as a child process in its own session (``spawn``)."""
    account = pwd.getpwnam(program.user) if program.user else None
    return spawn(
        program.command,
        log=program.log,
        cwd=program.cwd,
        env=dict(program.env) if program.env else None,
        user=account.pw_uid if account else None,
        group=account.pw_gid if account else None,
        umask=umask,
    )


def private_launch(program: Program) -> subprocess.Popen[bytes]:
    """``popen_launch`` with ``PRIVATE_UMASK``, as supervisord runs every program
    (``umask=077`` in its configuration)."""
    return popen_launch(program, PRIVATE_UMASK)


# --------------------------------------------------------------------------- base class

_live: weakref.WeakSet[Service] = weakref.WeakSet()


@atexit.register
def _stop_all_at_exit() -> None:
    for svc in list(_live):
        with contextlib.suppress(Exception):
            svc.stop()


class Service:
    """Start/stop/context-manager skeleton shared by the three servers.

    Subclasses implement `install()`, `prepare()` (ports, config files, one-shot set-up such
    as initdb: everything before the long-running processes), `bring_up(launch)` (starts its
    `Program`s through `launch`, in order, and waits on real probes; ServiceFailed on
    failure), `_stop()` and `log_paths`. `start()` launches with `popen_launch`; supervisord
    launches the same programs in `adapters.devservers.supervised`. Runtime state lives in
    `workdir` (a fresh temp dir unless given); it is removed by `stop()` unless
    `keep_workdir` is set or starting failed (so the logs named in the error stay readable).
    """

    name = "service"
    #: its work dir 0700 and every file in it 0600, its processes under ``PRIVATE_UMASK``
    #: (False: a server whose other accounts walk through its work dir: Postfix, Dovecot)
    private = True

    def __init__(
        self,
        *,
        workdir: str | os.PathLike[str] | None = None,
        startup_timeout: float = 120.0,
        keep_workdir: bool | None = None,
    ) -> None:
        self._given_workdir = Path(workdir) if workdir is not None else None
        self.workdir: Path | None = None
        self.startup_timeout = startup_timeout
        if keep_workdir is None:
            keep_workdir = os.environ.get("LETTERLOG_KEEP_SERVICE_DIRS", "") not in ("", "0")
        self.keep_workdir = keep_workdir
        self.started = False
        self.startup_seconds: float | None = None
        self._failed = False

    # subclasses -------------------------------------------------------------
    def install(self) -> None:
        raise NotImplementedError

    def prepare(self) -> None:
        raise NotImplementedError

    def bring_up(self, launch: Launch) -> None:
        raise NotImplementedError

    def _start(self) -> None:
        self.prepare()
        self.make_private()
        self.bring_up(private_launch if self.private else popen_launch)

    def make_private(self) -> None:
        """After ``prepare``: the work dir and everything in it closed to other users (the
        configuration this process wrote, data kept from an earlier start)."""
        if self.private and self.workdir is not None:
            make_private(self.workdir)

    def _stop(self) -> None:
        raise NotImplementedError

    @property
    def log_paths(self) -> list[Path]:
        raise NotImplementedError

    # public -----------------------------------------------------------------
    def _make_workdir(self) -> Path:
        if self._given_workdir is not None:
            self._given_workdir.mkdir(parents=True, exist_ok=True)
            if self.private:
                os.chmod(self._given_workdir, 0o700)
            return self._given_workdir
        return Path(tempfile.mkdtemp(prefix=f"letterlog-{self.name}-"))

    def start(self) -> Self:
        """Install if needed, start on 127.0.0.1 with free ports, wait for a real probe."""
        if self.started:
            return self
        t0 = time.monotonic()
        self.install()
        self.workdir = self._make_workdir()
        _live.add(self)
        try:
            self._start()
        except BaseException:
            self._failed = True
            with contextlib.suppress(Exception):
                self._stop()
            _live.discard(self)
            raise
        self.started = True
        self.startup_seconds = time.monotonic() - t0
        return self

    def stop(self) -> None:
        """Stop the processes and remove the work dir (idempotent)."""
        _live.discard(self)
        if self.workdir is None:
            return
        try:
            self._stop()
        finally:
            self.started = False
            if not self.keep_workdir and not self._failed and self._given_workdir is None:
                shutil.rmtree(self.workdir, ignore_errors=True)

    def tail_logs(self, n: int = 40) -> str:
        """The last `n` lines of every log file, each under a `==> path <==` header."""
        return format_tails(self.log_paths, n)

    def fail(self, message: str) -> ServiceFailed:
        return ServiceFailed(
            f"{self.name}: {message}", log_paths=self.log_paths, tail=self.tail_logs(60)
        )

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.started else "stopped"
        return f"<{type(self).__name__} {state} workdir={self.workdir}>"
