"""``letterlog purge run``, ``letterlog purger``, ``erase-message`` and ``erase-account``."""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime
from typing import Annotated, Any

import typer

from adapters.cli.common import (
    fail,
    group,
    out,
    parse_time,
    parse_uuid,
    progress_enabled,
    state,
)

app = group("Purge and erasure.")
purge_app = group("Run the purge jobs (see docs/lifecycle.md).")
app.add_typer(purge_app, name="purge")

QueueOption = Annotated[list[str] | None, typer.Option(
    "--queue", metavar="QUEUE",
    help="a queue: expiring, expired, deleted, incomplete, payloads (repeatable; default all)")]

log = logging.getLogger("letterlog.purger")


def _summary(report: dict[str, Any]) -> str:
    lines = [f"{q['queue']:10} scanned={q['scanned']:<7} purged={q['purged']:<7} "
             f"expired={q['expired']:<6} kept={q['kept']:<7} payloads_freed={q['payloads_freed']}"
             for q in report["queues"]]
    lines.append(f"{'dry run: ' if report['dry_run'] else ''}purged {report['purged']} "
                 f"messages ({report['message_bytes']} bytes), expired {report['expired']}, "
                 f"kept {report['kept']} by the double check; freed {report['payloads_freed']} "
                 f"payloads ({report['payload_bytes_freed']} bytes)")
    return "\n".join(lines)


def _check_queues(queues: list[str] | None) -> list[str] | None:
    from domain.lifecycle import ALL_QUEUES

    for q in queues or []:
        if q not in ALL_QUEUES:
            fail(f"--queue: {q!r} is not one of {', '.join(ALL_QUEUES)}")
    return queues


@purge_app.command("run")
def purge_run(queue: QueueOption = None,
              now: Annotated[str | None, typer.Option(
                  metavar="ISO8601",
                  help="with --dry-run: what a run at this date-time would purge")] = None,
              dry_run: Annotated[bool, typer.Option(help="decide, change nothing")] = False,
              as_json: Annotated[bool, typer.Option("--json", help="JSON summary")] = False,
              ) -> None:
    """Run every due purge job once (or those of --queue), with a summary."""
    from rich.console import Console
    from rich.progress import Progress

    queues = _check_queues(queue)
    when = parse_time(now, "--now") or datetime.now(UTC)
    if now is not None and not dry_run:
        fail("--now: only with --dry-run (a run purges as of the present: a purge at another "
             "date would erase messages before their time; tests use the retention settings, "
             "e.g. LETTERLOG_DELETED_RETENTION_DAYS=0, or the API's purge(now=...))")
    state.json = state.json or as_json
    with Progress(console=Console(stderr=True), disable=not progress_enabled(),
                  transient=True) as bar:
        task = bar.add_task("purging", total=None)
        done = [0]

        def progress(q: str, n: int) -> None:
            done[0] += n
            bar.update(task, completed=done[0], description=f"purging {q}")

        report = state.reader().purge(when, queues, dry_run=dry_run, progress=progress)
    result = report.as_dict()
    out(result, _summary(result))


@app.command()
def purger(queue: QueueOption = None,
           interval: Annotated[float | None, typer.Option(
               metavar="SECONDS",
               help="seconds between runs (default LETTERLOG_PURGE_INTERVAL_SECONDS)")] = None,
           ) -> None:
    """Run the purge jobs on a schedule until SIGTERM/SIGINT; one log line per run."""
    from adapters.cli.stream import _stop_on_signals

    queues = _check_queues(queue)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    stop: threading.Event = _stop_on_signals()
    store = state.reader()
    period = interval if interval is not None else store.settings.purge_interval_seconds
    while not stop.is_set():
        report = store.purge(datetime.now(UTC), queues).as_dict()
        log.info("purge run: purged=%d expired=%d kept=%d payloads_freed=%d "
                 "payload_bytes_freed=%d", report["purged"], report["expired"], report["kept"],
                 report["payloads_freed"], report["payload_bytes_freed"])
        stop.wait(period)
    store.close()
    log.info("purger stopped")


def _erased(result: dict[str, Any], what: str) -> None:
    out(result, f"erased {what}: purged {len(result['purged'])} messages "
                f"({result['bytes']} bytes), {len(result['already_purged'])} purged already; "
                f"{result['keys_destroyed']} data keys destroyed")


@app.command("erase-message")
def erase_message(message_id: Annotated[str, typer.Argument(
        metavar="MESSAGE_ID", help="the message's id")]) -> None:
    """Purge one message now, whatever the TTLs (right to erasure)."""
    _erased(state.reader().erase_message(parse_uuid(message_id)), message_id)


@app.command("erase-account")
def erase_account(address: Annotated[str, typer.Argument(
        metavar="ACCOUNT", help="the account's address")]) -> None:
    """Purge every message of an account now, whatever the TTLs (right to erasure)."""
    _erased(state.reader().erase_account(address), address)
