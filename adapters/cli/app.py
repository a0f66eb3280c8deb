"""The ``letterlog`` command line, over the embedded API.

Global options: ``--data DIR`` (default ``$LETTERLOG_DATA``, else ``./letterlog-data``) and
``--json`` (one JSON object per line on stdout). Bad input exits non-zero with one clear
line on stderr and writes nothing.
"""

from __future__ import annotations

import json
import os
import re
import sys
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, NoReturn
from uuid import UUID

import typer
from rich.cells import set_cell_size

from domain.errors import InvalidCommand, LetterlogError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="letterlog: an event-sourced mailbox store.")
ROLES_HELP = "inbox|sent|drafts|trash|junk|archive"
BenchJson = Annotated[bool, typer.Option("--json", help="one JSON line (always JSON)")]
PlotOption = Annotated[Path | None, typer.Option(help="write a PNG plot")]
mailbox_app = typer.Typer(no_args_is_help=True, help="Create, rename, delete and list mailboxes.")
import_app = typer.Typer(no_args_is_help=True, help="Import mbox files or Maildir folders.")
bench_app = typer.Typer(no_args_is_help=True, help="Benchmarks (JSON, baseline in the same run).")
app.add_typer(mailbox_app, name="mailbox")
app.add_typer(import_app, name="import")
app.add_typer(bench_app, name="bench")


class State:
    data: Path = Path("letterlog-data")
    json: bool = False
    _store: Any = None

    def store(self) -> Any:
        if self._store is None:
            from adapters.embedded import Letterlog

            self._store = Letterlog.open(self.data)
        return self._store


state = State()


def fail(message: str, code: int = 2) -> NoReturn:
    typer.echo(f"letterlog: error: {message}", err=True)
    raise typer.Exit(code)


def out(obj: dict[str, Any], text: str | None = None) -> None:
    if state.json:
        sys.stdout.write(json.dumps(obj, default=str, sort_keys=True) + "\n")
    else:
        typer.echo(text if text is not None else "  ".join(f"{k}={v}" for k, v in obj.items()))


def parse_uuid(value: str, what: str = "MESSAGE_ID") -> UUID:
    try:
        return UUID(value)
    except ValueError:
        fail(f"{what}: {value!r} is not a message id (a UUID)")


def parse_time(value: str | None, what: str) -> datetime | None:
    if value is None:
        return None
    try:
        t = datetime.fromisoformat(value)
    except ValueError:
        fail(f"{what}: {value!r} is not an ISO 8601 date-time")
    if t.tzinfo is None:
        fail(f"{what}: {value!r} needs a timezone (e.g. +00:00)")
    return t


@app.callback()
def main_options(
    data: Annotated[Path | None, typer.Option("--data", help="data directory",
                                              envvar="LETTERLOG_DATA")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="JSON lines on stdout")] = False,
) -> None:
    state.data = data or Path("letterlog-data")
    state.json = as_json
    os.environ["LETTERLOG_DATA"] = str(state.data)


