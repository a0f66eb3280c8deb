"""Payloads on the scale-out path live in HBase (ADR 0072), on the real servers (PostgreSQL
log, HBase): a large message one host acknowledged is extracted byte-exact by a second host
with an empty data directory; a host's payload files from before keep working and
``letterlog payloads migrate`` copies them into HBase; a large message while HBase does not
answer is deferred (lda exit 75), a small one is not."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devtools.devservers._common import free_port
from tests.erasure_support import marked_mail
from tests.factories import make_mail, scale_out_env
from tests.services.support import drop_tables

pytestmark = pytest.mark.services

ROOT = Path(__file__).resolve().parents[2]
ACCOUNT = "ada@example.org"


def cli(env: dict[str, str], data: Path, *args: str,
        stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "adapters.cli", "--data", str(data), *args],
                          cwd=ROOT, env={**os.environ, **env}, input=stdin,
                          capture_output=True, timeout=300)


def ok(p: subprocess.CompletedProcess[bytes]) -> Any:
    assert p.returncode == 0, p.stderr.decode()
    return json.loads(p.stdout) if p.stdout.startswith((b"{", b"[")) else p.stdout


@pytest.fixture
def hosts(tmp_path: Path, pg_dsn: str, hbase_server: Any) -> Iterator[dict[str, str]]:
    """Two hosts' environment on one deployment: the same log, HBase prefix and key vault
    (one file both reach here; shared key stores are another change), each its own data
    directory (``--data``). No Kafka, no worker: the command side alone."""
    tag = secrets.token_hex(4)
    env = scale_out_env(tmp_path / "a", dsn=pg_dsn, hbase=hbase_server, kafka_bootstrap="",
                        prefix=f"pay{tag}", topic=f"pay-{tag}", durability="normal")
    env["LETTERLOG_KEY_VAULT"] = str(tmp_path / "vault" / "vault.sqlite")
    (tmp_path / "vault").mkdir(mode=0o700)
    del env["LETTERLOG_DATA"], env["LETTERLOG_KAFKA_BOOTSTRAP"]
    try:
        yield env
    finally:
        drop_tables(hbase_server, env["LETTERLOG_HBASE_TABLE_PREFIX"])


def deliver(env: dict[str, str], data: Path, raw: bytes, tmp_path: Path) -> str:
    mail = tmp_path / f"{secrets.token_hex(4)}.eml"
    mail.write_bytes(raw)
    done = ok(cli(env, data, "--json", "deliver", "--account", ACCOUNT, str(mail)))
    return str(done["message_id"])


def test_a_large_message_one_host_acknowledged_is_extracted_by_another(hosts, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    ok(cli(hosts, a, "init"))
    raw, _ = marked_mail("twohosts", attachment=True)
    assert len(raw) > 10 * 1024
    message_id = deliver(hosts, a, raw, tmp_path)
    assert not (a / "payloads").exists(), "nothing on host A's disk"
    ok(cli(hosts, b, "init"))
    assert ok(cli(hosts, b, "extract", message_id)) == raw
    assert not (b / "payloads").exists()


def test_payload_files_from_before_are_read_then_migrated_into_hbase(hosts, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    ok(cli(hosts, a, "init"))
    files = {**hosts, "LETTERLOG_PAYLOAD_STORE": "files"}  # how a host wrote them before
    before = {deliver(files, a, raw, tmp_path): raw
              for raw, _ in (marked_mail(f"old{i}", attachment=True) for i in range(3))}
    assert len(list((a / "payloads").glob("??/*"))) == 3
    for message_id, raw in before.items():  # HBase's table is empty: read from the files
        assert ok(cli(hosts, a, "extract", message_id)) == raw
    copied = ok(cli(hosts, a, "--json", "payloads", "migrate"))
    assert (copied["files"], copied["copied"], copied["present"]) == (3, 3, 0)
    again = ok(cli(hosts, a, "--json", "payloads", "migrate", "--remove-local"))
    assert (again["copied"], again["present"], again["removed"]) == (0, 3, 3)
    assert list((a / "payloads").glob("??/*")) == []
    ok(cli(hosts, b, "init"))
    for message_id, raw in before.items():  # from HBase alone, on a host that never had them
        assert ok(cli(hosts, b, "extract", message_id)) == raw


def test_a_large_message_is_deferred_while_hbase_does_not_answer(hosts, tmp_path):
    data = tmp_path / "a"
    ok(cli(hosts, data, "init"))
    down = {**hosts, "LETTERLOG_HBASE_PORT": str(free_port()), "LETTERLOG_HBASE_TIMEOUT": "2"}
    large, _ = marked_mail("deferred", attachment=True)

    def lda(raw: bytes, queue_id: str) -> subprocess.CompletedProcess[bytes]:
        return cli(down, data, "lda", "--recipient", ACCOUNT, "--queue-id", queue_id,
                   stdin=raw)

    deferred = lda(large, "Q1")
    assert deferred.returncode == 75, deferred.stderr.decode()
    assert deferred.stderr.startswith(b"4.3.2 mail store unavailable"), deferred.stderr.decode()
    assert b"Traceback" not in deferred.stderr
    small = lda(make_mail("inline", message_id="<small@example.org>"), "Q2")
    assert small.returncode == 0, small.stderr.decode()  # inline: the log alone
    # HBase answers again: the MTA's retry is stored, as a first delivery (nothing was)
    stored = cli(hosts, data, "lda", "--recipient", ACCOUNT, "--queue-id", "Q1", stdin=large)
    assert stored.returncode == 0, stored.stderr.decode()
    assert b"already" not in stored.stdout + stored.stderr


@pytest.mark.bench
def test_the_scale_out_ingest_benchmark_measures_both_payload_stores(
        postgres_server, hbase_server, tmp_path):
    from adapters.config.settings import load_settings
    from devtools.bench.scaleout import bench_scaleout_payloads

    running = load_settings(data=tmp_path, event_store="postgres",
                            postgres_dsn=postgres_server.admin_dsn, table_store="hbase",
                            hbase_host=hbase_server.thrift_host,
                            hbase_port=hbase_server.thrift_port)
    result = bench_scaleout_payloads(12, plot=tmp_path / "plot.png", use_running=running)
    for mix in ("bench_mail", "all_payloads"):
        for way in ("single", "batched"):
            summary = result["mixes"][mix][way]
            for where in ("files", "hbase"):
                assert len(summary[where]["runs_msgs_per_s"]) == 2, summary
                assert summary[where]["msgs_per_s"] > 0
                assert summary[where]["cpu_ms_per_delivery"] > 0
            assert summary["ratio_hbase_to_files"] > 0
    assert result["mixes"]["all_payloads"]["with_payload"] == 12
    assert result["mixes"]["bench_mail"]["with_payload"] == 1
    assert (tmp_path / "plot.png").stat().st_size > 0
