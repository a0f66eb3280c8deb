"""``letterlog lag``'s exit status says its verdict (issue 42, item 13): 0 caught up (or no
scale-out path), 3 behind, 1 unknown (a part did not answer); and the only output is the
report: no library's line on stderr."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from adapters.streaming.lag import exit_status
from tests.e2e.mta_support import letterlog


def a_closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_an_unknown_verdict_exits_1_and_prints_only_the_report(env: dict[str, str],
                                                                data: Path, as_json: bool):
    kafka = {**env, "LETTERLOG_KAFKA_BOOTSTRAP": f"127.0.0.1:{a_closed_port()}"}
    p = letterlog(kafka, data, *(["--json"] if as_json else []), "lag", "--timeout", "3")
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert p.stderr == b"", p.stderr  # no "Unable connect to ..." from the Kafka client
    if as_json:
        assert json.loads(p.stdout)["verdict"].startswith("unknown: kafka")
    else:
        assert p.stdout.decode().splitlines()[-1].startswith("verdict: unknown: kafka")


def test_no_scale_out_path_exits_0(env: dict[str, str], data: Path):
    p = letterlog(env, data, "lag")
    assert (p.returncode, p.stderr) == (0, b"")
    assert b"verdict: no scale-out path configured" in p.stdout


@pytest.mark.parametrize(("verdict", "status"), [
    ("caught up: the read side has every event up to position 7", 0),
    ("caught up, 1 dead letter open (`letterlog dead-letters list`): ...", 0),
    ("no scale-out path configured (LETTERLOG_KAFKA_BOOTSTRAP is not set)", 0),
    ("behind: the relay 3 events (1.0 s)", 3),
    ("unknown: kafka not answering (no reply in 5 s)", 1),
])
def test_each_verdict_has_its_exit_status(verdict: str, status: int):
    assert exit_status(verdict) == status