# -- delivery and extraction ---------------------------------------------------------------
@app.command()
def deliver(
    files: Annotated[list[Path], typer.Argument(help="RFC 5322 message files")],
    account: Annotated[str, typer.Option(help="recipient address")],
    mailbox: Annotated[str, typer.Option(help="target mailbox")] = "INBOX",
    label: Annotated[list[str] | None, typer.Option(help="label (repeatable)")] = None,
    flag: Annotated[list[str] | None, typer.Option(help="flag (repeatable)")] = None,
    extract_limit: Annotated[int | None, typer.Option(help="allowed extractions")] = None,
    extract_until: Annotated[str | None, typer.Option(help="ISO 8601 date-time")] = None,
) -> None:
    """Deliver each FILE to ACCOUNT's MAILBOX (the account and INBOX appear on first use)."""
    until = parse_time(extract_until, "--extract-until")
    blobs = []
    for f in files:
        try:
            blobs.append((f, f.read_bytes()))
        except OSError as e:
            fail(f"{f}: cannot read: {e.strerror or e}")
    store = state.store()
    # Validate every file before writing any, so bad input writes nothing.
    from domain.commands import Deliver, build
    from domain.rfc5322 import inspect_message

    cmds = []
    for f, raw in blobs:
        try:
            cmd = build(Deliver, account=account, mailbox=mailbox, raw=raw, labels=label or [],
                        flags=flag or [], extract_limit=extract_limit, extract_until=until)
            inspect_message(raw, store.mail.limits)
        except LetterlogError as e:
            fail(f"{f}: {e}")
        cmds.append(cmd)
    for (f, _), cmd in zip(blobs, cmds, strict=True):
        d = store.mail.deliver_many([cmd])[0]
        out({"file": str(f), "message_id": str(d.message_id), "mailbox_id": str(d.mailbox_id),
             "uid": d.uid, "uidvalidity": d.uidvalidity, "size": d.size, "sha256": d.sha256},
            f"{f}: delivered as {d.message_id} (uid {d.uid}, {d.size} bytes)")


@app.command()
def extract(
    message_id: str,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="write to FILE")] = None,
) -> None:
    """Write the exact delivered bytes (counts against the extraction policy)."""
    mid = parse_uuid(message_id)
    chunks = state.store().extract_stream(mid)
    if output is None:
        for c in chunks:
            sys.stdout.buffer.write(c)
        sys.stdout.buffer.flush()
        return
    tmp = output.with_name(output.name + ".part")
    size = 0
    with open(tmp, "wb") as fh:
        for c in chunks:
            fh.write(c)
            size += len(c)
    tmp.replace(output)
    if state.json:
        out({"message_id": message_id, "file": str(output), "size": size})


@app.command()
def show(message_id: str) -> None:
    """Show a message's state, envelope and structure."""
    info = state.store().show(parse_uuid(message_id))
    if state.json:
        out(info)
    else:
        for k, v in info.items():
            typer.echo(f"{k:14} {v}")


def _change(change: Any, message_id: str, what: str) -> None:
    out({"message_id": message_id, "changed": change.changed, "modseq": change.modseq,
         **change.extra},
        f"{message_id}: {what}" if change.changed else f"{message_id}: unchanged")


@app.command()
def flag(
    message_id: str,
    flags: Annotated[list[str], typer.Argument(help="flags and keywords, e.g. '\\Seen'")],
    remove: Annotated[bool, typer.Option("--remove", help="remove the flags")] = False,
    replace: Annotated[bool, typer.Option("--replace", help="replace all flags")] = False,
) -> None:
    """Add (default), remove or replace flags and keywords."""
    if remove and replace:
        fail("--remove and --replace exclude each other")
    mode = "remove" if remove else "replace" if replace else "add"
    _change(state.store().flag(parse_uuid(message_id), flags, mode), message_id, "flags changed")


@app.command()
def label(
    message_id: str,
    add: Annotated[list[str] | None, typer.Option("--add", help="label to add")] = None,
    remove: Annotated[list[str] | None, typer.Option("--remove", help="label to remove")] = None,
) -> None:
    """Add or remove labels."""
    if not add and not remove:
        fail("give --add LABEL or --remove LABEL")
    _change(state.store().label(parse_uuid(message_id), add or [], remove or []), message_id,
            "labels changed")


@app.command()
def move(message_id: str, mailbox: str) -> None:
    """Move a message to MAILBOX (it gets a new UID there)."""
    _change(state.store().move(parse_uuid(message_id), mailbox), message_id, f"moved to {mailbox}")


@app.command()
def copy(message_id: str, mailbox: str) -> None:
    """Copy a message to MAILBOX (a new message sharing the stored payload)."""
    d = state.store().copy(parse_uuid(message_id), mailbox)
    out({"message_id": str(d.message_id), "copied_from": message_id, "uid": d.uid,
         "mailbox_id": str(d.mailbox_id)}, f"copied as {d.message_id} (uid {d.uid})")


