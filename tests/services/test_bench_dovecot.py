"""``bench ingest --peer dovecot``: Dovecot installed, configured and measured in the same run
(its JSON and plot, not its speed: benchmarks are not tests)."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.bench.ingest import bench_ingest
from adapters.devservers import DovecotServer

pytestmark = pytest.mark.services


def test_bench_ingest_measures_dovecot_on_the_same_messages(tmp_path: Path) -> None:
    result = bench_ingest(messages=24, batch=8, plot=tmp_path / "ingest.png", peer="dovecot")
    assert result["peer"] == "dovecot"
    assert result["ratio_import_vs_dovecot"] == round(
        result["import_msgs_per_s"] / result["dovecot_import_msgs_per_s"], 3)
    assert result["ratio_single_vs_dovecot_lmtp"] == round(
        result["single_command_msgs_per_s"] / result["dovecot_lmtp_msgs_per_s"], 3)
    assert result["ratio_single_pipelined_vs_dovecot_lmtp"] == round(
        result["single_pipelined_msgs_per_s"] / result["dovecot_lmtp_msgs_per_s"], 3)
    assert result["meets_peer_targets"] == (
        result["ratio_import_vs_dovecot"] >= 0.30 and result["single_target_met_by"] is not None
        and result["storage_amplification"] <= 1.2)
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
    from adapters.bench.peer import write_mbox

    messages = [b"Subject: one\r\n\r\nfirst\r\n", b"Subject: two\r\n\r\nsecond\r\n"]
    write_mbox(messages, tmp_path / "in.mbox")
    with DovecotServer() as dovecot:
        dovecot.import_mbox(tmp_path / "in.mbox", "ada")
        assert dovecot.message_count("ada") == 2
        assert dovecot.deliver_lmtp([("bob@example.org", m) for m in messages]) == 2
        assert dovecot.message_count("bob") == 2
        assert dovecot.user_bytes_on_disk("bob") > 0
