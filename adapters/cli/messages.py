"""Commands on messages: deliver, extract, show, flag, label, move, copy, delete, restore,
expunge, policy."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from adapters.cli.arguments import parse_future, parse_uuid
from adapters.cli.common import (
    FLAGS_HELP,
    MessageId,
    checked_flags,
    fail,
    flags_text,
    group,
    human_size,
    out,
    state,
)
from domain.errors import MessageRejected

if TYPE_CHECKING:
    from adapters.face import Face

app = group("Messages.")
SECTION = (10, 'Messages')  # the root help's section (adapters.cli.table)

UntilOption = Annotated[str | None, typer.Option(
    "--extract-until", metavar="ISO8601",
    help="extractable until this date-time (with a timezone, in the future)")]
LimitOption = Annotated[int | None, typer.Option(
    "--extract-limit", metavar="N", min=1, help="how many times it may be extracted")]


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
    from adapters.mta.lda import read_message  # local: the MTA's modules, for `deliver -` alone

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


SHOWN = ("message_id", "account", "mailbox", "uid", "uidvalidity", "state", "flags", "labels",
         "size", "internal_date", "policy", "extract_count", "extractions_to_date",
         "last_extracted_at", "thread_id", "sha256", "inline")


def _shown(key: str, value: Any) -> str:
    if value is None:
        return "-"
    if key == "flags":
        return flags_text(value)
    if key == "labels":
        return ", ".join(value) or "-"
    if key == "size":
        return human_size(value)
    if key == "policy":
        return {"indefinite": "indefinite", "count": f"at most {value.get('limit')} extractions",
                "until": f"until {value.get('until')}"}.get(value.get("kind"), str(value))
    return str(value)


@app.command()
def show(message_id: MessageId) -> None:
    """Show a message's state, envelope and structure."""
    info = state.store(create=False, read_models=False).show(parse_uuid(message_id))
    if state.json:
        out(info)
        return
    for k in SHOWN:
        typer.echo(f"{k:14} {_shown(k, info[k])}")
    envelope = info.get("envelope") or {}
    for k in ("from", "to", "cc", "subject", "date", "message_id"):
        v = envelope.get(k)
        if v:
            typer.echo(f"{k if k != 'message_id' else 'message-id':14} "
                       f"{', '.join(v) if isinstance(v, list) else v}")
    if info.get("attachments"):
        typer.echo(f"{'attachments':14} {', '.join(info['attachments'])}")
    smtp = info.get("smtp_envelope") or {}
    if smtp:  # what the MTA said (lda, lmtp)
        typer.echo(f"{'smtp envelope':14} " + "  ".join(
            f"{k}={'<>' if k == 'sender' and not v else v}" for k, v in sorted(smtp.items())))
    facts = info.get("facts") or {}
    typer.echo(f"{'structure':14} {facts.get('content_type')}, {facts.get('part_count')} parts, "
               f"depth {facts.get('depth')}, {facts.get('line_ending')} line endings"
               + (f", defects: {', '.join(facts['defects'])}" if facts.get("defects") else ""))


def _result(store: Face, change: Any, message_id: str, key: str) -> None:
    """A flag/label/policy command's result: the resulting state, changed or not."""
    info = store.show(parse_uuid(message_id))
    value = info[key]
    show: dict[str, Callable[[Any], str]] = {
        "flags": flags_text, "labels": lambda v: ", ".join(v) or "-"}
    shown = show.get(key, lambda v: _shown(key, v))(value)
    out({"message_id": message_id, "changed": change.changed, "modseq": change.modseq,
         "position": change.position, key: value},
        f"{message_id}: {key} {shown}{'' if change.changed else ' (unchanged)'}")


def _change(change: Any, message_id: str, what: str) -> None:
    out({"message_id": message_id, "changed": change.changed, "modseq": change.modseq,
         "position": change.position, **change.extra},
        f"{message_id}: {what}" if change.changed else f"{message_id}: unchanged")


