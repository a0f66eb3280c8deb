"""``LETTERLOG_METRICS_PORT=N`` under ``letterlog processes start``: each process its own
port (issue 42, item 12); the real processes on those ports: tests/services/test_processes.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.operations.supervision import SupervisorError
from adapters.streaming.processes import programs


def ports(base: int) -> dict[str, str | None]:
    found = programs(Path("/tmp/letterlog-ports"), workers=3, dispatcher=True,
                     lmtp="unix:/tmp/lmtp.sock", metrics_port=base)
    return {p.name: p.env.get("LETTERLOG_METRICS_PORT") for p in found}


def test_a_fixed_base_port_gives_each_process_its_own():
    assert ports(9100) == {"relay": "9100", "dispatcher": "9101", "worker-0": "9102",
                           "worker-1": "9103", "worker-2": "9104", "lmtp": None,
                           "purger": None}


@pytest.mark.parametrize("base", [0, -1])
def test_a_free_port_or_none_is_left_to_each_process(base):
    assert set(ports(base).values()) == {None}


def test_a_base_too_high_for_the_workers_is_refused_before_anything_starts():
    with pytest.raises(SupervisorError, match="above 65535"):
        ports(65533)


def test_the_supervised_lmtp_server_gets_its_socket_mode():
    [lmtp] = [p for p in programs(Path("/tmp/letterlog-ports"), workers=0, purger=False,
                                  relay=False, lmtp="unix:/x/lmtp.sock",
                                  lmtp_socket_mode="0660")]
    assert lmtp.command[-4:] == ("--listen", "unix:/x/lmtp.sock", "--socket-mode", "0660")