@app.command()
def delete(message_id: str) -> None:
    """Soft-delete a message (restorable until purged)."""
    _change(state.store().delete(parse_uuid(message_id)), message_id, "deleted")


@app.command()
def restore(message_id: str) -> None:
    """Restore a soft-deleted message."""
    _change(state.store().restore(parse_uuid(message_id)), message_id, "restored")


@app.command()
def expunge(message_ids: list[str]) -> None:
    """Expunge messages from their mailbox for good."""
    ids = [parse_uuid(m) for m in message_ids]
    c = state.store().expunge(ids)
    out({"expunged": len(c.positions), "modseq": c.modseq}, f"expunged {len(c.positions)}")


@app.command()
def policy(
    message_id: str,
    extract_limit: Annotated[int | None, typer.Option(help="allowed extractions")] = None,
    extract_until: Annotated[str | None, typer.Option(help="ISO 8601 date-time")] = None,
    indefinite: Annotated[bool, typer.Option(help="no limit")] = False,
) -> None:
    """Set a message's extraction policy (an expired message becomes extractable again)."""
    until = parse_time(extract_until, "--extract-until")
    if indefinite and (extract_limit or until):
        fail("--indefinite excludes --extract-limit and --extract-until")
    if not indefinite and extract_limit is None and until is None:
        fail("give --extract-limit N, --extract-until DATE or --indefinite")
    _change(state.store().set_policy(parse_uuid(message_id), extract_limit, until),
            message_id, "policy changed")


# -- mailboxes and subscriptions -------------------------------------------------------------
@mailbox_app.command("create")
def mailbox_create(account: str, name: str,
                   role: Annotated[str, typer.Option(help=ROLES_HELP)] = "") -> None:
    """Create mailbox NAME for ACCOUNT."""
    try:
        from domain.values import Role

        Role(role)
    except ValueError:
        fail(f"--role: {role!r} is not one of inbox, sent, drafts, trash, junk, archive")
    c = state.store().create_mailbox(account, name, role)
    out({"account": account, "mailbox": name, **c.extra}, f"created {name}")


@mailbox_app.command("rename")
def mailbox_rename(account: str, name: str, new_name: str) -> None:
    """Rename a mailbox (it gets a new UIDVALIDITY)."""
    c = state.store().rename_mailbox(account, name, new_name)
    out({"account": account, "mailbox": new_name, **c.extra}, f"renamed {name} to {new_name}")


@mailbox_app.command("delete")
def mailbox_delete(account: str, name: str) -> None:
    """Delete a mailbox and expunge its messages."""
    c = state.store().delete_mailbox(account, name)
    out({"account": account, "mailbox": name, **c.extra}, f"deleted {name}")


@mailbox_app.command("list")
def mailbox_list(account: str) -> None:
    """List an account's mailboxes."""
    for mb in state.store().mailbox_list(account):
        out(mb, f"{mb['name']:20} role={mb['role'] or '-':8} uidvalidity={mb['uidvalidity']} "
                f"uidnext={mb['uidnext']}{'  (subscribed)' if mb['subscribed'] else ''}")


@app.command()
def subscribe(account: str, mailbox: str) -> None:
    """Subscribe ACCOUNT to MAILBOX (by name)."""
    c = state.store().subscribe(account, mailbox)
    out({"account": account, "mailbox": mailbox, "changed": c.changed}, f"subscribed {mailbox}")


@app.command()
def unsubscribe(account: str, mailbox: str) -> None:
    """Unsubscribe ACCOUNT from MAILBOX."""
    c = state.store().unsubscribe(account, mailbox)
    out({"account": account, "mailbox": mailbox, "changed": c.changed}, f"unsubscribed {mailbox}")


