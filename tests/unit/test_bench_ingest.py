"""``letterlog bench ingest``: its JSON and plot (not its speed: benchmarks are not tests)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from typer.testing import CliRunner

import adapters.embedded
from adapters.bench.ingest import bench_ingest
from adapters.cli.app import app


def test_bench_ingest_reports_rates_baselines_and_ratios(tmp_path: Path) -> None:
    result = bench_ingest(messages=30, batch=10, plot=tmp_path / "ingest.png")
    assert result["messages"] == 30 and result["durability"] == "full"
    runs = result["raw_runs_before_and_after"]
    assert len(runs["one_row_per_tx"]) == 2 and len(runs["10_rows_per_tx"]) == 2
    assert result["raw_sqlite_one_row_per_tx_per_s"] == round(
        statistics.fmean(runs["one_row_per_tx"]), 1)
    assert result["ratio_single"] == round(
        result["single_command_msgs_per_s"] / result["raw_sqlite_one_row_per_tx_per_s"], 3)
    assert result["ratio_batched"] == round(
        result["batched_import_msgs_per_s"] / result["raw_sqlite_10_rows_per_tx_per_s"], 3)
    log_only = result["log_only"]
    assert log_only["single_command_msgs_per_s"] > 0 and log_only["batched_import_msgs_per_s"] > 0
    assert log_only["ratio_batched"] == round(
        log_only["batched_import_msgs_per_s"] / result["raw_sqlite_10_rows_per_tx_per_s"], 3)
    assert result["parse_only_msgs_per_s"] > 0
    # the long-lived process's single deliveries, projected by a second process if it can run
    assert result["single_pipelined_msgs_per_s"] > 0
    assert result["single_pipelined_follower"] == (adapters.embedded._usable_cores() >= 2)
    assert result["meets_targets"] == (result["ratio_single"] >= 0.15
                                       and result["ratio_batched"] >= 0.30)
    assert (tmp_path / "ingest.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_ingest_cli_prints_one_json_object() -> None:
    out = CliRunner().invoke(app, ["bench", "ingest", "--messages", "12", "--json"])
    assert out.exit_code == 0, out.output
    [line] = [x for x in out.stdout.splitlines() if x.strip()]
    assert json.loads(line)["benchmark"] == "ingest"


def test_log_only_store_appends_without_read_models(tmp_path: Path) -> None:
    from adapters.bench.ingest import _open_log_only

    store = _open_log_only(tmp_path / "log-only", "full")
    try:
        store.deliver(account="ada@example.org", raw=b"Subject: hi\r\n\r\nbody\r\n")
        assert store.projections is None and store.max_position() > 0
    finally:
        store.close()
    assert not (tmp_path / "log-only" / "tables.sqlite").exists()


def test_bench_ingest_names_an_unknown_peer_without_a_traceback() -> None:
    out = CliRunner().invoke(app, ["bench", "ingest", "--messages", "5", "--peer", "exim"])
    assert out.exit_code == 2
    assert "--peer: unknown peer 'exim'" in out.output and "Traceback" not in out.output


def test_the_single_target_is_met_by_the_first_way_that_reaches_it() -> None:
    from adapters.bench.peer import _single_target_met_by

    def met(inline: float, pipelined: float | None) -> str | None:
        result = {"target_ratio_single_vs_dovecot_lmtp": 2.0,
                  "ratio_single_vs_dovecot_lmtp": inline}
        if pipelined is not None:
            result["ratio_single_pipelined_vs_dovecot_lmtp"] = pipelined
        return _single_target_met_by(result)

    assert met(2.1, 2.6) == "inline"
    assert met(1.8, 2.6) == "pipelined"
    assert met(1.8, 1.9) is None
    assert met(1.8, None) is None
    assert met(2.0, None) == "inline"
