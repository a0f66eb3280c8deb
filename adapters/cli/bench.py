"""``letterlog bench ...``: benchmarks that print one JSON object (baselines in the same run)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from adapters.cli.common import fail, group, state
from adapters.config.settings import load_settings
from adapters.sparkjob.launch import run_module

app = group("Benchmarks.")
SECTION = (110, 'Benchmarks')  # the root help's section (adapters.cli.table)
bench_app = group("Benchmarks (JSON, baseline in the same run).")
app.add_typer(bench_app, name="bench")



@bench_app.callback()
def _benchmarks_installed() -> None:
    """Benchmarks (JSON, baseline in the same run)."""
    # the development tools stay in the repository (ADR 0086): found only from a checkout
    try:
        # local: the development tools: in a checkout alone (ADR 0086)
        import devtools.bench  # noqa: F401
    except ModuleNotFoundError as missing:
        if missing.name not in ("devtools", "devtools.bench"):
            raise  # a tool's own dependency: not ours to hide
        fail("letterlog bench needs the development tools (devtools/), which are not part "
             "of the installed package; run it from a checkout of letterlog (`pip install "
             "-e '.[bench]'`, `make bench`, `make bench-all`)")


BenchJson = Annotated[bool, typer.Option("--json", help="one JSON line (always JSON)")]
PlotOption = Annotated[Path | None, typer.Option(metavar="FILE", help="write a PNG plot")]


def _bench(result: dict[str, Any], as_json: bool = False) -> None:
    compact = as_json or state.json
    sys.stdout.write(json.dumps(result, indent=None if compact else 2) + "\n")


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
    # local: the development tools: in a checkout alone (ADR 0086)
    from devtools.bench.ingest import bench_ingest as run

    if hosts:
        # local: the development tools: in a checkout alone (ADR 0086)
        from devtools.bench.hosts import bench_hosts

        if peer is not None or rules is not None or key_store or scale_out or rights:
            fail("--hosts: not with --peer, --rules, --key-store, --scale-out or --rights")
        _bench(bench_hosts(1000 if messages == 5000 else messages, plot=plot,
                           progress=lambda line: typer.echo(line, err=True)), as_json)
        return
    if rights:
        # local: the development tools: in a checkout alone (ADR 0086)
        from devtools.bench.rights import bench_rights_ingest

        if peer is not None or rules is not None or key_store or scale_out:
            fail("--rights: not with --peer, --rules, --key-store or --scale-out")
        _bench(bench_rights_ingest(messages=messages, plot=plot), as_json)
        return
    if key_store:
        # local: the development tools: in a checkout alone (ADR 0086)
        from devtools.bench.keystore import bench_keystore

        if peer is not None or rules is not None or scale_out:
            fail("--key-store: not with --peer, --rules or --scale-out")
        _bench(bench_keystore(messages=messages, plot=plot), as_json)
        return
    if use_running and not scale_out:
        fail("--use-running: only with --scale-out")
    if scale_out:
        # local: the development tools: in a checkout alone (ADR 0086)
        from devtools.bench.scaleout import bench_scaleout_payloads

        if peer is not None or rules is not None:
            fail("--scale-out: not with --peer or --rules")
        running = load_settings(data=state.data) if use_running else None
        if running is not None and not running.postgres_dsn:
            fail("--use-running: LETTERLOG_POSTGRES_DSN names no PostgreSQL")
        count = 1000 if messages == 5000 else messages
        _bench(bench_scaleout_payloads(count, plot=plot, use_running=running), as_json)
        return
    if rules is not None:
        # local: the development tools: in a checkout alone (ADR 0086)
        from devtools.bench.rules import bench_rules

        if peer is not None:
            fail("--rules: not with --peer")
        _bench(bench_rules(messages=messages, rules=rules), as_json)
        return

    if peer not in (None, "dovecot"):
        fail(f"--peer: unknown peer {peer!r} (choose dovecot)")
    if lda_messages is not None and peer is None:
        fail("--lda-messages: only with --peer dovecot")
    if import_only and peer is None:
        fail("--import-only: only with --peer dovecot")
    _bench(run(messages=messages, plot=plot, peer=peer, lda_messages=lda_messages,
               import_only=import_only), as_json)


@bench_app.command("project")
def bench_project(events: Annotated[int, typer.Option(metavar="N",
                                                      help="events in the log")] = 200_000,
                  plot: PlotOption = None,
                  as_json: BenchJson = False) -> None:
    """Catch-up projection throughput vs raw SQLite writes of the same cells."""
    # local: the development tools: in a checkout alone (ADR 0086)
    from devtools.bench.project import bench_project as run

    _bench(run(events=events, plot=plot), as_json)


@bench_app.command("rebuild")
def bench_rebuild(events: Annotated[int, typer.Option(metavar="N",
                                                      help="events in the log")] = 1_000_000,
                  plot: PlotOption = None,
                  as_json: BenchJson = False,
                  engine: Annotated[str, typer.Option(
                      metavar="ENGINE", help="embedded, or spark: single process vs Spark "
                                             "local[1] and local[2] (and the HBase load)")]
                  = "embedded",
                  hbase: Annotated[bool, typer.Option(
                      help="with --engine spark: also the HBase load vs raw happybase")]
                  = True,
                  other_layout: Annotated[bool, typer.Option(
                      help="with --engine spark: also rebuild with the layout before "
                           "(every projection by account)")]
                  = True,
                  repeat: Annotated[int, typer.Option(
                      metavar="N", min=1,
                      help="with --engine spark: every rebuild N times, the fastest counts")]
                  = 1,
                  accounts: Annotated[int | None, typer.Option(
                      metavar="N", min=1,
                      help="with --engine spark: accounts in the log (default: the bench "
                           "log's; 1: every event in one account)")] = None) -> None:
    """Single-process rebuild of all projections vs reading and decoding the log; with
    --engine spark, against the Spark job on local[1] and local[2]."""
    if engine == "spark":
        args = ["bench", "--events", str(events), *(["--plot", str(plot)] if plot else []),
                *([] if hbase else ["--no-hbase"]),
                *([] if other_layout else ["--no-other-layout"]),
                "--repeat", str(repeat),
                *(["--accounts", str(accounts)] if accounts is not None else [])]
        _bench(run_module(args, fail=fail), as_json)
        return
    if engine != "embedded":
        fail(f"--engine: {engine!r} is not embedded or spark")
    if accounts is not None:
        fail("--accounts: only with --engine spark")
    # local: the development tools: in a checkout alone (ADR 0086)
    from devtools.bench.rebuild import bench_rebuild as run

    _bench(run(events=events, plot=plot), as_json)


@bench_app.command("query")
def bench_query(messages: Annotated[int, typer.Option(
                    metavar="N", help="messages in the mailbox")] = 100_000,
                samples: Annotated[int, typer.Option(metavar="N", help="queries timed")] = 2000,
                plot: PlotOption = None, as_json: BenchJson = False,
                rights: Annotated[bool, typer.Option(
                    "--rights", help="instead: the newest 50 and the mailbox list as the "
                    "administrator and as a user with lr (what the rights check costs; "
                    "default 2000 messages)")] = False) -> None:
    """p50/p99 of a newest-50 listing and a counters read vs a raw SELECT; with --rights
    what the rights check costs a listing (docs/permissions.md)."""
    if rights:
        # local: the development tools: in a checkout alone (ADR 0086)
        from devtools.bench.rights import bench_rights_query

        given = messages != 100_000  # the default is the listing leg's; this one's is 2000
        _bench(bench_rights_query(messages=messages if given else 2000, samples=samples,
                                  plot=plot), as_json)
        return
    # local: the development tools: in a checkout alone (ADR 0086)
    from devtools.bench.query import bench_query as run

    _bench(run(messages=messages, samples=samples, plot=plot), as_json)


@bench_app.command("stream")
def bench_stream(events: Annotated[int, typer.Option(metavar="N",
                                                     help="events end to end")] = 100_000,
                 plot: PlotOption = None,
                 use_running: Annotated[bool, typer.Option(
                     "--use-running", help="Kafka and HBase from LETTERLOG_* settings "
                     "(services.env) instead of starting them")] = False,
                 versioned_baseline: Annotated[bool, typer.Option(
                     "--versioned-baseline", help="also write the cells through happybase "
                     "with their versions (one call per table and version: minutes)")] = False,
                 accounts: Annotated[int | None, typer.Option(
                     metavar="N", min=1, help="accounts in the log (default: the bench log's, "
                     "6 for 100k events; the log is partitioned by account)")] = None,
                 warm_up: Annotated[int | None, typer.Option(
                     "--warm-up", metavar="N", min=0, help="events the workers' projector "
                     "writes to HBase, untimed, before the timed run (default 20000; 0: "
                     "none)")] = None,
                 as_json: BenchJson = False) -> None:
    """Relay → Kafka → worker → HBase events/s vs direct happybase batch writes."""
    # local: the development tools: in a checkout alone (ADR 0086)
    from devtools.bench.stream import bench_stream as run
    from devtools.bench.stream import running_servers

    servers: dict[str, Any] = (running_servers(load_settings(data=state.data)) if use_running
                               else {})
    options: dict[str, Any] = {**servers, **({} if warm_up is None else {"warm_up": warm_up})}
    _bench(run(events=events, plot=plot, versioned_baseline=versioned_baseline,
               accounts=accounts, **options), as_json)


@bench_app.command("startup")
def bench_startup(runs: Annotated[int, typer.Option(metavar="N", min=3,
                                                    help="runs per command")] = 11,
                  plot: PlotOption = None, as_json: BenchJson = False) -> None:
    """Start-up of simple commands (help, list, show, flag), whole process, median wall and
    CPU time, beside the interpreter alone and the interpreter importing typer; then the
    same commands through the command server."""
    # local: the development tools: in a checkout alone (ADR 0086)
    from devtools.bench.startup import bench_startup as run

    _bench(run(runs=runs, plot=plot), as_json)


@bench_app.command("imap")
def bench_imap(seconds: Annotated[int, typer.Option(metavar="N", min=1,
                                                    help="seconds of each run")] = 30,
               clients: Annotated[int, typer.Option(metavar="N", min=1,
                                                    help="imaptest clients")] = 10,
               idle: Annotated[int, typer.Option(
                   metavar="N", min=0, help="idle connections for the memory figure")] = 100,
               peer: Annotated[str | None, typer.Option(
                   metavar="PEER", help="also measure a peer in the same run: dovecot")] = None,
               processes: Annotated[int, typer.Option(
                   metavar="N", min=1, help="letterlog imap --processes N")] = 1,
               plot: PlotOption = None, as_json: BenchJson = False) -> None:
    """IMAP commands/s under imaptest's benchmark mode, letterlog imap beside Dovecot's."""
    # local: the development tools: in a checkout alone (ADR 0086)
    from devtools.bench.imap import bench_imap as run

    if peer not in (None, "dovecot"):
        fail(f"--peer {peer!r}: the only peer is dovecot", 2)
    _bench(run(seconds=seconds, clients=clients, idle=idle, peer=peer, processes=processes,
               plot=plot), as_json)


@bench_app.command("purge")
def bench_purge(messages: Annotated[int, typer.Option(
                    metavar="N", help="due messages to purge")] = 50_000,
                single: Annotated[int, typer.Option(
                    metavar="N", help="single-command deliveries timed for the intake rate")
                ] = 2000,
                plot: PlotOption = None, as_json: BenchJson = False) -> None:
    """Due messages purged/s vs single-command deliveries/s and raw SQLite deletes."""
    # local: the development tools: in a checkout alone (ADR 0086)
    from devtools.bench.purge import bench_purge as run

    _bench(run(messages=messages, single=single, plot=plot), as_json)