# -- queries (read models) ---------------------------------------------------------------------
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _cell(text: str | None, width: int) -> str:
    """``text`` in exactly ``width`` terminal columns (wide characters count twice), its
    control characters shown as U+FFFD: a sender or subject is whatever the message's
    author wrote, terminal escape sequences included."""
    return set_cell_size(_CONTROL.sub("\ufffd", text or ""), width)


def _rows(rows: list[Any]) -> None:
    for m in rows:
        d = m.as_dict()
        out(d, f"{d['uid']:>6}  {d['internal_date'][:16]}  {_cell(d['sender'], 26)}  "
               f"{_cell(d['subject'], 44)}  {' '.join(d['flags'])}")


@app.command("list")
def list_messages(
    account: str,
    mailbox: Annotated[str, typer.Option(help="mailbox name")] = "INBOX",
    limit: Annotated[int, typer.Option(min=1, max=10_000)] = 50,
    before_uid: Annotated[int | None, typer.Option(help="page: UIDs below this")] = None,
) -> None:
    """A mailbox's messages, newest first."""
    _rows(state.store().messages(account, mailbox, limit=limit, before_uid=before_uid))


@app.command("labelled")
def labelled(account: str, label: str,
             limit: Annotated[int, typer.Option(min=1, max=10_000)] = 50) -> None:
    """A label's messages across the account's mailboxes, newest first."""
    _rows(state.store().label_messages(account, label, limit=limit))


@app.command()
def thread(message_id: str) -> None:
    """The conversation a message belongs to (newest first)."""
    store = state.store()
    info = store.show(parse_uuid(message_id))
    _rows(store.thread(UUID(info["thread_id"])))


@app.command()
def counters(account: str) -> None:
    """Messages, unread and bytes per mailbox and per label."""
    c = state.store().counters(account)
    if state.json:
        out(c)
        return
    for kind, singular in (("mailboxes", "mailbox"), ("labels", "label")):
        for name, v in sorted(c[kind].items()):
            typer.echo(f"{singular:8} {name:24} messages={v['messages']} unread={v['unread']} "
                       f"bytes={v['bytes']}")


@app.command()
def status(account: str, mailbox: Annotated[str, typer.Argument()] = "INBOX") -> None:
    """IMAP STATUS of a mailbox: uidvalidity, uidnext, highest modseq, counts."""
    st = state.store().mailbox_status(account, mailbox)
    out(st)


@app.command()
def subscriptions(account: str) -> None:
    """The mailbox names ACCOUNT is subscribed to."""
    names = state.store().subscriptions(account)
    if state.json:
        out({"account": account, "subscriptions": names})
    else:
        for name in names:
            typer.echo(name)


@app.command("purge-queue")
def purge_queue(due: Annotated[str | None, typer.Option(help="ISO 8601; default now")] = None,
                limit: Annotated[int, typer.Option(min=1)] = 1000) -> None:
    """Purge queue entries due by DUE (deleted, expired, expiring, incomplete)."""
    for e in state.store().purge_due(parse_time(due, "--due"), limit=limit):
        out(e.as_dict(), f"{e.queue:10} shard={e.shard:<2} due={e.due}  {e.message_id}  {e.reason}")


def _progress(label: str) -> Any:
    from rich.progress import Progress

    bar = Progress(disable=state.json)
    task = bar.add_task(label, total=None)

    def update(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)

    return bar, update


@app.command()
def rebuild(projection: Annotated[str | None, typer.Argument(help="projection name")] = None,
            all_: Annotated[bool, typer.Option("--all", help="every projection")] = False) -> None:
    """Rebuild projections from the log into fresh tables; switch readers atomically."""
    if not all_ and not projection:
        fail("give a PROJECTION or --all")
    names = None if all_ else [projection or ""]
    bar, update = _progress("rebuilding")
    try:
        with bar:
            result = state.store().rebuild(names, update)
    except KeyError as e:
        fail(str(e).strip("\"'"))
    out(result, f"rebuilt {', '.join(result['projections'])} up to position {result['position']} "
                f"in {result['seconds']} s")


