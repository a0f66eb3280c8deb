"""Commands that read the read models: list, search, labelled, thread, counters, du,
status, subscriptions, purge-queue, body. None of them creates a data directory or an
account: a directory holding no store and an unknown account are errors."""

from __future__ import annotations

import sys
from datetime import datetime
from typing import Annotated, Any

import typer

from adapters.cli.arguments import (
    AS_OF_HELP,
    parse_as_of,
    parse_day,
    parse_size,
    parse_time,
    parse_uuid,
)
from adapters.cli.common import (
    FLAGS_HELP,
    MessageId,
    cell,
    checked_flags,
    flags_text,
    group,
    human_size,
    out,
    quota_text,
    state,
)
from adapters.files.datadir import disk_use
from adapters.startup.current import CurrentTables, open_current

app = group("Reading the read models.")
SECTION = (30, 'Reading')  # the root help's section (adapters.cli.table)

Account = Annotated[str, typer.Argument(metavar="ACCOUNT", help="the account's address")]
MailboxOption = Annotated[str, typer.Option(metavar="NAME", help="mailbox name")]
Limit = Annotated[int, typer.Option(metavar="N", min=1, max=10_000,
                                    help="at most N messages (a page)")]
BeforeUid = Annotated[int | None, typer.Option(
    metavar="UID", help="next page: messages with a UID below this (the last one shown)")]
AsOf = Annotated[str | None, typer.Option(
    "--as-of", metavar="P|DATE", help=AS_OF_HELP + "; this account's events folded "
                                                   "in-process")]
ViewOption = Annotated[str | None, typer.Option(
    "--view", metavar="NAME", help="read a view built by rebuild --until-position/--as-of")]
COLUMNS = ((">", 6, "UID"), ("<", 16, "DATE"), ("<", 26, "FROM"), ("<", 44, "SUBJECT"),
           ("<", 24, "FLAGS"), ("<", 36, "MESSAGE ID"))
"""A listing's columns (align, width, header); LABELS, of any width, come last. The message
id is what every message command (show, flag, move, extract, ...) takes."""


def _local(iso: str) -> str:
    try:
        return datetime.fromisoformat(iso).astimezone().strftime("%Y-%m-%d %H:%M")
    except ValueError:
        return iso[:16]


def _zone() -> str:
    return datetime.now().astimezone().strftime("%Z") or "local"


def _line(values: list[str]) -> str:
    parts = [cell(v, w).rstrip().rjust(w) if align == ">" else cell(v, w)
             for (align, w, _), v in zip(COLUMNS, values, strict=False)]
    return "  ".join([*parts, *values[len(COLUMNS):]]).rstrip()


def _rows(rows: list[Any], page: int | None = None) -> None:
    """A listing: a header row (dates in the local time zone), one line per message, long
    senders and subjects cut with ``…``; ``--json``: one object per message."""
    if state.json:
        for m in rows:
            out(m.as_dict())
        return
    header = [c[2] for c in COLUMNS] + ["LABELS"]
    header[1] = f"DATE ({_zone()})"
    typer.echo(_line(header))
    for m in rows:
        typer.echo(_line([str(m.uid), _local(m.internal_date), m.sender or "", m.subject or "",
                          flags_text(m.flags) if m.flags else "", str(m.message_id),
                          ", ".join(m.labels)]))
    if page is not None and len(rows) == page and rows:
        typer.echo(f"(more: --before-uid {rows[-1].uid})", err=True)


@app.command("list")
def list_messages(account: Account, mailbox: MailboxOption = "INBOX", limit: Limit = 50,
                  before_uid: BeforeUid = None, as_of: AsOf = None,
                  view: ViewOption = None) -> None:
    """A mailbox's messages, newest first."""
    _rows(_past(account, as_of, view).messages(account, mailbox, limit=limit,
                                                before_uid=before_uid), limit)


def _past(account: str, as_of: str | None, view: str | None) -> Any:
    when = parse_as_of(as_of)
    if when is None and view is None:
        return state.read_models(open_current)
    store = state.reader()
    if isinstance(when, datetime):  # the log's times: the administrator's (refused to --as)
        when = state.admin_reader().position_at(when)
    return store.reading(view=view, as_of=when, account=account)


