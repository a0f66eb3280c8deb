"""letterlog's own long-running processes under supervisord: the outbox relay, N stream
workers, the purger and the LMTP server, as ``letterlog processes start`` runs them.

Each is the ``letterlog`` command a user would type (``relay``, ``worker``, ``purger``) on
the same data directory, with the caller's environment (the ``LETTERLOG_*`` settings);
worker ``i`` gets ``LETTERLOG_STREAM_INSTANCE=<host>-worker-<i>`` (static group membership:
restarted, it resumes its partitions at once). supervisord restarts a process that crashes,
however often it fails to start (``START_RETRIES``: the processes wait out a server's outage
themselves, and supervision never gives up on one), and appends its output to
``<data>/supervisor/<name>.log``, rotated at ``LOG_MAX_BYTES`` with ``LOG_BACKUPS`` older
files kept.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

from adapters.config.settings import load_settings
from adapters.files.filemodes import private_dir
from adapters.operations.supervision import Program, Supervisor, SupervisorError, write_config
from adapters.streaming.telemetry import read_endpoints

__all__ = ["programs", "restart", "start", "status", "stop", "supervisor_for"]

#: supervisord's ``startretries`` for letterlog's processes: in effect, never FATAL
START_RETRIES = 1_000_000
LOG_MAX_BYTES = 10 * 1024 * 1024
LOG_BACKUPS = 5


def supervisor_for(data: Path) -> Supervisor:
    return Supervisor(Path(data).resolve() / "supervisor")


METRICS_OFFSETS = {"relay": 0, "dispatcher": 1}
"""With ``LETTERLOG_METRICS_PORT=N`` (N > 0), process P serves its metrics on N + offset:
the relay N, the dispatcher N+1, worker i N+2+i (``metrics_offset``). One port for all
made every process but the first crash-loop on "Address already in use"."""


def metrics_offset(name: str) -> int | None:
    """The offset of ``name``'s metrics port from the base port; None: it serves none."""
    if name in METRICS_OFFSETS:
        return METRICS_OFFSETS[name]
    if name.startswith("worker-"):
        return 2 + int(name.removeprefix("worker-"))
    return None


def programs(data: Path, workers: int = 1, purger: bool = True, relay: bool = True,
             lmtp: str | None = None, dispatcher: bool = False,
             metrics_port: int = 0, lmtp_socket_mode: str | None = None,
             imap: tuple[str, ...] = ()) -> list[Program]:
    """The programs supervisord runs. ``metrics_port``: the base port (N > 0: each process
    its own, ``metrics_offset``; 0 a free one each; -1 none)."""
    data = Path(data).resolve()
    logs = data / "supervisor"

    def letterlog(name: str, *args: str, env: dict[str, str] | None = None,
                  priority: int = 100) -> Program:
        return Program(name, (sys.executable, "-P", "-m", "adapters.cli", "--data", str(data),
                              *args),
                       cwd=data, log=logs / f"{name}.log",
                       env={"PYTHONUNBUFFERED": "1", **(env or {}),
                            **_metrics_env(name, metrics_port)}, stop_wait=30,
                       start_seconds=3, priority=priority, start_retries=START_RETRIES,
                       log_max_bytes=LOG_MAX_BYTES, log_backups=LOG_BACKUPS)

    found = [letterlog("relay", "relay", priority=10)] if relay else []
    if lmtp:  # the LMTP server: SIGTERM lets its transactions in flight finish
        mode = ("--socket-mode", lmtp_socket_mode) if lmtp_socket_mode else ()
        found.append(letterlog("lmtp", "lmtp", "--listen", lmtp, *mode, priority=5))
    if imap:  # the IMAP server (``letterlog imap`` and these options): SIGTERM ends it
        found.append(letterlog("imap", "imap", *imap, priority=6))
    host = socket.gethostname()
    found += [letterlog(f"worker-{i}", "worker",
                        env={"LETTERLOG_STREAM_INSTANCE": f"{host}-worker-{i}"}, priority=20)
              for i in range(workers)]
    if purger:
        found.append(letterlog("purger", "purger", priority=30))
    if dispatcher:  # event rules: hands rule events to their applications
        found.append(letterlog("dispatcher", "dispatcher", priority=40))
    return found


def _metrics_env(name: str, base: int) -> dict[str, str]:
    """``LETTERLOG_METRICS_PORT`` for ``name`` when the base port is fixed (N > 0)."""
    offset = metrics_offset(name)
    if base <= 0 or offset is None:
        return {}
    port = base + offset
    if port > 65535:
        raise SupervisorError(
            f"LETTERLOG_METRICS_PORT={base}: {name} would serve its metrics on port {port}, "
            "above 65535 (each process takes N + its offset: relay N, dispatcher N+1, "
            "worker i N+2+i); choose a lower N")
    return {"LETTERLOG_METRICS_PORT": str(port)}


def start(data: Path, workers: int = 1, purger: bool = True, timeout: float = 120.0, *,
          relay: bool = True, lmtp: str | None = None,
          dispatcher: bool = False, lmtp_socket_mode: str | None = None,
          imap: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Writes the configuration, starts supervisord (it starts every program) and waits
    until each counts as started (alive ``start_seconds``) or has failed for good."""
    supervisor = supervisor_for(data)
    if supervisor.alive():
        raise SupervisorError(f"already running under {supervisor.root} (`letterlog "
                              "processes status`; `letterlog processes stop` first)")

    found = programs(data, workers, purger, relay, lmtp, dispatcher,
                     metrics_port=load_settings(data=data).metrics_port,
                     lmtp_socket_mode=lmtp_socket_mode, imap=imap)
    private_dir(data)
    write_config(supervisor.root, found, autostart=True)
    supervisor.launch(dict(os.environ))
    deadline = time.monotonic() + timeout
    while True:
        rows = supervisor.status()
        if all(r["state"] in ("RUNNING", "FATAL") for r in rows):
            return status(data)
        if time.monotonic() > deadline:
            return status(data)
        time.sleep(0.5)


def status(data: Path) -> list[dict[str, Any]]:
    """Each process: state, pid, uptime, log, and the metrics port it serves."""
    supervisor = supervisor_for(data)
    if not supervisor.alive():
        raise SupervisorError(f"no letterlog processes run for {data} (`letterlog processes "
                              "start`)")
    ports = {e["pid"]: e["metrics_port"] for e in read_endpoints(data)}
    return [{**row, "metrics_port": ports.get(row["pid"])} for row in supervisor.status()]


def restart(data: Path, name: str) -> dict[str, Any]:
    supervisor = supervisor_for(data)
    if not supervisor.alive():
        raise SupervisorError(f"no letterlog processes run for {data}")
    t0 = time.monotonic()
    supervisor.restart(name)
    return {"name": name, "pid": supervisor.info(name)["pid"],
            "seconds": round(time.monotonic() - t0, 1)}


def stop(data: Path) -> bool:
    supervisor = supervisor_for(data)
    if not supervisor.alive():
        return False
    supervisor.shutdown()
    return True
