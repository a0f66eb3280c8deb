"""``letterlog bench ingest --key-store`` (ADR 0073): both sides measured in the same run, on
throw-away servers; the key cluster is written once per pool refill, not per delivery."""

from __future__ import annotations

import pytest

from devtools.bench.keyreads import bench_key_reads
from devtools.bench.keystore import bench_keystore

pytestmark = [pytest.mark.services, pytest.mark.bench, pytest.mark.slow]


def test_the_key_store_bench_measures_both_sides_with_a_kek_per_refill_only():
    result = bench_keystore(messages=40)
    for side in ("vault_file", "key_cluster"):
        assert result[side]["msgs_per_s"] > 0 and len(result[side]["runs"]) == 2
        assert 1 <= result[side]["keks"] <= 4  # 8 + 16 + 32 keys: three refills for 40
    assert result["ratio_key_cluster_to_vault_file"] == pytest.approx(
        result["key_cluster"]["msgs_per_s"] / result["vault_file"]["msgs_per_s"], abs=0.001)


def test_the_key_reads_bench_reads_a_page_of_keys_at_once_on_both_stores(tmp_path):
    """``letterlog bench keys`` (ADR 0117): each leg read every event (a live key never read
    as destroyed), a read per key made one key-table read an event, a read per page one a
    page, on SQLite and on the real PostgreSQL; the plot is written."""
    result = bench_key_reads(events=60, page=25, plot=tmp_path / "keys.png")
    assert result["events"] == 60 and (tmp_path / "keys.png").stat().st_size > 0
    for where in ("sqlite", "postgres"):
        legs = result[where]
        assert legs["a_read_per_key"]["key_table_reads"] == 60
        assert legs["a_read_per_page"]["key_table_reads"] == 3  # 25 + 25 + 10
        assert all(r["us_per_event"] > 0 for leg in ("a_read_per_key", "a_read_per_page")
                   for r in legs[leg]["runs"])
        assert legs["speedup"] == pytest.approx(
            legs["a_read_per_key"]["us_per_event"] / legs["a_read_per_page"]["us_per_event"],
            abs=0.01)