@app.command()
def flag(
    message_id: MessageId,
    flags: Annotated[list[str] | None, typer.Argument(metavar="[FLAG]...",
                                                      help=FLAGS_HELP)] = None,
    remove: Annotated[bool, typer.Option("--remove", help="remove the flags")] = False,
    replace: Annotated[bool, typer.Option(
        "--replace", help="replace all flags with the FLAGs given (none: clear them)")] = False,
    clear: Annotated[bool, typer.Option(
        "--clear", help="remove every flag and keyword (--replace with no FLAG)")] = False,
) -> None:
    """Add (default), remove or replace flags and keywords; prints the resulting flags.
    --replace with no FLAG, or --clear, removes them all."""
    if sum((remove, replace, clear)) > 1:
        fail("--remove, --replace and --clear exclude each other")
    if clear and flags:
        fail("--clear takes no FLAG (to set exactly these flags, use --replace FLAG...)")
    if not flags and not (replace or clear):
        fail("give at least one FLAG (to remove every flag: --clear, or --replace with no "
             "FLAG)")
    mode = "remove" if remove else "replace" if replace or clear else "add"
    store = state.reader()
    change = store.flag(parse_uuid(message_id), checked_flags(flags or []), mode)
    _result(store, change, message_id, "flags")


@app.command()
def label(
    message_id: MessageId,
    add: Annotated[list[str] | None, typer.Option("--add", metavar="LABEL",
                                                  help="label to add (repeatable)")] = None,
    remove: Annotated[list[str] | None, typer.Option("--remove", metavar="LABEL",
                                                     help="label to remove (repeatable)")] = None,
) -> None:
    """Add or remove labels; prints the resulting labels."""
    if not add and not remove:
        fail("give --add LABEL or --remove LABEL")
    store = state.reader()
    _result(store, store.label(parse_uuid(message_id), add or [], remove or []), message_id,
            "labels")


MailboxArg = Annotated[str, typer.Argument(metavar="MAILBOX", help="target mailbox name")]


@app.command()
def move(message_id: MessageId, mailbox: MailboxArg) -> None:
    """Move a message to MAILBOX (it gets a new UID there, also within one mailbox)."""
    _change(state.reader().move(parse_uuid(message_id), mailbox), message_id, f"moved to {mailbox}")


@app.command()
def copy(message_id: MessageId, mailbox: MailboxArg) -> None:
    """Copy a message to MAILBOX (a new message sharing the stored payload)."""
    d = state.reader().copy(parse_uuid(message_id), mailbox)
    out({"message_id": str(d.message_id), "copied_from": message_id, "uid": d.uid,
         "source_uid": d.source_uid, "uidvalidity": d.uidvalidity,
         "mailbox_id": str(d.mailbox_id), "position": d.position},
        f"copied as {d.message_id} (uid {d.source_uid} -> {d.uid})")


@app.command()
def delete(message_id: MessageId) -> None:
    """Soft-delete a message (restorable until purged)."""
    _change(state.reader().delete(parse_uuid(message_id)), message_id, "deleted")


@app.command()
def restore(message_id: MessageId) -> None:
    """Restore a soft-deleted message."""
    _change(state.reader().restore(parse_uuid(message_id)), message_id, "restored")


@app.command()
def expunge(message_ids: Annotated[list[str], typer.Argument(
        metavar="MESSAGE_ID...", help="ids of the messages to expunge")]) -> None:
    """Expunge messages from their mailbox for good."""
    ids = [parse_uuid(m) for m in message_ids]
    c = state.reader().expunge(ids)
    out({"expunged": len(c.positions), "modseq": c.modseq, "position": c.position},
        f"expunged {len(c.positions)}")


@app.command()
def policy(
    message_id: MessageId,
    extract_limit: LimitOption = None,
    extract_until: UntilOption = None,
    indefinite: Annotated[bool, typer.Option("--indefinite",
                                             help="no limit on extractions")] = False,
) -> None:
    """Set a message's extraction policy (an expired message becomes extractable again);
    prints the resulting policy."""
    until = parse_future(extract_until, "--extract-until")
    if indefinite and (extract_limit or until):
        fail("--indefinite excludes --extract-limit and --extract-until")
    if not indefinite and extract_limit is None and until is None:
        fail("give --extract-limit N, --extract-until DATE or --indefinite")
    store = state.reader()
    _result(store, store.set_policy(parse_uuid(message_id), extract_limit, until), message_id,
            "policy")