@app.command()
def verify(projection: Annotated[str | None, typer.Argument(help="projection name")] = None,
           all_: Annotated[bool, typer.Option("--all", help="every projection")] = False) -> None:
    """Compare live tables with a rebuild from the log; exit 1 on any difference."""
    names = None if all_ or not projection else [projection]
    bar, update = _progress("verifying")
    try:
        with bar:
            reports = state.store().verify(names, update)
    except KeyError as e:
        fail(str(e).strip("\"'"))
    for r in reports:
        out(r.as_dict(), f"{r.table:16} rows={r.live_rows:<8} cells={r.live_cells:<9} "
                         f"{r.live_digest[:16]}  {'identical' if r.identical else 'DIFFERENT'}")
        for d in r.differences:
            typer.echo(f"    {d}", err=True)
    if not all(r.identical for r in reports):
        raise typer.Exit(1)


@app.command()
def body(account: str, mailbox: str, uid: int) -> None:
    """Stream a message's bytes from the read model (not counted as an extraction)."""
    for chunk in state.store().body(account, mailbox, uid):
        sys.stdout.buffer.write(chunk)
    sys.stdout.buffer.flush()


# -- import ------------------------------------------------------------------------------------
@import_app.command("mbox")
def import_mbox(path: Path, account: Annotated[str, typer.Option()],
                mailbox: Annotated[str, typer.Option()] = "INBOX",
                batch: Annotated[int, typer.Option(help="messages per append")] = 100) -> None:
    """Import every message of an mbox file (batched appends, with progress)."""
    from adapters.cli.importer import import_mbox as run

    report = run(state.store(), path, account, mailbox, batch=batch, progress=not state.json)
    out(report, f"imported {report['imported']} messages, rejected {report['rejected']}")


@import_app.command("maildir")
def import_maildir(path: Path, account: Annotated[str, typer.Option()],
                   mailbox: Annotated[str, typer.Option()] = "INBOX",
                   batch: Annotated[int, typer.Option(help="messages per append")] = 100) -> None:
    """Import a Maildir (cur/ and new/), keeping its flags (S R F T D)."""
    from adapters.cli.importer import import_maildir as run

    report = run(state.store(), path, account, mailbox, batch=batch, progress=not state.json)
    out(report, f"imported {report['imported']} messages, rejected {report['rejected']}")


# -- demo and benchmarks -------------------------------------------------------------------------
@app.command()
def demo(messages: Annotated[int, typer.Option(help="messages to generate")] = 400) -> None:
    """Generate realistic mail, deliver it, exercise every command, print a summary."""
    from adapters.cli.demo import run_demo

    run_demo(state.store(), messages=messages, as_json=state.json)


@bench_app.command("ingest")
def bench_ingest(messages: Annotated[int, typer.Option(help="messages")] = 5000,
                 plot: PlotOption = None,
                 as_json: BenchJson = False,
                 peer: Annotated[str | None, typer.Option(
                     help="also measure a peer on the same messages: dovecot")] = None) -> None:
    """Deliveries/s (single command and batched import) vs raw SQLite, same durability;
    with --peer dovecot also import, LMTP deliveries and bytes on disk against Dovecot."""
    from adapters.bench.ingest import bench_ingest as run

    if peer not in (None, "dovecot"):
        fail(f"--peer: unknown peer {peer!r} (choose dovecot)")
    _bench(run(messages=messages, plot=plot, peer=peer), as_json)


# -- scale-out processes ---------------------------------------------------------------------
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
    from adapters.streaming.relay import OutboxRelay
    from adapters.settings import load_settings

    settings = load_settings(data=state.data)
    with OutboxRelay.from_settings(settings) as r:
        if once:
            n = r.run_once()
            out({"published": n}, f"published {n} events")
        else:
            r.run(_stop_on_signals())


