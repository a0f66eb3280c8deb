"""``letterlog bench project|rebuild|query``: the read models filled from the log (catch-up
projection, a whole rebuild, in one process or on Spark) and read (a listing, the counters)."""

from __future__ import annotations

from typing import Annotated

import typer

from adapters.cli.bench.options import BenchJson, PlotOption, bench_app, emit
from adapters.cli.common import fail
from adapters.sparkjob.launch import run_module
from devtools.bench.project import bench_project as run_project
from devtools.bench.query import bench_query as run_query
from devtools.bench.rebuild import bench_rebuild as run_rebuild
from devtools.bench.rights import bench_rights_query


@bench_app.command("project")
def bench_project(events: Annotated[int, typer.Option(metavar="N",
                                                      help="events in the log")] = 200_000,
                  plot: PlotOption = None,
                  as_json: BenchJson = False) -> None:
    """Catch-up projection throughput vs raw SQLite writes of the same cells."""
    emit(run_project(events=events, plot=plot), as_json)


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
                           "log's; 1: every event in one account)")] = None,
                  workers: Annotated[int, typer.Option(
                      metavar="N", min=0, max=64,
                      help="with --engine embedded: processes the rebuild folds over (0: the "
                           "cores, at most 4), beside the same rebuild in one process")]
                  = 0) -> None:
    """Rebuild of all projections (over the cores, and in one process) vs reading and
    decoding the log; with --engine spark, against the Spark job on local[1] and local[2]."""
    if engine == "spark" and workers:
        fail("--workers: only with --engine embedded")
    if engine == "spark":
        args = ["bench", "--events", str(events), *(["--plot", str(plot)] if plot else []),
                *([] if hbase else ["--no-hbase"]),
                *([] if other_layout else ["--no-other-layout"]),
                "--repeat", str(repeat),
                *(["--accounts", str(accounts)] if accounts is not None else [])]
        emit(run_module(args, fail=fail), as_json)
        return
    if engine != "embedded":
        fail(f"--engine: {engine!r} is not embedded or spark")
    if accounts is not None:
        fail("--accounts: only with --engine spark")
    emit(run_rebuild(events=events, plot=plot, workers=workers), as_json)


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
        given = messages != 100_000  # the default is the listing leg's; this one's is 2000
        emit(bench_rights_query(messages=messages if given else 2000, samples=samples,
                                plot=plot), as_json)
        return
    emit(run_query(messages=messages, samples=samples, plot=plot), as_json)