@app.command()
def search(
    account: Account,
    mailbox: MailboxOption = "INBOX",
    sender: Annotated[str | None, typer.Option(
        "--from", metavar="TEXT", help="the From header contains TEXT (any case)")] = None,
    subject: Annotated[str | None, typer.Option(
        metavar="TEXT", help="the subject contains TEXT (any case)")] = None,
    flag: Annotated[list[str] | None, typer.Option(
        metavar="FLAG", help="has FLAG (repeatable): " + FLAGS_HELP)] = None,
    unflag: Annotated[list[str] | None, typer.Option(
        metavar="FLAG", help="does not have FLAG (repeatable)")] = None,
    label: Annotated[list[str] | None, typer.Option(
        metavar="LABEL", help="has LABEL (repeatable)")] = None,
    since: Annotated[str | None, typer.Option(
        metavar="DATE", help="internal date on or after DATE (2026-03-01: midnight UTC, or "
                             "an ISO 8601 date-time with a timezone)")] = None,
    before: Annotated[str | None, typer.Option(
        metavar="DATE", help="internal date before DATE")] = None,
    larger: Annotated[str | None, typer.Option(
        metavar="SIZE", help="more than SIZE bytes (1500, 10k, 2M)")] = None,
    smaller: Annotated[str | None, typer.Option(
        metavar="SIZE", help="fewer than SIZE bytes")] = None,
    limit: Limit = 50,
    before_uid: BeforeUid = None,
) -> None:
    """Messages of a mailbox matching every key given (IMAP SEARCH), newest first."""
    found = state.read_models(open_current).search(
        account, mailbox, limit=limit, before_uid=before_uid, sender=sender, subject=subject,
        flags=checked_flags(flag or []), unflags=checked_flags(unflag or []),
        labels=label or [], since=parse_day(since, "--since"),
        before=parse_day(before, "--before"), larger=parse_size(larger, "--larger"),
        smaller=parse_size(smaller, "--smaller"))
    _rows(found, limit)


@app.command()
def labelled(account: Account,
             label: Annotated[str, typer.Argument(metavar="LABEL", help="the label")],
             limit: Limit = 50) -> None:
    """A label's messages across the account's mailboxes, newest first."""
    _rows(state.read_models(open_current).label_messages(account, label, limit=limit))


@app.command()
def thread(message_id: MessageId) -> None:
    """The conversation a message belongs to (newest first)."""
    store = state.reader()
    info = store.show(parse_uuid(message_id))
    _rows(store.thread(parse_uuid(info["thread_id"], "thread id")))


@app.command()
def counters(account: Account, as_of: AsOf = None, view: ViewOption = None) -> None:
    """Messages, unread and bytes per mailbox and per label."""
    c = _past(account, as_of, view).counters(account)
    quota = _quota(account) if as_of is None and view is None else None
    if state.json:
        out({**c, "quota": quota} if quota is not None else c)
        return
    for kind, singular in (("mailboxes", "mailbox"), ("labels", "label")):
        for name, v in sorted(c[kind].items()):
            typer.echo(f"{singular:8} {cell(name, 24)} messages={v['messages']} "
                       f"unread={v['unread']} size={human_size(v['bytes'])}")
    if quota is not None:
        typer.echo(quota_text(quota))


def _quota(account: str) -> dict[str, Any] | None:
    """The account's quota beside its usage, as the read models show them (so ``counters``
    and ``du`` stay on the fast read path); None for a user (``--as``): quotas are the
    administrator's. ``letterlog quota get`` gives the command side's, exact to the log's
    head."""
    if state.user is not None:
        return None
    return dict(state.read_models(open_current).quota_shown(account))


@app.command()
def du(account: Annotated[str | None, typer.Argument(
        metavar="[ACCOUNT]", help="the account's address; without it, the whole data "
                                  "directory's disk use")] = None) -> None:
    """Disk usage per mailbox: messages, bytes delivered, bytes stored (a payload shared by
    copies and duplicates is stored once; soft-deleted messages count until purged).
    Without ACCOUNT: the data directory's bytes on disk per part, against the mail it
    holds."""
    if account is None:
        _store_du()
        return
    u = state.read_models(open_current).usage(account)
    quota = _quota(account)
    if state.json:
        out({**u, "quota": quota} if quota is not None else u)
        return
    typer.echo(f"{'MAILBOX':24}  {'MESSAGES':>8}  {'DELETED':>7}  {'DELIVERED':>10}  "
               f"{'STORED':>10}")
    for name, r in [*u["mailboxes"].items(), ("(total)", u["total"])]:
        typer.echo(f"{cell(name, 24)}  {r['messages']:>8}  {r['deleted']:>7}  "
                   f"{human_size(r['delivered']):>10}  {human_size(r['stored']):>10}")
    if quota is not None:
        typer.echo(quota_text(quota))


