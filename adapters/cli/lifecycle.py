"""``letterlog purge run``, ``letterlog purger``, ``erase-message``, ``erase-account`` and
``erase complete|status``.

An erasure or purge run that committed but could not truncate a file's write-ahead log in
time (a reader holds it) prints what it did, one line naming the file and the processes
holding it, and exits 3 (``EXIT_INCOMPLETE``): done, not yet complete."""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from adapters.backup import export_erasures, read_erasure_record, reapply
from adapters.bootstrap import scaleout as bootstrap
from adapters.bootstrap.directories import directory
from adapters.cli.arguments import parse_time, parse_uuid
from adapters.cli.common import fail, group, out, state, stop_on_signals
from adapters.cli.progress import progress_bar
from adapters.embedded import Letterlog
from adapters.lifecycle.completed import EXIT_INCOMPLETE, Completion, Holder
from adapters.lifecycle.scaleout import complete
from adapters.lifecycle.scaleout import pending as scale_out_pending
from adapters.lifecycle.scheduled import run_purger
from adapters.lifecycle.scheduleduserpurge import ScheduledUserPurge
from adapters.streaming.lag import snapshot, wait_until_applied
from domain.lifecycle import ALL_QUEUES

if TYPE_CHECKING:
    from adapters.face import Store

app = group("Purge and erasure.")
SECTION = (90, 'Lifecycle')  # the root help's section (adapters.cli.table)
purge_app = group("Run the purge jobs (see docs/lifecycle.md).")
app.add_typer(purge_app, name="purge")
erase_app = group("Finish erasures, and show those not yet finished (see docs/lifecycle.md).")
app.add_typer(erase_app, name="erase")

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
    queues = _check_queues(queue)
    when = parse_time(now, "--now") or datetime.now(UTC)
    if now is not None and not dry_run:
        fail("--now: only with --dry-run (a run purges as of the present: a purge at another "
             "date would erase messages before their time; tests use the retention settings, "
             "e.g. LETTERLOG_DELETED_RETENTION_DAYS=0, or the API's purge(now=...))")
    state.json = state.json or as_json
    with progress_bar(transient=True) as bar:
        task = bar.add_task("purging", total=None)
        done = [0]

        def progress(q: str, n: int) -> None:
            done[0] += n
            bar.update(task, completed=done[0], description=f"purging {q}")

        report = state.admin_reader().purge(when, queues, dry_run=dry_run, progress=progress)
    result = report.as_dict()
    out(result, _summary(result))
    _incomplete(result.get("erasure"))


def _incomplete(completion: dict[str, Any] | None) -> None:
    """Exit 3 with one line if an erasure is not finished (the command itself committed)."""
    if completion is None or completion["complete"]:
        return

    line = Completion(False, [Holder(h["file"], tuple(h["pids"]), tuple(h["processes"]),
                                     h.get("reason", ""))
                              for h in completion["pending"]],
                      seconds=completion["waited_seconds"]).line()
    typer.echo(f"letterlog: {line}", err=True)
    raise typer.Exit(EXIT_INCOMPLETE)


@app.command()
def purger(queue: QueueOption = None,
           interval: Annotated[float | None, typer.Option(
               metavar="SECONDS",
               help="seconds between runs (default LETTERLOG_PURGE_INTERVAL_SECONDS)")] = None,
           ) -> None:
    """Run the purge jobs on a schedule until SIGTERM/SIGINT; one log line per run. A run
    that fails because a server (PostgreSQL, HBase) does not answer is retried with backoff;
    the purger never exits on an outage. The user purge job runs too, every
    LETTERLOG_USER_PURGE_INTERVAL_DAYS (see `letterlog users purge`)."""
    queues = _check_queues(queue)
    stop: threading.Event = stop_on_signals()
    run_purger(state.data, queues, interval, stop,
               open_store=lambda data: Letterlog.open(data, create=False),
               user_purge=ScheduledUserPurge(directory))


def _erased(result: dict[str, Any], what: str) -> None:
    out(result, f"erased {what}: purged {len(result['purged'])} messages "
                f"({result['bytes']} bytes), {len(result['already_purged'])} purged already; "
                f"{result['keys_destroyed']} data keys destroyed")
    copies, elsewhere = result.get("copies_remaining", []), result.get("copies_in_other_accounts")
    if copies or elsewhere:
        said = [f"{len(copies)} other message(s) of this account hold the same content "
                f"({', '.join(copies)}): `--with-copies` erases them"] if copies else []
        if elsewhere:
            said.append("other accounts hold the same content too (not erased)")
        typer.echo(f"letterlog: warning: {'; '.join(said)}", err=True)
    _incomplete(result if "complete" in result else None)
    if result.get("scale_out_pending"):
        typer.echo("letterlog: erasure not yet complete: on scale-out the workers delete the "
                   "rows later; `letterlog erase complete` waits for them, frees the payloads "
                   "and compacts HBase (`letterlog erase status` lists what is pending)",
                   err=True)
        raise typer.Exit(EXIT_INCOMPLETE)


@app.command("erase-message")
def erase_message(message_id: Annotated[str, typer.Argument(
        metavar="MESSAGE_ID", help="the message's id")],
        with_copies: Annotated[bool, typer.Option(
            "--with-copies", help="also erase the account's other messages of the same "
                                  "content (same SHA-256)")] = False) -> None:
    """Purge one message now, whatever the TTLs (right to erasure); exit 3 if a reader kept
    a file from being cleaned in time."""
    _erased(state.admin_reader().erase_message(parse_uuid(message_id), with_copies=with_copies),
            message_id)


