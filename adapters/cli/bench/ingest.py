"""``letterlog bench ingest``: deliveries per second, single and batched, against raw SQLite
with the same durability; or, instead, what a peer (Dovecot), event rules, the rights check,
the key store, the scale-out path or a second application host make of them."""

from __future__ import annotations

from typing import Annotated

import typer

from adapters.cli.bench.options import BenchJson, PlotOption, bench_app, emit
from adapters.cli.common import fail, state
from adapters.config.settings import load_settings
from devtools.bench.hosts import bench_hosts
from devtools.bench.ingest import bench_ingest as run
from devtools.bench.keyreads import bench_key_reads
from devtools.bench.keystore import bench_keystore
from devtools.bench.rights import bench_rights_ingest
from devtools.bench.rules import bench_rules
from devtools.bench.scaleout import bench_scaleout_payloads


@bench_app.command("ingest")
def bench_ingest(messages: Annotated[int, typer.Option(metavar="N", help="messages")] = 5000,
                 plot: PlotOption = None,
                 as_json: BenchJson = False,
                 peer: Annotated[str | None, typer.Option(
                     metavar="PEER", help="also measure a peer on the same messages: dovecot")
                 ] = None,
                 lda_messages: Annotated[int | None, typer.Option(
                     metavar="N", min=1, help="with --peer: processes a side of the lda leg "
                                              "(default 300)")] = None,
                 import_only: Annotated[bool, typer.Option(
                     "--import-only", help="with --peer dovecot: only the import leg, with "
                     "its CPU a message and the load average")] = False,
                 rules: Annotated[int | None, typer.Option(
                     metavar="N", min=0, max=1000,
                     help="instead: single deliveries with no rules and with N event rules, "
                          "and the dispatch rate to a local endpoint")] = None,
                 key_store: Annotated[bool, typer.Option(
                     "--key-store", help="instead: single deliveries on the scale-out log "
                     "with the KEKs in the vault file and in the key cluster, same run "
                     "(throw-away servers)")] = False,
                 scale_out: Annotated[bool, typer.Option(
                     "--scale-out", help="instead: single deliveries on the scale-out path "
                     "(PostgreSQL, HBase) with payloads in files vs in HBase (default "
                     "--messages 1000)")] = False,
                 use_running: Annotated[bool, typer.Option(
                     "--use-running", help="with --scale-out: PostgreSQL (an admin's "
                     "LETTERLOG_POSTGRES_DSN) and HBase from LETTERLOG_* settings instead of "
                     "starting them")] = False,
                 rights: Annotated[bool, typer.Option(
                     "--rights", help="instead: single deliveries into a shared mailbox as the "
                     "administrator and as a user with lri (what the rights check costs)")
                 ] = False,
                 hosts: Annotated[bool, typer.Option(
                     "--hosts", help="instead: single deliveries on the scale-out path (the "
                     "log, the key cluster, HBase) from one application host and from two at "
                     "once, same run (throw-away servers; default --messages 1000)")
                 ] = False) -> None:
    """Deliveries/s (single command and batched import) vs raw SQLite, same durability;
    with --peer dovecot also import, LMTP servers (one and four connections), one lda
    process per message, and bytes on disk, against Dovecot; with --rules N what N event
    rules cost a delivery (docs/event-rules.md); with --rights what the rights check costs
    one (docs/permissions.md)."""
    if hosts:
        if peer is not None or rules is not None or key_store or scale_out or rights:
            fail("--hosts: not with --peer, --rules, --key-store, --scale-out or --rights")
        emit(bench_hosts(1000 if messages == 5000 else messages, plot=plot,
                         progress=lambda line: typer.echo(line, err=True)), as_json)
        return
    if rights:
        if peer is not None or rules is not None or key_store or scale_out:
            fail("--rights: not with --peer, --rules, --key-store or --scale-out")
        emit(bench_rights_ingest(messages=messages, plot=plot), as_json)
        return
    if key_store:
        if peer is not None or rules is not None or scale_out:
            fail("--key-store: not with --peer, --rules or --scale-out")
        emit(bench_keystore(messages=messages, plot=plot), as_json)
        return
    if use_running and not scale_out:
        fail("--use-running: only with --scale-out")
    if scale_out:
        if peer is not None or rules is not None:
            fail("--scale-out: not with --peer or --rules")
        running = load_settings(data=state.data) if use_running else None
        if running is not None and not running.postgres_dsn:
            fail("--use-running: LETTERLOG_POSTGRES_DSN names no PostgreSQL")
        count = 1000 if messages == 5000 else messages
        emit(bench_scaleout_payloads(count, plot=plot, use_running=running), as_json)
        return
    if rules is not None:
        if peer is not None:
            fail("--rules: not with --peer")
        emit(bench_rules(messages=messages, rules=rules), as_json)
        return

    if peer not in (None, "dovecot"):
        fail(f"--peer: unknown peer {peer!r} (choose dovecot)")
    if lda_messages is not None and peer is None:
        fail("--lda-messages: only with --peer dovecot")
    if import_only and peer is None:
        fail("--import-only: only with --peer dovecot")
    emit(run(messages=messages, plot=plot, peer=peer, lda_messages=lda_messages,
             import_only=import_only), as_json)


@bench_app.command("keys")
def bench_keys(events: Annotated[int, typer.Option(metavar="N", min=1,
                                                   help="sealed events to read")] = 5000,
               page: Annotated[int, typer.Option(metavar="N", min=1,
                                                 help="events a page")] = 500,
               plot: PlotOption = None, as_json: BenchJson = False) -> None:
    """Sealed events read: a data key read each vs a page's keys in one query (SQLite, and a
    throw-away PostgreSQL), alternated in the same run (ADR 0117)."""
    emit(bench_key_reads(events, page, plot=plot, progress=_said), as_json)


def _said(line: str) -> None:
    typer.echo(f"bench keys: {line}", err=True)
