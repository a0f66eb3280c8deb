"""Commands that change a message: flag, label, move, copy, delete, restore, expunge, policy;
each prints the message's resulting state (``delivering``: deliver and extract; ``showing``:
show)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import typer

from adapters.cli.arguments import LimitOption, UntilOption, parse_future, parse_uuid
from adapters.cli.common import (
    FLAGS_HELP,
    MessageId,
    checked_flags,
    fail,
    flags_text,
    group,
    out,
    state,
)
from adapters.cli.showing import shown

if TYPE_CHECKING:
    from adapters.face import Face

app = group("Messages.")
SECTION = (12, 'Messages')  # the root help's section (adapters.cli.table)


def _result(store: Face, change: Any, message_id: str, key: str) -> None:
    """A flag/label/policy command's result: the resulting state, changed or not."""
    info = store.show(parse_uuid(message_id))
    value = info[key]
    show: dict[str, Callable[[Any], str]] = {
        "flags": flags_text, "labels": lambda v: ", ".join(v) or "-"}
    text = show.get(key, lambda v: shown(key, v))(value)
    out({"message_id": message_id, "changed": change.changed, "modseq": change.modseq,
         "position": change.position, key: value},
        f"{message_id}: {key} {text}{'' if change.changed else ' (unchanged)'}")


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
