"""Shared machinery for the real test/dev servers: processes and the ``Service`` base class
(installing what they need: ``toolchain``); the host's side (ports, logs, waiting, private
files) is ``_host``'s, its names importable from here.

Nothing here imports a client library at module import time: the probes import psycopg,
happybase or aiokafka lazily, so `import devtools.devservers` works without the extras.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Self

from adapters.operations.supervision import Handle, Launch, Program

from ._host import (
    LOCALHOST,
    OPEN_TO_OTHERS,
    PRIVATE_UMASK,
    ServiceFailed,
    _open_log,
    cache_dir,
    file_lock,
    format_tails,
    free_port,
    free_ports,
    log_contains,
    make_private,
    port_open,
    tail_file,
    wait_for,
)

__all__ = ["Handle", "LOCALHOST", "Launch", "OPEN_TO_OTHERS", "PRIVATE_UMASK", "Program",
           "Service", "ServiceFailed", "cache_dir", "file_lock", "format_tails",
           "free_port", "free_ports", "log_contains", "make_private", "popen_launch", "port_open",
           "private_launch", "run_checked", "spawn", "tail_file", "terminate", "wait_for"]

PORT_RACE_TRIES = 3
"""Starts of a server at most when each lost a port (``Service.lost_a_port_race``): a free
port is found by binding and closing it, so another process may take it before the server
binds it (seen in CI: HBase's ZooKeeper on a machine running four test workers)."""

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
    launches the same programs in `devtools.devservers.supervised`. Runtime state lives in
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

    def lost_a_port_race(self) -> bool:
        """After a failed start: whether it failed because a port ``free_ports`` gave was
        taken by another process before this server bound it (then ``start`` tries again
        with other ports). None known here; a server that can tell says so."""
        return False

    def start(self) -> Self:
        """Install if needed, start on 127.0.0.1 with free ports, wait for a real probe. A
        start that lost a port to another process (``lost_a_port_race``) is made again in a
        new work dir with new ports, up to ``PORT_RACE_TRIES`` times in all."""
        if self.started:
            return self
        t0 = time.monotonic()
        self.install()
        for attempt in range(1, PORT_RACE_TRIES + 1):
            self.workdir = self._make_workdir()
            _live.add(self)
            try:
                self._start()
            except BaseException:
                with contextlib.suppress(Exception):
                    self._stop()
                _live.discard(self)
                if (attempt < PORT_RACE_TRIES and self._given_workdir is None
                        and self.lost_a_port_race()):
                    print(f"{self.name}: a port was taken before it bound it (log in "
                          f"{self.workdir}); starting again with other ports", file=sys.stderr)
                    continue
                self._failed = True
                raise
            break
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
