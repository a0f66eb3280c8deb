"""Scale-out processes: the outbox relay, the faust workers and their dead letters."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from adapters.cli.common import fail, group, out, state

app = group("Scale-out processes.")
dead_app = group("Poison records the stream workers set aside.")
app.add_typer(dead_app, name="dead-letters")


def _stop_on_signals() -> Any:
    import signal
    import threading

    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    return stop


@app.command()
def relay(once: Annotated[bool, typer.Option(help="publish what is there, then exit")] = False
          ) -> None:
    """Outbox relay: publish the event log to Kafka (LETTERLOG_KAFKA_BOOTSTRAP), resumably."""
    from adapters.settings import load_settings
    from adapters.streaming.relay import OutboxRelay

    settings = load_settings(data=state.data)
    with OutboxRelay.from_settings(settings) as r:
        if once:
            n = r.run_once()
            out({"published": n}, f"published {n} events")
        else:
            r.run(_stop_on_signals())


@app.command()
def worker(loglevel: Annotated[str, typer.Option(metavar="LEVEL",
                                                 help="faust log level")] = "info") -> None:
    """faust projector worker: Kafka → the same projectors → HBase (run N of them)."""
    from adapters.settings import load_settings
    from adapters.streaming.worker import main as run

    raise typer.Exit(run(load_settings(data=state.data), loglevel=loglevel))


def _stream_store() -> Any:
    from adapters.bootstrap import stream_tables
    from adapters.settings import load_settings

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
    from adapters.streaming.deadletters import list_closed, list_dead_letters

    listing = list_closed if closed else list_dead_letters
    for letter in listing(_stream_store(), limit=limit):
        out(letter.as_dict(), _letter_line(letter.as_dict()))


@dead_app.command("show")
def dead_letters_show(letter_id: Annotated[str, typer.Argument(
        metavar="ID", help="topic/partition@offset, as `list` prints it")]) -> None:
    """One dead letter: the record, its error and every attempt (open or closed)."""
    from adapters.streaming.deadletters import get_dead_letter

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
    from adapters.streaming.deadletters import discard

    if all_ == bool(letter_ids):
        fail("give dead letter IDs or --all (not both)")
    for letter in discard(_stream_store(), None if all_ else letter_ids, reason=reason):
        out({**letter.as_dict(), "discarded": True}, f"discarded {letter.id}")


@dead_app.command("redrive")
def dead_letters_redrive() -> None:
    """Apply every dead letter again (after a fix); the ones that succeed are closed."""
    from adapters.streaming.deadletters import redrive

    report = redrive(_stream_store())
    out({k: v for k, v in report.items() if k != "details"},
        f"redriven {report['redriven']}, still failing {report['failed']}")
