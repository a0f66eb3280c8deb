"""What every dev server shares on the host: a failure that carries its logs' tails
(``ServiceFailed``), the cache and lock files, private files, free ports, log tails, and
``wait_for`` (a readiness probe polled until it answers or the deadline passes).
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import stat
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from adapters.operations.supervision import Handle

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
