"""A message's bytes in and out: deliver (files, or standard input) and extract (the exact
bytes delivered, counted against the message's extraction policy)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from adapters.cli.arguments import LimitOption, UntilOption, parse_future, parse_uuid
from adapters.cli.common import FLAGS_HELP, MessageId, checked_flags, group, human_size, out, state
from adapters.mta.ldastore import read_message
from domain.errors import MessageRejected

app = group("Messages.")
SECTION = (10, 'Messages')  # the root help's section (adapters.cli.table)


@app.command()
def deliver(
    account: Annotated[str, typer.Option(metavar="ADDR", help="recipient address")],
    files: Annotated[list[Path] | None, typer.Argument(
        metavar="FILE", help="RFC 5322 message files; '-' or none: one message from "
                                  "standard input")] = None,
    mailbox: Annotated[str, typer.Option(metavar="NAME", help="target mailbox")] = "INBOX",
    label: Annotated[list[str] | None, typer.Option(metavar="LABEL",
                                                    help="label (repeatable)")] = None,
    flag: Annotated[list[str] | None, typer.Option(metavar="FLAG",
                                                   help=FLAGS_HELP + " (repeatable)")] = None,
    extract_limit: LimitOption = None,
    extract_until: UntilOption = None,
    idempotency_key: Annotated[str | None, typer.Option(
        metavar="KEY", help="a retry with the same KEY stores nothing and prints the first "
                            "delivery (with several FILEs, the Nth file uses KEY#N)")] = None,
) -> None:
    """Deliver each FILE to ACCOUNT's MAILBOX (the account and INBOX appear on first use).

    Each good file is delivered; each bad one is reported on stderr (one line naming the
    file) and the exit status is 1. Files are read one at a time. A message on standard
    input is read from file descriptor 0 itself (for an MTA, use 'letterlog lda')."""
    fields: dict[str, Any] = {
        "account": account, "mailbox": mailbox, "labels": label or [],
        "flags": checked_flags(flag or []), "extract_limit": extract_limit,
        "extract_until": parse_future(extract_until, "--extract-until"),
    }
    store = state.store()
    store.check_delivery(**fields)  # what would fail for every file fails once, before any
    failed = 0
    files = files or [Path("-")]
    for n, f in enumerate(files, start=1):
        key = idempotency_key if idempotency_key is None or len(files) == 1 else (
            f"{idempotency_key}#{n}")
        try:
            raw = _read_stdin() if str(f) == "-" else f.read_bytes()
        except OSError as e:
            failed += 1
            typer.echo(f"letterlog: error: {f}: cannot read: {e.strerror or e}", err=True)
            continue
        try:
            d = store.deliver(raw=raw, idempotency_key=key, **fields)
        except MessageRejected as e:
            failed += 1
            typer.echo(f"letterlog: error: {f}: {e}", err=True)
            continue
        finally:
            del raw
        out({"file": str(f), "message_id": str(d.message_id), "mailbox_id": str(d.mailbox_id),
             "uid": d.uid, "uidvalidity": d.uidvalidity, "size": d.size, "sha256": d.sha256,
             "duplicate": d.duplicate, "position": d.position},
            f"{f}: {'already delivered' if d.duplicate else 'delivered'} as {d.message_id} "
            f"(uid {d.uid}, {human_size(d.size)})")
    if failed:
        raise typer.Exit(1)


def _read_stdin() -> bytes:
    """All of file descriptor 0, read directly (reopening /dev/stdin fails when the pipe
    belongs to another user, as an MTA's does); the store checks the size."""
    return read_message(0, sys.maxsize)


@app.command()
def extract(
    message_id: MessageId,
    output: Annotated[Path | None, typer.Option("-o", "--output", metavar="FILE",
                                                help="write to FILE instead of stdout")] = None,
    force: Annotated[bool, typer.Option("--force", help="replace an existing FILE")] = False,
) -> None:
    """Write the exact delivered bytes. The extraction counts against the policy only once
    they are written; a failed one does not count."""
    mid = parse_uuid(message_id)
    store = state.reader()
    if output is None:
        store.extract_to_stream(mid, sys.stdout.buffer)
        return
    report = store.extract_to(mid, output, force=force)
    out(report, f"{output}: {human_size(report['size'])} written "
                f"(extractions to date: {report['extractions_to_date']})")
