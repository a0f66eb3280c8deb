"""``bench stream`` on small logs against the session's servers: its JSON, the untimed
warm-up and the tables it verifies (not its speed: benchmarks are not tests)."""

from __future__ import annotations

from pathlib import Path

import pytest

from devtools.bench.stream import bench_stream

pytestmark = [pytest.mark.services, pytest.mark.bench]


def test_bench_stream_warms_the_servers_up_then_times_the_pipeline(
        tmp_path: Path, hbase_server, kafka_server) -> None:
    result = bench_stream(600, tmp_path / "stream.png", bootstrap=kafka_server.bootstrap,
                          hbase=f"{hbase_server.thrift_host}:{hbase_server.thrift_port}",
                          thrift2_port=hbase_server.thrift2_port, warm_up=200)
    assert result["servers"] == "already running" and result["write_path"] == "thrift2"
    assert result["warm_up"]["events"] == 200 and result["warm_up"]["seconds"] > 0
    assert result["events"] >= 600 and result["end_to_end"]["duplicates"] == 0
    assert result["verify"]["identical"], result["verify"]["tables"]
    assert result["ratio"] == round(result["end_to_end"]["events_per_s"]
                                    / result["baselines"]["raw_batch"]["events_per_s"], 3)
    assert (tmp_path / "stream.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # every table the benchmark made (warm-up, end to end, baseline, projector alone) is gone
    import re

    import happybase

    conn = happybase.Connection(hbase_server.thrift_host, hbase_server.thrift_port)
    try:
        left = [t.decode() for t in conn.tables() if re.match(rb"bs[0-9a-f]{6}", t)]
    finally:
        conn.close()
    assert left == []


def test_no_warm_up_when_asked_for_none(tmp_path: Path, hbase_server, kafka_server) -> None:
    result = bench_stream(300, bootstrap=kafka_server.bootstrap,
                          hbase=f"{hbase_server.thrift_host}:{hbase_server.thrift_port}",
                          thrift2_port=hbase_server.thrift2_port, warm_up=0, verify=False)
    assert result["warm_up"] == {"events": 0}
    assert result["end_to_end"]["events_per_s"] > 0
