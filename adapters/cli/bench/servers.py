"""``letterlog bench stream|startup|imap``: letterlog's processes under load: the stream path
(relay, Kafka, workers, HBase), a command's start-up (alone and through the command server)
and the IMAP server beside Dovecot's."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from adapters.cli.bench.options import BenchJson, PlotOption, bench_app, emit
from adapters.cli.common import fail, state
from adapters.config.settings import load_settings
from devtools.bench.imap import bench_imap as run_imap
from devtools.bench.startup import bench_startup as run_startup
from devtools.bench.stream import bench_stream as run_stream
from devtools.bench.stream import running_servers


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
    servers: dict[str, Any] = (running_servers(load_settings(data=state.data)) if use_running
                               else {})
    options: dict[str, Any] = {**servers, **({} if warm_up is None else {"warm_up": warm_up})}
    emit(run_stream(events=events, plot=plot, versioned_baseline=versioned_baseline,
                    accounts=accounts, **options), as_json)


@bench_app.command("startup")
def bench_startup(runs: Annotated[int, typer.Option(metavar="N", min=3,
                                                    help="runs per command")] = 11,
                  plot: PlotOption = None, as_json: BenchJson = False) -> None:
    """Start-up of simple commands (help, list, show, flag), whole process, median wall and
    CPU time, beside the interpreter alone and the interpreter importing typer; then the
    same commands through the command server."""
    emit(run_startup(runs=runs, plot=plot), as_json)


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
    if peer not in (None, "dovecot"):
        fail(f"--peer {peer!r}: the only peer is dovecot", 2)
    emit(run_imap(seconds=seconds, clients=clients, idle=idle, peer=peer, processes=processes,
                  plot=plot), as_json)
