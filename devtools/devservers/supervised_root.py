"""A supervised root's servers once they run (``supervised``): their state as
``<root>/services.json`` records it, each stopped cleanly in reverse start order
(``stop_all``), shown (``status``) and restarted (``restart``) through supervisord.
"""

from __future__ import annotations

import contextlib
import json
import time
import xmlrpc.client
from collections.abc import Callable
from pathlib import Path
from typing import Any

from adapters.operations.supervision import Supervisor, SupervisorError

from ._common import port_open

__all__ = ["STOP_COMMAND_SECONDS", "STOP_EXIT_SECONDS", "read_state", "restart", "status",
           "stop_all"]

STOP_COMMAND_SECONDS = 60.0
STOP_EXIT_SECONDS = 90.0


def read_state(root: Path) -> dict[str, Any]:
    try:
        return dict(json.loads((root / "services.json").read_text()))
    except (OSError, ValueError):
        return {"ports": {}, "logs": {}}


def _state_of(supervisor: Supervisor, name: str) -> str:
    try:
        return str(supervisor.info(name)["statename"])
    except SupervisorError:
        return "STOPPED"


def _await_stopped(supervisor: Supervisor, name: str, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while _state_of(supervisor, name) not in ("STOPPED", "EXITED", "FATAL"):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def _stop_one(root: Path, supervisor: Supervisor, name: str, state: dict[str, Any]) -> str:
    """Stops program ``name``: its orderly stop command if it has one (HBase's master), else
    (or if that did not end it) its stop signal, SIGKILL after its ``stop_wait``."""
    command = state.get("stop_commands", {}).get(name)
    wait = float(state.get("stop_waits", {}).get(name, 30))
    if command:
        import subprocess

        with open(root / f"{name}-stop.out", "ab") as out:
            try:
                done = subprocess.run(command, stdin=subprocess.DEVNULL, stdout=out,
                                      stderr=subprocess.STDOUT, timeout=STOP_COMMAND_SECONDS,
                                      cwd=root, check=False)
                ordered = done.returncode == 0
            except (OSError, subprocess.TimeoutExpired):
                ordered = False
        if ordered and _await_stopped(supervisor, name, STOP_EXIT_SECONDS):
            return "orderly stop"
    with contextlib.suppress(OSError, xmlrpc.client.Error):
        supervisor.rpc().stopProcess(name, False)
    if _await_stopped(supervisor, name, wait + 15):
        return "stop signal" if not command else "orderly stop failed: stop signal"
    raise SupervisorError(f"{name} did not stop within {wait + 15:.0f} s")


def stop_all(root: Path, report: Callable[[str], None] = lambda line: None) -> dict[str, float]:
    """Stops every program of the supervisord in ``root`` cleanly, one after the other in
    reverse start order, then supervisord. Each program gets its stop signal
    (PostgreSQL: SIGINT, its fast shutdown; the JVMs and Dovecot: SIGTERM) and at most its
    ``stop_wait`` before supervisord kills it; HBase's master first gets HBase's own orderly
    stop (``STOP_COMMAND_SECONDS``, then ``STOP_EXIT_SECONDS`` to exit). Deletes nothing.
    Returns each program's seconds."""
    supervisor = Supervisor(root)
    if not supervisor.alive():
        return {}
    state = read_state(root)
    known = [row["name"] for row in supervisor.status()]
    order = [n for n in state.get("order", []) if n in known]
    order += [n for n in known if n not in order]
    seconds: dict[str, float] = {}
    for name in reversed(order):
        if _state_of(supervisor, name) in ("STOPPED", "EXITED", "FATAL"):
            continue
        t0 = time.monotonic()
        how = _stop_one(root, supervisor, name, state)
        seconds[name] = time.monotonic() - t0
        report(f"  {name} stopped in {seconds[name]:.1f} s ({how})")
    supervisor.shutdown()
    return seconds


def status(root: Path) -> list[dict[str, Any]]:
    """Each program's state, pid, uptime, port and log (``SupervisorError`` if nothing runs)."""
    supervisor = Supervisor(root)
    if not supervisor.alive():
        raise SupervisorError(f"no servers run under {root} (start them with `python -m "
                              "devtools.devservers up`)")
    known = read_state(root)["ports"]
    return [{**row, "port": known.get(row["name"])} for row in supervisor.status()]


def restart(root: Path, name: str, timeout: float = 180.0) -> dict[str, Any]:
    """Restarts one program and waits until it counts as started and its port answers."""
    supervisor = Supervisor(root)
    if not supervisor.alive():
        raise SupervisorError(f"no servers run under {root}")
    t0 = time.monotonic()
    supervisor.restart(name)
    port = read_state(root)["ports"].get(name)
    deadline = time.monotonic() + timeout
    while port and not port_open("127.0.0.1", port):
        if time.monotonic() > deadline:
            raise SupervisorError(f"{name} restarted but port {port} does not answer after "
                                  f"{timeout:.0f} s")
        time.sleep(0.25)
    return {"name": name, "pid": supervisor.info(name)["pid"], "port": port,
            "seconds": round(time.monotonic() - t0, 1)}
