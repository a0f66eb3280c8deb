"""``letterlog events list|show|resend|purge``: the events that event rules raised, their
status and attempts, sending one again (docs/event-rules.md)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from adapters.cli.arguments import parse_time, parse_uuid
from adapters.cli.common import fail, group, out, state

app = group("Event rules, the events they raise, and the dispatcher.")
SECTION = (152, 'Event rules')  # the root help's section (adapters.cli.table)
events_app = group("Events raised by event rules: list, show, resend.")
app.add_typer(events_app, name="events")


def _show_event(e: dict[str, Any]) -> None:
    if state.json:
        out(e)
        return
    reason = f"  {e['reason']}" if e["reason"] else ""
    typer.echo(f"{e['id']}  {e['status']:10} {e['attempts']:>3}  {e['rule']}  {e['trigger']} "
               f"{e['mailbox']} uid {e['uid']}  message {e['message_id']}  "
               f"{e['raised_at']}{reason}")


@events_app.command("list")
def events_list(
    message: Annotated[str | None, typer.Option(
        metavar="MESSAGE_ID", help="only the events of this message")] = None,
    rule: Annotated[str | None, typer.Option(metavar="NAME", help="only this rule's events")
                    ] = None,
    status: Annotated[str | None, typer.Option(
        metavar="STATUS", help="pending, processing, complete or failed")] = None,
    since: Annotated[str | None, typer.Option(
        metavar="ISO8601", help="raised at or after")] = None,
) -> None:
    """Rule events, oldest first: id, status, attempts, rule, arrival, message, reason."""
    events = state.admin_reader().rule_events(
        message=parse_uuid(message) if message else None, rule=rule, status=status,
        since=parse_time(since, "--since"))
    for e in events:
        _show_event(e)
    if not state.json:
        typer.echo(f"{len(events)} events", err=True)


@events_app.command("show")
def events_show(event_id: Annotated[str, typer.Argument(metavar="ID")]) -> None:
    """One rule event, with its application, properties and status."""
    e = state.admin_reader().rule_event(parse_uuid(event_id, "ID"))
    if state.json:
        out(e)
        return
    for k, v in e.items():
        typer.echo(f"{k:13} {v}")


@events_app.command("resend")
def events_resend(
    event_ids: Annotated[list[str] | None, typer.Argument(metavar="ID...")] = None,
    status: Annotated[str | None, typer.Option(
        metavar="STATUS", help="every event of this status (failed)")] = None,
) -> None:
    """Make events pending again: the dispatcher hands them over once more."""
    if not event_ids and status is None:
        fail("events resend: name event ids, or --status failed")
    ids = [parse_uuid(i, "ID") for i in event_ids or []]
    changed = state.admin_reader().resend(ids, status=status)
    out({"resent": changed}, f"{len(changed)} events pending again")


@events_app.command("purge")
def events_purge(
    dry_run: Annotated[bool, typer.Option(help="count what would go; write nothing")] = False,
    now: Annotated[str | None, typer.Option(
        metavar="ISO8601", help="with --dry-run: as if it were then")] = None,
) -> None:
    """Purge rule events whose status is older than its TTL (pending, processing,
    complete, failed: LETTERLOG_RULE_EVENT_<STATUS>_TTL_DAYS) and those of purged
    messages (the purger runs this after each purge run)."""
    if now is not None and not dry_run:
        fail("--now: only with --dry-run")
    report = state.admin_reader().purge_rule_events(parse_time(now, "--now"), dry_run=dry_run)
    by_queue = ", ".join(f"{q['queue']} {q['purged']}" for q in report["queues"])
    out(report, f"{report['purged']} rule events purged ({by_queue}, of purged messages "
                f"{report['message_gone']}){' (dry run)' if dry_run else ''}")
