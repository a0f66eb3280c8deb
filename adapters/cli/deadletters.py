"""``letterlog dead-letters list|show|discard|redrive``: the poison records the stream
workers set aside, and sending them through the projectors again."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from adapters.bootstrap.tables import stream_tables
from adapters.cli.common import fail, group, out, state
from adapters.config.settings import load_settings
from adapters.readside.catalog import Catalog
from adapters.streaming.deadletters import discard, get_dead_letter, list_closed, list_dead_letters
from adapters.streaming.redrive import redrive

app = group("Scale-out processes.")
SECTION = (101, 'Scale-out')  # the root help's section (adapters.cli.table)
dead_app = group("Poison records the stream workers set aside.")
app.add_typer(dead_app, name="dead-letters")


def _stream_store() -> Any:
    return stream_tables(load_settings(data=state.data))


def _letter_line(d: dict[str, Any]) -> str:
    closed = f"  [{d['outcome']} {d['closed_at']} by {d['closed_by']}]" if "outcome" in d else ""
    return f"{d['id']}  times={d['times']}  {d['error']}{closed}"


@dead_app.command("list")
def dead_letters_list(limit: Annotated[int, typer.Option(metavar="N", min=1,
                                                         help="at most N")] = 100,
                      closed: Annotated[bool, typer.Option(
                          "--closed", help="the discarded and redriven ones instead")] = False,
                      ) -> None:
    """List dead letters (ID, how often, the last error)."""
    listing = list_closed if closed else list_dead_letters
    for letter in listing(_stream_store(), limit=limit):
        out(letter.as_dict(), _letter_line(letter.as_dict()))


@dead_app.command("show")
def dead_letters_show(letter_id: Annotated[str, typer.Argument(
        metavar="ID", help="topic/partition@offset, as `list` prints it")]) -> None:
    """One dead letter: the record, its error and every attempt (open or closed)."""
    d = get_dead_letter(_stream_store(), letter_id).details()
    if state.json:
        out(d)
        return
    attempts = d.pop("attempts")
    for k, v in d.items():
        typer.echo(f"{k:12} {v}")
    for a in attempts:
        typer.echo(f"attempt      {a['at']}  {a['by']}  tries={a['tries']}  {a['error']}")


@dead_app.command("discard")
def dead_letters_discard(
    letter_ids: Annotated[list[str] | None, typer.Argument(metavar="[ID]...",
                                                           help="dead letters to close")] = None,
    all_: Annotated[bool, typer.Option("--all", help="every open dead letter")] = False,
    reason: Annotated[str, typer.Option(metavar="TEXT", help="why (kept in the record)")] = "",
) -> None:
    """Close dead letters without applying them; each is recorded (who, when, why)."""
    if all_ == bool(letter_ids):
        fail("give dead letter IDs or --all (not both)")
    for letter in discard(_stream_store(), None if all_ else letter_ids, reason=reason):
        out({**letter.as_dict(), "discarded": True}, f"discarded {letter.id}")


@dead_app.command("redrive")
def dead_letters_redrive() -> None:
    """Apply every dead letter again (after a fix); the ones that succeed are closed (exit 1
    if some still fail: each failure counts in `times`)."""
    store = _stream_store()
    catalog = Catalog(store)  # into the tables readers and workers use (after a rebuild too)
    catalog.refresh()
    report = redrive(store, physical=catalog.physical)
    out({k: v for k, v in report.items() if k != "details"},
        f"redriven {report['redriven']}, still failing {report['failed']}")
    if report["failed"]:
        fail(f"{report['failed']} dead letter{'s' if report['failed'] != 1 else ''} still "
             "fail (`letterlog dead-letters list` shows them and their errors)", 1)