@app.command("erase-account")
def erase_account(address: Annotated[str, typer.Argument(
        metavar="ACCOUNT", help="the account's address")]) -> None:
    """Purge every message of an account now, whatever the TTLs (right to erasure)."""
    _erased(state.admin_reader().erase_account(address), address)


@erase_app.command("complete")
def erase_complete() -> None:
    """Finish the erasures still pending (exit 3, naming what holds a file, if one is not)."""
    store = state.admin_reader()
    done = store.complete_erasures()
    result = done.as_dict()
    scale = _complete_scale_out(store)
    if scale is not None:
        result["scale_out"] = scale.as_dict()
    where = " on the SQLite files" if scale is not None else ""
    out(result, (f"erasures complete{where}" + (f" ({done.cleared} pending finished)"
                                                if done.cleared else "")
                 if done.complete else f"erasures not complete{where}")
        + (f"\n{scale.line()}" if scale is not None and scale.complete else ""))
    if scale is not None and not scale.complete:
        typer.echo(f"letterlog: {scale.line()}", err=True)
        raise typer.Exit(EXIT_INCOMPLETE)
    _incomplete(result)


def _complete_scale_out(store: Store) -> Any:
    """On scale-out (LETTERLOG_TABLE_STORE=hbase): waits for the relay and the workers, frees
    the erased payloads, flushes and major-compacts HBase (adapters/lifecycle/scaleout.py),
    with progress lines on stderr. None on an embedded store."""
    if store.settings.table_store != "hbase":
        return None
    def progress(line: str) -> None:
        typer.echo(f"erase complete: {line}", err=True)

    def read_side(target: int, deadline: float) -> str:
        return wait_until_applied(store.settings, store.log, target, parts=bootstrap,
                                  deadline=deadline, progress=progress)

    return complete(store, wait=store.settings.erase_complete_wait_seconds,
                    read_side=read_side, progress=progress)


@erase_app.command("export")
def erase_export(path: Annotated[str, typer.Argument(
        metavar="FILE", help="where to write the record (0600)")]) -> None:
    """Write what this store erased (message and key ids, no content) to FILE, for
    `restore-backup --reapply-erasures FILE`; a FILE named NAME.erasures.json beside the
    backups is found by `restore-backup` unnamed (see docs/operations.md)."""
    record = export_erasures(state.admin_reader(), path)
    out(record.as_dict() | {"file": path},
        f"{path}: {len(record.messages)} erased messages, {len(record.destroyed_keys)} "
        f"destroyed keys, up to log position {record.position}")


@erase_app.command("reapply")
def erase_reapply(source: Annotated[str, typer.Argument(
        metavar="FROM", help="a file `erase export` wrote, or a data directory")]) -> None:
    """Make again the erasures recorded in FROM (after restoring an older copy of the log:
    see docs/operations.md); exit 3 if a reader kept a file from being cleaned in time."""
    result = reapply(state.admin_reader(), read_erasure_record(source, Letterlog.open))
    out(result, f"erased again: {len(result['messages_erased_again'])} messages, "
                f"{result['keys_destroyed_again']} data keys")
    if not result["erasure_complete"]:
        raise typer.Exit(EXIT_INCOMPLETE)


@erase_app.command("status")
def erase_status() -> None:
    """Erasures not yet finished: when, which files, which processes held them (exit 3 if
    any)."""
    store = state.admin_reader()
    store.finish_interrupted_erasures()  # what a killed process left (ADR 0063): finished
    finished = getattr(store, "interrupted_finished", [])  # here or when the store opened
    running = store.running_erasures()
    pending = store.pending_erasures()
    found = _scale_out_status(store)
    scale: dict[str, Any] = found or {"pending": [], "workers": ""}
    if finished and not state.json:
        typer.echo(f"letterlog: finished {len(finished)} erasure(s) or purge run(s) a killed "
                   "process had left", err=True)
    if state.json:
        out({"pending": pending, "running": running, "finished_interrupted": finished,
             **({"scale_out": found} if found is not None else {})})
    elif not pending and not scale["pending"] and not running:
        typer.echo("no erasure pending")
    for r in running if not state.json else []:
        where = f", host {r['host']}" if r.get("host") else ""
        typer.echo(f"position={r['position']}  {r['kind']} running now (another process{where})")
    for r in pending if not state.json else []:
        held = "; ".join(f"{h['file']} (pids {', '.join(map(str, h['pids'])) or 'unknown'})"
                         for h in r["holders"])
        typer.echo(f"{r['since']}  position={r['position']}  messages={r['messages']}  {held}")
    for r in scale["pending"] if not state.json else []:
        typer.echo(f"{r['since']}  position={r['position']}  messages={r['messages']}  "
                   f"payloads={r['payloads']}  scale-out: waits for `letterlog erase complete`"
                   f" (read side: {scale['workers']})")
    if pending or scale["pending"] or running:
        raise typer.Exit(EXIT_INCOMPLETE)


def _scale_out_status(store: Store) -> dict[str, Any] | None:
    """The scale-out erasures not yet completed, and how far the workers are (as ``lag``)."""
    if store.settings.table_store != "hbase":
        return None

    records = scale_out_pending(store)
    workers = "no relay and workers configured (LETTERLOG_KAFKA_BOOTSTRAP)"
    if records and store.settings.kafka_bootstrap:
        report = snapshot(store.settings, store.settings.stream.group, bootstrap)
        workers = report["verdict"]
    return {"pending": records, "workers": workers}
