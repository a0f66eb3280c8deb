"""Scale-out processes: the outbox relay, the stream workers and their dead letters."""

from __future__ import annotations

import logging
import os
import time
from typing import Annotated, Any

import typer

from adapters.bootstrap import scaleout as bootstrap
from adapters.bootstrap.scaleout import relay as make_relay
from adapters.bootstrap.tables import stream_tables
from adapters.cli.common import fail, group, out, state, stop_on_signals
from adapters.config.settings import load_settings
from adapters.operations.supervision import SupervisorError
from adapters.readside.catalog import Catalog
from adapters.streaming.deadletters import discard, get_dead_letter, list_closed, list_dead_letters
from adapters.streaming.lag import exit_status, render, snapshot
from adapters.streaming.processes import restart, start, status, stop
from adapters.streaming.redrive import redrive
from adapters.streaming.telemetry import configure_logging, logger, serve_metrics
from domain.errors import InvalidCommand

app = group("Scale-out processes.")
SECTION = (100, 'Scale-out')  # the root help's section (adapters.cli.table)
dead_app = group("Poison records the stream workers set aside.")
app.add_typer(dead_app, name="dead-letters")


@app.command()
def relay(once: Annotated[bool, typer.Option(help="publish what is there, then exit")] = False
          ) -> None:
    """Outbox relay: publish the event log to Kafka (LETTERLOG_KAFKA_BOOTSTRAP), resumably."""
    settings = load_settings(data=state.data)
    with make_relay(settings) as r:
        if once:
            n = r.run_once()
            out({"published": n}, f"published {n} events")
        else:
            configure_logging()
            port = serve_metrics("relay", settings.data, settings.metrics_port)
            logger("letterlog.relay").info("relay starting", metrics_port=port)
            r.run(stop_on_signals())


@app.command()
def worker(loglevel: Annotated[str, typer.Option(metavar="LEVEL",
                                                 help="log level")] = "info") -> None:
    """Projector worker: Kafka → the same projectors → HBase (run N of them, one group)."""
    from adapters.cli.worker import main as run  # local: the kafka extra's, this command's alone

    os.umask(0o077)  # a process of its own: whatever it writes in <data> private
    raise typer.Exit(run(load_settings(data=state.data), loglevel=loglevel))


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


# -- lag --------------------------------------------------------------------------------------
@app.command()
def lag(watch: Annotated[bool, typer.Option("--watch", help="again every INTERVAL s, until "
                                                             "Ctrl-C")] = False,
        interval: Annotated[float, typer.Option(metavar="SECONDS", min=0.5,
                                                help="--watch's pause")] = 2.0,
        timeout: Annotated[float, typer.Option(metavar="SECONDS", min=0.5,
                                               help="how long each part may take")] = 5.0,
        ) -> None:
    """How far the read side is behind: log head, relay, consumer lag, projections.

    Exit status: 0 caught up (or no scale-out path configured), 3 behind, 1 unknown (a
    part did not answer in time); with --watch, the last report's."""
    # what a client library logs (aiokafka's "Unable connect to ...") is in the report's
    # problems already: nothing but the report is printed
    logging.getLogger().addHandler(logging.NullHandler())
    settings = load_settings(data=state.data)
    group = settings.stream.group
    status = 0
    try:
        while True:
            report = snapshot(settings, group, bootstrap, timeout=timeout)
            report["rule_events"] = _rule_event_counts(report["problems"])
            status = exit_status(report["verdict"])
            if state.json:
                out(report)
            else:
                typer.echo(f"-- {report['at']}" if watch else "", nl=watch)
                lines = render(report)
                counts = report["rule_events"]
                if counts is not None:  # before the verdict
                    lines.insert(-1, "rule events   " + ", ".join(
                        f"{k} {v}" for k, v in counts.items()))
                for line in lines:
                    typer.echo(line)
            if not watch:
                break
            time.sleep(interval)
    except KeyboardInterrupt:
        pass
    raise typer.Exit(status)


def _rule_event_counts(problems: list[str]) -> dict[str, int] | None:
    """Rule events per status, from the read side (docs/event-rules.md); None, and a problem
    named, when it cannot be read."""
    try:
        counts: dict[str, int] = state.admin_reader().rule_event_counts()
    except Exception as e:  # lag reports what it cannot read, it does not fail on it
        problems.append(f"rule events: {type(e).__name__}: {e}")
        return None
    return counts


