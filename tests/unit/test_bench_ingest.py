"""``letterlog bench ingest``: its JSON and plot (not its speed: benchmarks are not tests)."""

from __future__ import annotations

import json
import os
import statistics
from pathlib import Path

import pytest
from typer.testing import CliRunner

import adapters.embedded
from adapters.cli.app import app
from devtools.bench.ingest import bench_ingest

pytestmark = pytest.mark.bench  # the benchmark harness: `make test-fast` leaves it out


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
    from devtools.bench.ingest import _open_log_only

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


def test_import_only_needs_the_peer() -> None:
    out = CliRunner().invoke(app, ["bench", "ingest", "--messages", "5", "--import-only"])
    assert out.exit_code == 2
    assert "--import-only: only with --peer dovecot" in out.output
    assert "Traceback" not in out.output


def test_the_single_target_is_met_by_the_first_way_that_reaches_it() -> None:
    from devtools.bench.peer import _single_target_met_by

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


def test_messages_are_split_round_robin_over_the_connections() -> None:
    from devtools.bench.mta import split_round_robin

    items = list(range(10))
    shares = split_round_robin(items, 4)
    assert shares == [[0, 4, 8], [1, 5, 9], [2, 6], [3, 7]]
    assert sorted(x for share in shares for x in share) == items  # each once, none lost
    assert split_round_robin(items, 1) == [items]
    assert split_round_robin([1, 2], 4) == [[1], [2], [], []]
    with pytest.raises(ValueError):
        split_round_robin(items, 0)


def test_a_ratio_is_letterlogs_rate_over_the_peers_and_needs_two_positive_rates() -> None:
    from devtools.bench.mta import mean_rate, ratio

    assert ratio(700.0, 350.0) == 2.0
    assert ratio(1.0, 3.0) == 0.333
    assert mean_rate([300.0, 400.5]) == 350.2
    for bad in ((0.0, 10.0), (10.0, 0.0), (float("nan"), 1.0)):
        with pytest.raises(ValueError):
            ratio(*bad)


def test_a_wrong_count_fails_the_leg() -> None:
    from devtools.bench.mta import addressed, check_count, leg_accounts, per_account

    accounts = leg_accounts(["ada", "alan"], "l4")
    assert accounts == ["ada-l4@example.org", "alan-l4@example.org"]
    messages = addressed([b"1", b"2", b"3"], accounts)
    assert [a for a, _ in messages] == [accounts[0], accounts[1], accounts[0]]
    assert per_account(messages) == {accounts[0]: 2, accounts[1]: 1}
    check_count("right", 2, 2)
    with pytest.raises(RuntimeError, match="1 messages stored, 2 delivered"):
        check_count("wrong", 1, 2)


def test_cpu_per_message_splits_the_servers_time() -> None:
    from devtools.bench.mta import cpu_ms_per_message, cpu_snapshot

    spent = cpu_ms_per_message({"main": 1.0, "threads": 0.5, "children": 0.0},
                               {"main": 2.0, "threads": 1.5, "children": 2.0}, 1000)
    assert spent == {"main": 1.0, "threads": 1.0, "children": 2.0, "total": 4.0}
    mine = cpu_snapshot(os.getpid())
    assert set(mine) == {"main", "threads", "writer", "children"} and mine["main"] > 0


def test_the_mta_targets_need_both_lmtp_ratios_and_the_served_lda() -> None:
    from devtools.bench.mta import mta_targets_met

    result = {"target_ratio_lmtp_vs_dovecot_lmtp": 2.0,
              "target_ratio_lda_with_server_vs_dovecot_lda": 0.5,
              "ratio_lmtp_vs_dovecot_lmtp_1conn": 2.1, "ratio_lmtp_vs_dovecot_lmtp_4conn": 2.0,
              "ratio_lda_with_server_vs_dovecot_lda": 0.5}
    assert mta_targets_met(result)
    assert not mta_targets_met({**result, "ratio_lmtp_vs_dovecot_lmtp_4conn": 1.99})
    assert not mta_targets_met({**result, "ratio_lda_with_server_vs_dovecot_lda": 0.49})
    four = {**result, "target_ratio_lmtp_vs_dovecot_lmtp_4conn": 1.5,
            "ratio_lmtp_vs_dovecot_lmtp_4conn": 1.5}  # issue 44's target over four
    assert mta_targets_met(four)
    assert not mta_targets_met({**four, "ratio_lmtp_vs_dovecot_lmtp_4conn": 1.49})
    assert not mta_targets_met({**four, "ratio_lmtp_vs_dovecot_lmtp_1conn": 1.99})
    client = {**result, "target_ratio_lda_client_with_server_vs_dovecot_lda": 0.8,
              "ratio_lda_client_with_server_vs_dovecot_lda": 0.8}
    assert mta_targets_met(client)
    assert not mta_targets_met({**client, "ratio_lda_client_with_server_vs_dovecot_lda": 0.79})


def test_runs_of_the_bench_find_no_command_server_of_the_users(tmp_path: Path) -> None:
    from devtools.bench.mta import private_runtime

    env = private_runtime({"XDG_RUNTIME_DIR": "/run/user/0", "X": "1"}, tmp_path / "run")
    assert env == {"XDG_RUNTIME_DIR": str(tmp_path / "run"), "X": "1"}
    assert (tmp_path / "run").stat().st_mode & 0o777 == 0o700


def test_the_lmtp_ceiling_adds_the_stores_work_to_the_protocol_floor() -> None:
    from devtools.bench.mta import lmtp_ceilings

    server = {"main": 0.6, "threads": 1.5, "children": 0.5, "total": 2.6}
    # one connection: the floor's round trip (2 ms at 500 msgs/s) and the writer's 1.5 ms
    assert lmtp_ceilings(1, 500.0, 0.4, server, 0.3, cores=2) == round(1000 / 3.5, 1)
    # four connections on two cores: 0.4 + 1.5 + 0.5 + 0.3 ms of CPU a message
    assert lmtp_ceilings(4, 2000.0, 0.4, server, 0.3, cores=2) == round(2000 / 2.7, 1)
    # never above the protocol layer alone
    assert lmtp_ceilings(4, 100.0, 0.4, server, 0.3, cores=64) == 100.0
    # the writer in a process of its own (ADR 0114): the same work, counted from there
    apart = {"main": 0.6, "threads": 0.0, "writer": 1.5, "children": 0.5, "total": 2.6}
    assert lmtp_ceilings(1, 500.0, 0.4, apart, 0.3, cores=2) == round(1000 / 3.5, 1)
    assert lmtp_ceilings(4, 2000.0, 0.4, apart, 0.3, cores=2) == round(2000 / 2.7, 1)


def test_the_cpu_of_a_writer_process_is_counted_apart_from_other_children() -> None:
    """A child whose command line names the LMTP writer's module is counted as ``writer``;
    any other child (the projecting process, Dovecot's) as ``children``."""
    import subprocess
    import sys

    from devtools.bench.mta import WRITER_PROCESS, _children, is_writer_process

    marked = f"import sys  # {WRITER_PROCESS.decode()}\nsys.stdin.read()"
    other = "import sys\nsys.stdin.read()"
    procs = [subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE)
             for code in (marked, other)]
    try:
        assert {p.pid for p in procs} <= set(_children(os.getpid()))
        assert [is_writer_process(p.pid) for p in procs] == [True, False]
    finally:
        for proc in procs:
            proc.communicate(b"")
    assert not is_writer_process(procs[0].pid)  # gone: nothing to count
