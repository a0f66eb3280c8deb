"""A call with a deadline, in a thread of its own (probes of servers that may not answer).

Imports nothing of adapters; used by the stream tools and the dev servers alike."""

from __future__ import annotations

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
