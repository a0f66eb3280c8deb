"""Projections (rebuild, verify) and the demo."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from adapters.cli.common import fail, group, out, progress_enabled, state

app = group("Projections and the demo.")

Projection = Annotated[str | None, typer.Argument(metavar="PROJECTION",
                                                  help="projection name")]
AllOption = Annotated[bool, typer.Option("--all", help="every projection")]


def _progress(label: str) -> Any:
    from rich.console import Console
    from rich.progress import Progress

    bar = Progress(console=Console(stderr=True), disable=not progress_enabled())
    task = bar.add_task(label, total=None)

    def update(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)

    return bar, update


@app.command()
def rebuild(projection: Projection = None, all_: AllOption = False) -> None:
    """Rebuild projections from the log into fresh tables; switch readers atomically."""
    if not all_ and not projection:
        fail("give a PROJECTION or --all")
    names = None if all_ else [projection or ""]
    store = state.reader()
    bar, update = _progress("rebuilding")
    try:
        with bar:
            result = store.rebuild(names, update)
    except KeyError as e:
        fail(str(e).strip("\"'"))
    out(result, f"rebuilt {', '.join(result['projections'])} up to position {result['position']} "
                f"in {result['seconds']} s")


@app.command()
def verify(projection: Projection = None, all_: AllOption = False) -> None:
    """Compare live tables with a rebuild from the log; exit 1 on any difference."""
    names = None if all_ or not projection else [projection]
    store = state.reader()
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
def demo(messages: Annotated[int, typer.Option(metavar="N", min=1,
                                               help="messages to generate")] = 400) -> None:
    """Generate realistic mail, deliver it, exercise every command, print a summary."""
    from adapters.cli.demo import run_demo

    run_demo(state.store(), messages=messages, as_json=state.json)