@app.command()
def worker(loglevel: Annotated[str, typer.Option(help="faust log level")] = "info") -> None:
    """faust projector worker: Kafka → the same projectors → HBase (run N of them)."""
    from adapters.settings import load_settings
    from adapters.streaming.worker import main as run

    raise typer.Exit(run(load_settings(data=state.data), loglevel=loglevel))


dead_app = typer.Typer(no_args_is_help=True, help="Poison records the stream workers set aside.")
app.add_typer(dead_app, name="dead-letters")


def _stream_store() -> Any:
    from adapters.settings import load_settings
    from adapters.streaming.worker import open_table_store

    return open_table_store(load_settings(data=state.data))


def _letter_line(d: dict[str, Any]) -> str:
    closed = f"  [{d['outcome']} {d['closed_at']} by {d['closed_by']}]" if "outcome" in d else ""
    return f"{d['id']}  times={d['times']}  {d['error']}{closed}"


@dead_app.command("list")
def dead_letters_list(limit: Annotated[int, typer.Option(min=1)] = 100,
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
    letter_ids: Annotated[list[str] | None, typer.Argument(metavar="[ID]...")] = None,
    all_: Annotated[bool, typer.Option("--all", help="every open dead letter")] = False,
    reason: Annotated[str, typer.Option(help="why (kept in the record)")] = "",
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


def _bench(result: dict[str, Any], as_json: bool = False) -> None:
    compact = as_json or state.json
    sys.stdout.write(json.dumps(result, indent=None if compact else 2) + "\n")


@bench_app.command("project")
def bench_project(events: Annotated[int, typer.Option(help="events in the log")] = 200_000,
                  plot: PlotOption = None,
                 as_json: BenchJson = False) -> None:
    """Catch-up projection throughput vs raw SQLite writes of the same cells."""
    from adapters.bench.projections import bench_project as run

    _bench(run(events=events, plot=plot), as_json)


@bench_app.command("rebuild")
def bench_rebuild(events: Annotated[int, typer.Option(help="events in the log")] = 1_000_000,
                  plot: PlotOption = None,
                 as_json: BenchJson = False) -> None:
    """Single-process rebuild of all projections vs reading and decoding the log."""
    from adapters.bench.projections import bench_rebuild as run

    _bench(run(events=events, plot=plot), as_json)


@bench_app.command("query")
def bench_query(messages: Annotated[int, typer.Option(help="messages in the mailbox")] = 100_000,
                samples: Annotated[int, typer.Option(help="queries timed")] = 2000,
                plot: PlotOption = None, as_json: BenchJson = False) -> None:
    """p50/p99 of a newest-50 listing and a counters read vs a raw SELECT."""
    from adapters.bench.projections import bench_query as run

    _bench(run(messages=messages, samples=samples, plot=plot), as_json)


@bench_app.command("stream")
def bench_stream(events: Annotated[int, typer.Option(help="events end to end")] = 100_000,
                 plot: PlotOption = None,
                 use_running: Annotated[bool, typer.Option(
                     "--use-running", help="Kafka and HBase from LETTERLOG_* settings "
                     "(services.env) instead of starting them")] = False,
                 as_json: BenchJson = False) -> None:
    """Relay → Kafka → worker → HBase events/s vs direct happybase batch writes."""
    from adapters.bench.stream import bench_stream as run
    from adapters.bench.stream import running_servers
    from adapters.settings import load_settings

    servers = running_servers(load_settings(data=state.data)) if use_running else {}
    _bench(run(events=events, plot=plot, **servers), as_json)


def main() -> None:
    try:
        app()
    except LetterlogError as e:
        typer.echo(f"letterlog: error: {e}", err=True)
        sys.exit(2 if not isinstance(e, InvalidCommand) else 2)


if __name__ == "__main__":
    main()
