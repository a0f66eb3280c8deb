"""``letterlog backup DIR`` and ``letterlog restore-backup DIR`` (``adapters/backup.py``).

``restore`` was taken (it undeletes a message), so putting a backup back is
``restore-backup`` (ADR 0046)."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer

from adapters.backup import backup as make_backup
from adapters.backup import restore
from adapters.bootstrap.payloads import layered_payloads
from adapters.cli.common import group, human_size, out, state
from adapters.cli.progress import bytes_bar
from adapters.config.settings import load_settings
from adapters.embedded import Letterlog

app = group("Backup and restore of an embedded store.")
SECTION = (80, 'Backup')  # the root help's section (adapters.cli.table)


def _progress(label: str) -> Any:
    """A progress bar on stderr (a terminal only), one task per part copied."""
    bar = bytes_bar()
    tasks: dict[str, Any] = {}

    def update(what: str, done: int, total: int) -> None:
        if what not in tasks:
            tasks[what] = bar.add_task(f"{label} {what}", total=total)
        bar.update(tasks[what], completed=done, total=total)

    return bar, update


@app.command()
def backup(directory: Annotated[Path, typer.Argument(
        metavar="DIR", help="a new (or empty) directory for the backup")]) -> None:
    """Copy the store online (deliveries go on) into DIR: SQLite files, payloads, manifest
    (with a PostgreSQL log: the payloads and key files, after PostgreSQL's own backup)."""
    settings = load_settings(data=state.data)
    keys = None
    if settings.event_store == "postgres":
        from adapters.bootstrap import keycluster  # local: psycopg (the postgres extra's)

        keys = keycluster.key_cluster(settings)
    payloads = None
    if settings.payloads_in_hbase():  # copied from HBase's payload table (ADR 0072)

        payloads = layered_payloads(settings)
    bar, update = _progress("backup")
    try:
        with bar:
            manifest = make_backup(settings.data, directory, vault=settings.key_vault,
                                   log=settings.event_store == "sqlite", payloads=payloads,
                                   progress=update,
                                   keks=keys.rows if keys is not None else None)
    finally:
        if keys is not None:
            keys.close()
        if payloads is not None:
            payloads.close()
    log = manifest["log"]
    said = (f"log position {log['position']}, {log['messages']} messages "
            f"({log['purged_messages']} purged)" if log else
            "the log is PostgreSQL's (back it up with its tools, before this)")
    out(manifest, f"backup of {manifest['source']} in {directory}: {said}, "
                  f"{manifest['payloads']['files']} payloads"
                  f"{' (from HBase)' if payloads is not None else ''}, "
                  f"{len(manifest['files'])} files, {human_size(manifest['bytes'])} in "
                  f"{manifest['seconds']:.1f} s")


@app.command("restore-backup")
def restore_backup(
        directory: Annotated[Path, typer.Argument(
            metavar="DIR", help="a directory `letterlog backup` made")],
        force: Annotated[bool, typer.Option(
            "--force", help="replace the store in --data (what it received after the backup "
                            "is lost; its erasures are made again)")] = False,
        reapply_erasures: Annotated[list[Path] | None, typer.Option(
            "--reapply-erasures", metavar="FROM",
            help="also make again the erasures in FROM: a file `letterlog erase export` "
                 "wrote, or a data directory (repeatable)")] = None,
        no_erasure_record: Annotated[bool, typer.Option(
            "--no-erasure-record",
            help="restore although no record of the erasures made after the backup exists "
                 "(not the replaced store, none beside the backup, no --reapply-erasures): "
                 "what they erased comes back")] = False) -> None:
    """Put the backup in DIR in place as the store in --data; erasures made after the backup
    are made again, as recorded in the store being replaced, in the *.erasures.json files
    beside DIR and in --reapply-erasures. With no record at all it refuses (exit 2, nothing
    written) unless --no-erasure-record is given."""
    settings = load_settings(data=state.data)
    checks: dict[str, Any] = {}
    if settings.event_store == "postgres":  # every KEK the log uses: in the copy or the key store
        from adapters.bootstrap import keycluster  # local: psycopg (the postgres extra's)

        checks = {"kek_use": lambda: keycluster.kek_use(settings),
                  "key_cluster_ids": lambda: keycluster.key_cluster_ids(settings)}
    move = None
    if settings.payloads_in_hbase():
        move = _payloads_into_hbase
    bar, update = _progress("restore")
    with bar:
        result = restore(directory, state.data, open_store=Letterlog.open, force=force,
                         reapply_from=reapply_erasures or (), no_record=no_erasure_record,
                         move_payloads=move, progress=update, **checks)
    log = result["log"]
    sources = result["erasures_from"]
    out(result, f"restored {result['restored']} from {result['from']} ("
                + (f"log position {result['position']}, {log['messages']} messages"
                   if log else "payloads and keys; the log is PostgreSQL's") + "); "
                + (f"erasures from {', '.join(sources)}; " if sources else "")
                + "erased again: "
                f"{len(result['messages_erased_again'])} messages, "
                f"{result['keys_destroyed_again']} data keys"
                + ("" if result["erasure_complete"] else
                   " (erasure not yet complete: `letterlog erase status`)"))
    moved = result.get("payloads_moved") or {}
    if moved.get("problem"):  # on stderr, with --json too
        typer.echo(f"letterlog: warning: payloads not yet in HBase: {moved['problem']}",
                   err=True)
    if result["no_erasure_record"] is not None:  # on stderr, with --json too
        typer.echo("letterlog: warning: restored with --no-erasure-record: "
                   f"{result['no_erasure_record']}; whatever was erased after the backup is "
                   "back until `letterlog erase reapply FROM` is run with a record", err=True)


def _payloads_into_hbase(data: Path) -> dict[str, Any]:
    """The restored payload files copied into HBase and removed from ``data`` (ADR 0072)."""
    store = layered_payloads(load_settings(data=data))
    try:
        return asdict(store.migrate(remove=True))
    finally:
        store.close()
