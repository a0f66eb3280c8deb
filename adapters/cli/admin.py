"""Projections (rebuild, verify, compact) and the demo."""

from __future__ import annotations

import contextlib
import json
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, cast

import typer

from adapters.cli.arguments import AS_OF_HELP, parse_as_of
from adapters.cli.common import fail, group, human_size, out, state
from adapters.cli.demo import run_demo
from adapters.cli.progress import progress_bar
from adapters.config.settings import load_settings
from adapters.readside.rebuild_lock import RebuildRunning, check_not_running, rebuild_lock
from adapters.sparkjob.checks import parse_conf, require_store
from adapters.sparkjob.launch import submit
from domain.errors import LetterlogError, SettingsError
from projections.registry import select

app = group("Projections and the demo.")
SECTION = (50, 'Projections')  # the root help's section (adapters.cli.table)

Projection = Annotated[str | None, typer.Argument(metavar="PROJECTION",
                                                  help="projection name")]
AllOption = Annotated[bool, typer.Option("--all", help="every projection")]


def _progress(label: str) -> Any:
    bar = progress_bar()
    task = bar.add_task(label, total=None)

    def update(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)

    return bar, update


MasterOption = Annotated[str | None, typer.Option(
    metavar="URL", help="Spark master URL (default $LETTERLOG_SPARK_MASTER, else "
                        "spark-defaults.conf's spark.master, else local[2,2])")]
ConfOption = Annotated[list[str] | None, typer.Option(
    "--conf", metavar="KEY=VALUE", help="a Spark setting passed to spark-submit (repeatable); "
                                        "it and spark-defaults.conf win over letterlog's defaults")]


@app.command()
def rebuild(projection: Projection = None, all_: AllOption = False,
            engine: Annotated[str, typer.Option(
                metavar="ENGINE", help="embedded (this process, and one more per core for a "
                                       "long log) or spark")] = "embedded",
            workers: Annotated[int | None, typer.Option(
                metavar="N", min=1, max=64,
                help="with --engine embedded: processes the fold of a log of 100,000 events "
                     "or more takes (default $LETTERLOG_REBUILD_WORKERS, else the cores, at "
                     "most 4; 1: this process alone)")] = None,
            master: MasterOption = None,
            conf: ConfOption = None,
            until_position: Annotated[int | None, typer.Option(
                metavar="P", help="time travel: a read-only view as at log position P")] = None,
            as_of: Annotated[str | None, typer.Option(
                "--as-of", metavar="P|DATE", help="time travel: a read-only view " + AS_OF_HELP
            )] = None,
            view: Annotated[str | None, typer.Option(
                metavar="NAME", help="the view's name (default p<position>)")] = None) -> None:
    """Rebuild projections from the log into fresh tables; switch readers atomically.
    With --until-position or --as-of: build a read-only view as it was then instead."""
    if not all_ and not projection:
        fail("give a PROJECTION or --all")
    if engine not in ("embedded", "spark"):
        fail(f"--engine: {engine!r} is not embedded or spark")
    if master is not None and engine != "spark":
        fail("--master: only with --engine spark")
    if workers is not None and engine != "embedded":
        fail("--workers: only with --engine embedded")
    if conf and engine != "spark":
        fail("--conf: only with --engine spark")
    if until_position is not None and as_of is not None:
        fail("--until-position and --as-of: give one of them")
    if view is not None and until_position is None and as_of is None:
        fail("--view: only with --until-position or --as-of")
    when = parse_as_of(as_of)
    if isinstance(when, int):  # a position: the same as --until-position
        until_position, when = when, None
    names = None if all_ else [projection or ""]
    if names:
        known_projections(names)
    if engine == "spark":
        _ready_for_spark(rebuilding=True)
        extra = [*(["--until-position", str(until_position)] if until_position is not None
                   else []), *(["--as-of", when.isoformat()] if when is not None else []),
                 *(["--view", view] if view else [])]
        result = spark_job(["rebuild", *(names or ["--all"]), *extra], master, conf)
    elif until_position is not None or when is not None:
        store = state.admin_reader()
        stop = until_position if until_position is not None else store.position_at(
            cast("datetime", when))  # one of the two is given (the branch's condition)
        with _one_rebuild():
            result = store.build_view(view or f"p{stop}", names, stop)
    else:
        store = state.admin_reader()
        bar, update = _progress("rebuilding")
        with _one_rebuild(), bar:
            result = store.rebuild(names, update, workers=workers)
    if "view" in result:
        out(result, f"view {result['view']}: {', '.join(result['projections'])} as at "
                    f"position {result['position']} (read with --view {result['view']})")
        return
    out(result, f"rebuilt {', '.join(result['projections'])} up to position {result['position']} "
                f"in {result['seconds']} s")


def _ready_for_spark(*, rebuilding: bool) -> None:
    """Refuses (exit 2, before Spark starts) a data directory holding no store, and a
    rebuild while another runs on the same store."""
    try:  # an export only reads: a read-only store (a snapshot) will do
        require_store(load_settings(data=state.data), read_only=not rebuilding)
        if rebuilding:
            check_not_running(state.data)
    except LetterlogError as e:
        fail(str(e))


