"""``bench ingest --peer dovecot``: Dovecot installed, configured and measured in the same run
(its JSON and plot, not its speed: benchmarks are not tests)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from devtools.bench.ingest import bench_ingest
from devtools.devservers import DovecotServer

pytestmark = [pytest.mark.services, pytest.mark.bench]


def test_bench_ingest_measures_dovecot_on_the_same_messages(tmp_path: Path) -> None:
    result = bench_ingest(messages=24, batch=8, plot=tmp_path / "ingest.png", peer="dovecot")
    assert result["peer"] == "dovecot"
    assert result["ratio_import_vs_dovecot"] == round(
        result["import_msgs_per_s"] / result["dovecot_import_msgs_per_s"], 3)
    assert result["ratio_single_vs_dovecot_lmtp"] == round(
        result["single_command_msgs_per_s"] / result["dovecot_lmtp_msgs_per_s"], 3)
    assert result["ratio_single_pipelined_vs_dovecot_lmtp"] == round(
        result["single_pipelined_msgs_per_s"] / result["dovecot_lmtp_msgs_per_s"], 3)
    assert result["target_ratio_import_vs_dovecot"] == 0.6  # as the import-only leg's
    assert result["meets_peer_targets"] == (
        result["ratio_import_vs_dovecot"] >= 0.6 and result["single_target_met_by"] is not None
        and result["storage_amplification"] <= 1.2)
    assert result["import_cpu_ms_per_msg"] > 0
    assert len(result["import_load_average_start_and_end"]) == 2
    assert result["ratio_import_with_server_vs_dovecot"] == round(
        result["import_with_server_msgs_per_s"] / result["dovecot_import_msgs_per_s"], 3)
    assert len(result["dovecot_import_seconds_before_and_after"]) == 2
    # both systems hold at least the mail itself (allocated blocks, as du counts)
    assert result["storage_amplification"] >= 1.0
    assert result["dovecot_storage_amplification"] >= 0.5
    assert result["storage_amplification"] == round(
        result["bytes_on_disk"] / result["mail_bytes"], 3)
    assert result["raw_sqlite_one_row_per_tx_per_s"] > 0  # the raw floors stay in the JSON
    assert Path(result["peer_plot"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_dovecot_stores_each_lmtp_delivery_and_each_imported_message(tmp_path: Path) -> None:
    from devtools.bench.peer import write_mbox

    messages = [b"Subject: one\r\n\r\nfirst\r\n", b"Subject: two\r\n\r\nsecond\r\n"]
    write_mbox(messages, tmp_path / "in.mbox")
    with DovecotServer() as dovecot:
        dovecot.import_mbox(tmp_path / "in.mbox", "ada")
        assert dovecot.message_count("ada") == 2
        assert dovecot.deliver_lmtp([("bob@example.org", m) for m in messages]) == 2
        assert dovecot.message_count("bob") == 2
        assert dovecot.user_bytes_on_disk("bob") > 0


def test_bench_ingest_measures_letterlogs_lmtp_and_lda_against_dovecots(tmp_path: Path) -> None:
    """Both legs on a few messages: every count checked by the bench itself (a wrong one
    raises), ratios of positive rates, the plot drawn."""
    result = bench_ingest(messages=12, batch=4, plot=tmp_path / "ingest.png", peer="dovecot",
                          lda_messages=4)
    assert result["lmtp_messages"] == 12 and result["lda_messages"] == 4
    for conns in (1, 4):
        ours = result[f"lmtp_{conns}conn_msgs_per_s"]
        theirs = result[f"dovecot_lmtp_{conns}conn_msgs_per_s"]
        assert ours > 0 and theirs > 0
        assert len(result[f"dovecot_lmtp_{conns}conn_runs_before_and_after"]) == 2
        assert result[f"ratio_lmtp_vs_dovecot_lmtp_{conns}conn"] == round(ours / theirs, 3) > 0
        cpu = result[f"lmtp_{conns}conn_server_cpu_ms_per_msg"]
        assert set(cpu) == {"main", "threads", "writer", "children", "total"}
        assert "total" in result[f"dovecot_lmtp_{conns}conn_server_cpu_ms_per_msg"]
        floor = result[f"lmtp_{conns}conn_protocol_floor_msgs_per_s"]
        assert result[f"ratio_protocol_floor_vs_dovecot_lmtp_{conns}conn"] == round(
            floor / theirs, 3) > 0
        assert result[f"lmtp_{conns}conn_client_cpu_ms_per_msg"] > 0
        # /proc counts CPU in ticks of 10 ms: a dozen messages may not fill one (then 0.0);
        # a protocol that stores nothing never costs more than the store behind it
        floor_cpu = result[f"lmtp_{conns}conn_protocol_floor_server_cpu_ms_per_msg"]
        assert isinstance(floor_cpu, int | float) and 0 <= floor_cpu <= cpu["total"]
        ceiling = result[f"lmtp_{conns}conn_ceiling_msgs_per_s"]
        assert 0 < ceiling <= floor  # the store behind the protocol only adds work
        assert result[f"ratio_ceiling_vs_dovecot_lmtp_{conns}conn"] == round(
            ceiling / theirs, 3)
    for way in ("lda", "lda_with_server", "lda_client_with_server"):
        assert result[f"ratio_{way}_vs_dovecot_lda"] == round(
            result[f"{way}_msgs_per_s"] / result["dovecot_lda_msgs_per_s"], 3) > 0
    assert len(result["dovecot_lda_runs_before_and_after"]) == 2
    bounds = result["lda_bounds"]
    assert all(bounds[k] > 0 for k in ("python_c_pass_ms", "letterlog_version_ms",
                                       "letterlog_version_with_server_ms",
                                       "ratio_ceiling_version_with_server"))
    assert result["meets_mta_targets"] == (
        result["ratio_lmtp_vs_dovecot_lmtp_1conn"] >= 2.0
        and result["ratio_lmtp_vs_dovecot_lmtp_4conn"] >= 2.0
        and result["ratio_lda_with_server_vs_dovecot_lda"] >= 0.5
        and result["ratio_lda_client_with_server_vs_dovecot_lda"] >= 0.8)
    # the keys of the older legs stay
    assert result["dovecot_lmtp_msgs_per_s"] > 0 and "ratio_import_vs_dovecot" in result
    assert Path(result["peer_plot"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_dovecot_lda_stores_a_message_from_standard_input(tmp_path: Path) -> None:
    import subprocess

    with DovecotServer() as dovecot:
        for i in range(2):
            done = subprocess.run(dovecot.lda_command("carol@example.org", "s@example.org"),
                                  input=f"Subject: {i}\r\n\r\nbody\r\n".encode(),
                                  capture_output=True, check=False)
            assert done.returncode == 0, done.stderr
        assert dovecot.message_count("carol") == 2


def test_the_letterlog_lmtp_server_is_ready_stops_on_sigterm_and_counts(tmp_path: Path) -> None:
    from devtools.bench.mta import (
        letterlog_counts,
        letterlog_init,
        letterlog_lmtp,
        lmtp_deliver,
        private_runtime,
    )

    env = private_runtime(dict(os.environ), tmp_path / "run")
    letterlog_init(tmp_path / "data", env)
    messages = [(f"{who}@example.org", f"Subject: {i}\r\n\r\nbody {i}\r\n".encode())
                for i, who in enumerate(["ada", "bob", "ada", "bob", "ada"])]
    with letterlog_lmtp(tmp_path / "data", tmp_path / "lmtp.sock", env,
                        tmp_path / "lmtp.log") as server:
        assert lmtp_deliver(tmp_path / "lmtp.sock", messages, connections=4) > 0
    assert server.returncode == 0  # SIGTERM: in-flight transactions finished, exit 0
    assert letterlog_counts(tmp_path / "data", ["ada@example.org", "bob@example.org"]) == {
        "ada@example.org": 3, "bob@example.org": 2}


def test_the_import_leg_alone_gives_its_ratio_cpu_and_load(tmp_path: Path) -> None:
    result = bench_ingest(messages=250, batch=100, plot=tmp_path / "import.png",
                          peer="dovecot", import_only=True)
    assert result["import_only"] and result["messages"] == 250
    assert result["ratio_import_vs_dovecot"] == round(
        result["import_msgs_per_s"] / result["dovecot_import_msgs_per_s"], 3)
    assert result["import_cpu_ms_per_msg"] > 0
    assert len(result["load_average_start_and_end"]) == 2
    assert len(result["dovecot_import_seconds_before_and_after"]) == 2
    assert result["meets_import_targets"] == (result["ratio_import_vs_dovecot"] >= 0.6
                                              and result["import_msgs_per_s"] >= 2039)
    assert "lmtp_1conn_msgs_per_s" not in result  # the other legs did not run
    assert Path(result["plot"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
