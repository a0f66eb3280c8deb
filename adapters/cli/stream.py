"""Scale-out processes: the outbox relay, the stream workers and how far the read side is
behind (``lag``); dead letters: ``deadletters``; under supervisord: ``processes``."""

from __future__ import annotations

import logging
import os
import time
from typing import Annotated

import typer

from adapters.bootstrap import scaleout as bootstrap
from adapters.bootstrap.scaleout import relay as make_relay
from adapters.cli.common import group, out, state, stop_on_signals
from adapters.config.settings import load_settings
from adapters.streaming.lag import exit_status, render, snapshot
from adapters.streaming.telemetry import configure_logging, logger, serve_metrics

app = group("Scale-out processes.")
SECTION = (100, 'Scale-out')  # the root help's section (adapters.cli.table)


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
