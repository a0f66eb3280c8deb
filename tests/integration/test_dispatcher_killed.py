"""A dispatcher killed (SIGKILL) while its application is handling an event: the event stays
``processing`` in the log, and the next dispatcher hands it over again (at least once), with
the same idempotency key; the endpoint answered it once and the log records it once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from uuid import UUID

import pytest

from adapters.embedded import Letterlog
from tests.factories import make_mail
from tests.webhook_endpoint import Endpoint

ROOT = Path(__file__).resolve().parents[2]


def _cli(data: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "adapters.cli", "--data", str(data), *args]


@pytest.mark.slow  # a second process, or seconds of waiting: not in make test-fast
def test_a_dispatcher_killed_mid_call_resends_on_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    release = threading.Event()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LETTERLOG_DISPATCH_TIMEOUT_SECONDS": "30"}
    with Endpoint(release=release) as hook:
        with Letterlog.open(data) as store:
            store.create_rule("all", webhook=hook.url)
            store.deliver(account="grace@example.org", raw=make_mail())
            (event,) = store.rule_events()
        proc = subprocess.Popen(_cli(data, "dispatcher"), cwd=ROOT, env=env,
                                stderr=subprocess.PIPE)
        try:
            assert hook.arrived.wait(60), "the dispatcher never called the endpoint"
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            proc.wait(30)
        release.set()  # the endpoint answers the dead dispatcher's call: nobody records it
        with Letterlog.open(data) as store:
            event_id = UUID(event["id"])
            assert store.rule_event(event_id)["status"] == "processing"
        done = subprocess.run(_cli(data, "--json", "dispatcher", "--once"), cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert '"complete": 1' in done.stdout
        with Letterlog.open(data) as store:
            after = store.rule_event(event_id)
            assert after["status"] == "complete"
            processing = [e for _, e in store.events() if type(e).__name__ == "Processing"]
            completed = [e for _, e in store.events() if type(e).__name__ == "Completed"]
        assert [c["key"] for c in hook.calls] == [event["id"], event["id"]]
        assert len(processing) == 2 and len(completed) == 1