def _one_rebuild() -> contextlib.ExitStack:
    """The store's rebuild lock, held, for a rebuild in this process (exit 2 if another
    runs)."""
    held = contextlib.ExitStack()
    try:
        held.enter_context(rebuild_lock(state.data))
    except RebuildRunning as e:
        fail(str(e))
    return held


def known_projections(names: list[str]) -> None:
    try:
        select(names)
    except KeyError as e:
        fail(str(e).strip("\"'"))


def spark_job(args: list[str], master: str | None,
              conf: list[str] | None = None) -> dict[str, Any]:
    """The Spark job (``spark_replay/submit.py``) in a driver process of its own."""
    try:
        pairs = parse_conf(conf or [])
    except SettingsError as e:
        fail(str(e))
    return submit(args, master, data=state.data, fail=fail, conf=pairs,
                  progress=_spark_progress)


def _spark_progress(event: dict[str, Any]) -> None:
    """A Spark job's progress on stderr: a JSON line each with --json, else a line for a
    person (ADR 0093)."""
    if state.json:
        typer.echo(json.dumps(event, sort_keys=True), err=True)
        return
    kind = event.get("event")
    if kind == "starting":
        text = (f"starting on {event['master']}: its first task must run within "
                f"{event['timeout_s']:g} s")
    elif kind == "started":
        text = f"started in {event['seconds']} s ({event['executors']} executors)"
    elif kind == "executors":
        text = f"{event['registered']} executors registered"
    elif kind == "stage":
        text = (f"stage {event['stage']} ({event['name']}): {event['done']}/{event['tasks']} "
                f"tasks done, {event['running']} running"
                + (f", {event['failed']} failed" if event["failed"] else ""))
    elif kind == "events":
        text = f"{event['folded']}/{event['of']} log positions folded"
    else:
        return
    typer.echo(f"spark: {text}", err=True)


HOLDS_PERSONAL_DATA = ("messages",)
"""The projections whose cells hold message content (each listing row's envelope)."""


@app.command()
def export(what: Annotated[str, typer.Argument(metavar="PROJECTION|events",
                                               help="a projection's name, or events")],
           directory: Annotated[Path, typer.Argument(metavar="DIR",
                                                     help="output directory (events: "
                                                          "appended; a projection: replaced)")],
           format_: Annotated[str, typer.Option("--format", metavar="FORMAT",
                                                help="parquet")] = "parquet",
           personal: Annotated[bool, typer.Option(
               "--personal", help="open the events' sealed personal parts (the export is a "
                                  "copy that erasing a message cannot reach)")] = False,
           master: MasterOption = None, conf: ConfOption = None) -> None:
    """Write the events or a projection's cells as Parquet (on Spark), for Spark SQL."""
    if format_ != "parquet":
        fail(f"--format: {format_!r} is not parquet")
    if what != "events":
        known_projections([what])
        if personal:
            fail("--personal: only the events have personal parts (a projection's cells "
                 "are exported as the tables hold them)")
    _ready_for_spark(rebuilding=False)
    if personal or what in HOLDS_PERSONAL_DATA:
        typer.echo(f"letterlog: warning: {directory} will hold personal data in plain text "
                   f"({'the events opened' if personal else 'subjects, senders, attachment names'}"
                   f"); erasing a message does not reach this copy: delete it when done",
                   err=True)
    result = spark_job(["export", what, str(directory.resolve()),
                        *(["--personal"] if personal else [])], master, conf)
    out(result, f"exported {result['rows']} rows of {what} to {result['directory']}")


@app.command()
def verify(projection: Projection = None, all_: AllOption = False) -> None:
    """Compare live tables with a rebuild from the log; exit 1 on any difference."""
    names = None if all_ or not projection else [projection]
    store = state.admin_reader()
    bar, update = _progress("verifying")
    try:
        with bar:
            reports = store.verify(names, update)
    except KeyError as e:
        fail(str(e).strip("\"'"))
    for r in reports:
        out(r.as_dict(), f"{r.table:16} rows={r.live_rows:<8} cells={r.live_cells:<9} "
                         f"{r.live_digest[:16]}  {'identical' if r.identical else 'DIFFERENT'}")
        for d in r.differences:
            typer.echo(f"    {d}", err=True)
    if not all(r.identical for r in reports):
        raise typer.Exit(1)


@app.command()
def compact() -> None:
    """Rewrite the embedded read models' file with full pages (after many live deliveries
    it is about half empty); an import into a fresh store does this by itself."""
    result = state.admin_reader().compact_read_models()
    if result is None:
        fail("compact: the read models are not in the embedded table store "
             "(HBase compacts its own files)")
    out(result, f"read models: {human_size(result['bytes_before'])} -> "
                f"{human_size(result['bytes_after'])} "
                f"({human_size(result['bytes_freed'])} freed)")


@app.command()
def demo(messages: Annotated[int, typer.Option(metavar="N", min=1,
                                               help="messages to generate")] = 400) -> None:
    """Generate realistic mail, deliver it, exercise every command, print a summary."""
    run_demo(state.admin(), messages=messages, as_json=state.json)
