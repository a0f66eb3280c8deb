"""A call with a deadline, in a thread of its own (probes of servers that may not answer), and
whether a process is alive.

Imports nothing of adapters; used by the stream tools, the dev servers, supervision and the
command server alike."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any


def run_in_thread(fn: Callable[[], Any], timeout: float) -> Any:
    """Run `fn` in a fresh thread (so `asyncio.run` works even under a running event loop)."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
            box["error"] = exc

    t = threading.Thread(target=target, name="letterlog-probe", daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        raise TimeoutError(f"probe did not finish in {timeout:.0f} s")
    if "error" in box:
        raise box["error"]
    return box.get("value")


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists and has not exited (a zombie has)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return True