def _store_du() -> None:
    """``du`` without an account: what the data directory takes on disk (allocated blocks,
    as ``du`` counts them), per part, beside every account's listed mail."""
    # weighed before this command opens anything: an SQLite file it opens gets a -shm file
    # (32 KiB) that lives as long as this process, and is nobody's data
    use = disk_use(state.data)
    models = state.read_models(open_current)
    if not isinstance(models, CurrentTables):  # every account's: the administrator's
        models = state.admin_reader()
    mail = models.listed_mail()
    settings = getattr(models, "settings", None)  # None: the fast path, all embedded
    elsewhere = [] if settings is None else [
        part for part, here in (("events (PostgreSQL)", settings.event_store == "sqlite"),
                                ("read models (HBase)", settings.table_store == "embedded"))
        if not here]
    per_byte = round(use["total"] / mail["bytes"], 3) if mail["bytes"] else None
    if state.json:
        out({"data": str(state.data), "on_disk": use, "listed_messages": mail["messages"],
             "listed_bytes": mail["bytes"], "on_disk_per_byte_of_mail": per_byte,
             "not_in_data_directory": elsewhere})
        return
    typer.echo(f"{'PART':14}  {'ON DISK':>10}")
    for part, size in use.items():
        typer.echo(f"{'(total)' if part == 'total' else part.replace('_', ' '):14}  "
                   f"{human_size(size):>10}")
    count = mail["messages"]
    typer.echo(f"mail listed: {count} message{'' if count == 1 else 's'}, "
               f"{human_size(mail['bytes'])}; "
               f"on disk per byte of mail: {'-' if per_byte is None else f'{per_byte:.3f}'}")
    if elsewhere:
        typer.echo(f"not in {state.data} (not counted): {', '.join(elsewhere)}")


@app.command()
def status(account: Account,
           mailbox: Annotated[str, typer.Argument(metavar="MAILBOX",
                                                  help="mailbox name")] = "INBOX",
           as_of: AsOf = None, view: ViewOption = None) -> None:
    """IMAP STATUS of a mailbox: uidvalidity, uidnext, highest modseq, counts, and the log
    position the read model reflects."""
    st = _past(account, as_of, view).mailbox_status(account, mailbox)
    if state.json:
        out(st)
        return
    for k, v in st.items():
        typer.echo(f"{k:14} {human_size(v) if k == 'bytes' else v}")


@app.command()
def subscriptions(account: Account) -> None:
    """The mailbox names ACCOUNT is subscribed to."""
    names = state.read_models(open_current).subscriptions(account)
    if state.json:
        out({"account": account, "subscriptions": names})
    else:
        for name in names:
            typer.echo(name)


@app.command("purge-queue")
def purge_queue(due: Annotated[str | None, typer.Option(
                    metavar="ISO8601", help="entries due by this date-time (default now)")
                ] = None,
                limit: Annotated[int, typer.Option(metavar="N", min=1,
                                                   help="at most N entries")] = 1000) -> None:
    """Purge queue entries due by DUE (deleted, expired, expiring, incomplete)."""
    for e in state.admin_reader().purge_due(parse_time(due, "--due"), limit=limit):
        out(e.as_dict(), f"{e.queue:10} shard={e.shard:<2} due={e.due}  {e.message_id}  {e.reason}")


@app.command()
def body(account: Account,
         mailbox: Annotated[str, typer.Argument(metavar="MAILBOX", help="mailbox name")],
         uid: Annotated[int, typer.Argument(metavar="UID", help="the message's UID")]) -> None:
    """Stream a message's bytes from the read model (not counted as an extraction)."""
    for chunk in state.reader().body(account, mailbox, uid):
        sys.stdout.buffer.write(chunk)
    sys.stdout.buffer.flush()