# -- processes under supervisord ----------------------------------------------------------------
proc_app = group("The relay, the workers and the purger under supervisord.")
app.add_typer(proc_app, name="processes")


def _proc_line(r: dict[str, Any]) -> str:
    up = "-" if r["uptime"] is None else f"{int(r['uptime'])}s"
    return (f"{r['name']:10} {r['state']:9} pid {r['pid'] or '-':<8} up {up:>7}  "
            f"metrics {r['metrics_port'] or '-':<6} {r['log']}")


def _supervised(fn: Any) -> Any:
    try:
        return fn()
    except SupervisorError as error:
        fail(str(error), 1)


@proc_app.command("start")
def processes_start(
    workers: Annotated[int, typer.Option(metavar="N", min=0, help="stream workers")] = 1,
    purger: Annotated[bool, typer.Option("--purger/--no-purger",
                                         help="run `letterlog purger` too")] = True,
    relay: Annotated[bool, typer.Option("--relay/--no-relay",
                                        help="run the outbox relay (to Kafka)")] = True,
    lmtp: Annotated[str | None, typer.Option(
        metavar="HOST:PORT|unix:PATH", help="run `letterlog lmtp --listen` there too")] = None,
    dispatcher: Annotated[bool, typer.Option(
        "--dispatcher/--no-dispatcher",
        help="run `letterlog dispatcher` too (event rules)")] = False,
    lmtp_socket_mode: Annotated[str | None, typer.Option(
        metavar="MODE", help="the LMTP unix socket's permission bits (lmtp --socket-mode)")
    ] = None,
    imap: Annotated[str | None, typer.Option(
        metavar="HOST:PORT", help="run `letterlog imap --listen` there too")] = None,
    imap_tls: Annotated[str | None, typer.Option(
        metavar="HOST:PORT", help="... and `--listen-tls` there (needs --imap-tls-cert)")] = None,
    imap_tls_cert: Annotated[str | None, typer.Option(
        metavar="FILE", help="the IMAP server's certificate chain (imap --tls-cert)")] = None,
    imap_tls_key: Annotated[str | None, typer.Option(
        metavar="FILE", help="its private key (imap --tls-key)")] = None,
    imap_plaintext_auth: Annotated[bool, typer.Option(
        help="imap --plaintext-auth: LOGIN without TLS")] = False,
) -> None:
    """Start the relay, N workers, the purger (the LMTP server, the IMAP server, the event
    rules' dispatcher) under supervisord (restarted on a crash)."""
    imap_args: list[str] = []
    for option, value in (("--listen", imap), ("--listen-tls", imap_tls),
                          ("--tls-cert", imap_tls_cert), ("--tls-key", imap_tls_key)):
        if value is not None:
            imap_args += [option, value]
    if imap_plaintext_auth:
        imap_args.append("--plaintext-auth")
    if imap_args and imap is None and imap_tls is None:
        raise InvalidCommand("the IMAP server's options need --imap HOST:PORT or "
                             "--imap-tls HOST:PORT")
    for row in _supervised(lambda: start(state.data, workers, purger, relay=relay,
                                         lmtp=lmtp, dispatcher=dispatcher,
                                         lmtp_socket_mode=lmtp_socket_mode,
                                         imap=tuple(imap_args))):
        out(row, _proc_line(row))


@proc_app.command("status")
def processes_status() -> None:
    """Each process: state, pid, uptime, metrics port, log file (exit 3 if one is down)."""
    rows = _supervised(lambda: status(state.data))
    for row in rows:
        out(row, _proc_line(row))
    if not all(r["state"] == "RUNNING" for r in rows):
        raise typer.Exit(3)


@proc_app.command("restart")
def processes_restart(name: Annotated[str, typer.Argument(
        metavar="NAME", help="relay, worker-N, purger, lmtp or imap")]) -> None:
    """Restart one process (SIGTERM, then start it again)."""
    done = _supervised(lambda: restart(state.data, name))
    out(done, f"{name} restarted in {done['seconds']} s (pid {done['pid']})")


@proc_app.command("stop")
def processes_stop() -> None:
    """Stop every process and supervisord (logs stay in DATA/supervisor)."""
    stopped = stop(state.data)
    out({"stopped": stopped}, "stopped" if stopped else "nothing was running")
