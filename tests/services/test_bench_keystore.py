"""``letterlog bench ingest --key-store`` (ADR 0073): both sides measured in the same run, on
throw-away servers; the key cluster is written once per pool refill, not per delivery."""

from __future__ import annotations

import pytest

from devtools.bench.keystore import bench_keystore

pytestmark = [pytest.mark.services, pytest.mark.bench, pytest.mark.slow]


def test_the_key_store_bench_measures_both_sides_with_a_kek_per_refill_only():
    result = bench_keystore(messages=40)
    for side in ("vault_file", "key_cluster"):
        assert result[side]["msgs_per_s"] > 0 and len(result[side]["runs"]) == 2
        assert 1 <= result[side]["keks"] <= 4  # 8 + 16 + 32 keys: three refills for 40
    assert result["ratio_key_cluster_to_vault_file"] == pytest.approx(
        result["key_cluster"]["msgs_per_s"] / result["vault_file"]["msgs_per_s"], abs=0.001)
