"""``letterlog lag``'s verdict and text, the stall warnings, the metrics endpoint file."""

from __future__ import annotations

import json
import os
import urllib.request

from adapters.bootstrap import scaleout as bootstrap
from adapters.config.settings import load_settings
from adapters.streaming.lag import render, snapshot, verdict
from adapters.streaming.telemetry import Stall, read_endpoints, serve_metrics


def report(relay_events=0, kafka_events=0, problems=()):
    return {"log_head": 10, "relay": {"position": 10 - relay_events, "events": relay_events,
                                      "seconds": 1.5 if relay_events else 0.0},
            "kafka": {"group": "g", "events": kafka_events,
                      "seconds": 2.0 if kafka_events else 0.0,
                      "partitions": {"t/0": {"end": 5, "committed": 5 - kafka_events,
                                             "events": kafka_events, "seconds": 2.0}}},
            "projections": {"messages": {"t/0": 9}}, "problems": list(problems)}


def test_the_verdict_names_who_is_behind_or_who_does_not_answer():
    assert verdict(report()) == "caught up: the read side has every event up to position 10"
    assert verdict(report(3, 2)) == ("behind: the relay 3 events (1.5 s), the workers 2 events "
                                     "(2.0 s)")
    assert verdict(report(problems=["hbase not answering (no reply in 5 s)"])) == (
        "unknown: hbase not answering (no reply in 5 s)")


def test_the_text_has_every_part_and_ends_with_the_verdict():
    r = report(0, 2)
    r["verdict"] = verdict(r)
    lines = render(r)
    assert lines[0] == "log head      10" and lines[-1].startswith("verdict: behind")
    assert any("t/0" in line and "lag 2 events" in line for line in lines)
    assert any(line.startswith("projection    messages") and "t/0@9" in line for line in lines)


def test_without_kafka_the_snapshot_says_there_is_no_scale_out_path(tmp_path):
    r = snapshot(load_settings(data=tmp_path), "g", bootstrap, timeout=10)
    assert r["log_head"] == 0 and r["kafka"] is None and r["problems"] == []
    assert r["verdict"].startswith("no scale-out path configured")


def test_erasures_pending_completion_are_shown(tmp_path):
    from types import SimpleNamespace

    from adapters.lifecycle.scaleout import record_erasure

    store = SimpleNamespace(settings=SimpleNamespace(data=tmp_path, event_store="sqlite"),
                            max_position=lambda: 7)
    r = snapshot(load_settings(data=tmp_path), "g", bootstrap, timeout=10)
    assert r["erasures_pending"] == {"count": 0, "position": None}
    assert not any(line.startswith("erasures") for line in render(r))
    record_erasure(store, ["ab" * 32], 0.0, 1)
    r = snapshot(load_settings(data=tmp_path), "g", bootstrap, timeout=10)
    assert r["erasures_pending"] == {"count": 1, "position": 7}
    assert "erasures      1 pending completion (up to position 7)" in "\n".join(render(r))


class Lines:
    def __init__(self):
        self.lines = []

    def warning(self, event, **kw):
        self.lines.append((event, kw))


def test_a_stall_warns_once_after_its_delay_and_once_when_it_ends():
    log = Lines()
    stall = Stall("hbase", log, after=0.0)
    stall.failed(OSError("refused"))
    stall.failed(OSError("refused"))
    stall.ok()
    stall.ok()
    assert [e for e, _ in log.lines] == ["hbase not answering", "hbase answering again"]
    assert "OSError: refused" in log.lines[0][1]["error"]


def test_a_call_still_waiting_counts_from_its_start():
    log = Lines()
    stall = Stall("hbase", log, after=60.0)
    stall.waiting(started=0.0)  # monotonic 0: long ago
    assert log.lines and log.lines[0][0] == "hbase not answering"


def test_metrics_are_served_on_a_free_port_that_a_file_names(tmp_path):
    port = serve_metrics("worker", tmp_path, 0, "w-1")
    assert port and port > 0
    [entry] = read_endpoints(tmp_path)
    assert entry == {**entry, "role": "worker", "pid": os.getpid(), "metrics_port": port,
                     "instance": "w-1"}
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        assert r.status == 200 and b"# TYPE" in r.read()
    assert json.loads((tmp_path / "run" / f"worker-{os.getpid()}.json").read_text())[
        "metrics_port"] == port
    assert serve_metrics("worker", tmp_path, -1) is None
