"""``letterlog rule create|change|show|list|enable|disable|delete``, ``letterlog events
list|show|resend`` and ``letterlog dispatcher [--once]``: event rules (docs/event-rules.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from adapters.cli.arguments import parse_time, parse_uuid
from adapters.cli.common import fail, group, out, state, stop_on_signals
from adapters.embedded import Letterlog
from adapters.rules.dispatcher import Dispatcher, run_dispatcher

if TYPE_CHECKING:
    from adapters.face import Store

app = group("Event rules, the events they raise, and the dispatcher.")
SECTION = (150, 'Event rules')  # the root help's section (adapters.cli.table)
rule_app = group("Event rules: which arrivals raise an event for which application "
                 "(see docs/event-rules.md).")
events_app = group("Events raised by event rules: list, show, resend.")
app.add_typer(rule_app, name="rule")
app.add_typer(events_app, name="events")

Mailboxes = Annotated[list[str] | None, typer.Option(
    "--mailbox", metavar="NAME", help="a mailbox the rule watches (repeat; none: all)")]
Pattern = Annotated[str | None, typer.Option(
    "--mailbox-pattern", metavar="REGEX", help="watch the mailboxes whose name matches")]
Include = Annotated[list[str] | None, typer.Option(
    "--include", metavar="[FIELD:]REGEX",
    help="raise only for a message matching one of these (FIELD: sender, subject, name — "
         "the attachment file names, the default — or header:NAME)")]
Exclude = Annotated[list[str] | None, typer.Option(
    "--exclude", metavar="[FIELD:]REGEX", help="never raise for a message matching one")]
WebhookURL = Annotated[str | None, typer.Option(
    "--webhook", metavar="URL", help="POST each event to this URL")]
Topic = Annotated[str | None, typer.Option(
    "--kafka-topic", metavar="TOPIC", help="publish each event to this Kafka topic")]
Properties = Annotated[list[str] | None, typer.Option(
    "--property", metavar="K=V", help="handed to the application with each event")]
RunAs = Annotated[str | None, typer.Option(
    "--run-as", metavar="USER", help="raise only for mailboxes USER may read (ACL right r, "
    "at or below USER's virtual root)")]
SecretFile = Annotated[Path | None, typer.Option(
    "--secret-file", metavar="FILE", help="the webhook's HMAC secret, read from FILE (16 to "
    "512 printable characters; a final line end is dropped); without it a random one is "
    "made and shown once")]


def _secret(path: Path | None) -> str | None:
    """The secret in ``path`` (its one line), or None: none given."""
    if path is None:
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        fail(f"--secret-file {path}: {getattr(e, 'strerror', None) or e}")
    return text.removesuffix("\n").removesuffix("\r")


def _shown_once(secret: str) -> str:
    return (f"its secret (shown this once; give it to the receiver, which checks "
            f"X-Letterlog-Signature with it):\n{secret}")


def _properties(items: list[str] | None) -> dict[str, str]:
    found = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            fail(f"--property {item!r}: write KEY=VALUE")
        found[key] = value
    return found


def _terms(mailbox: list[str] | None, mailbox_pattern: str | None, include: list[str] | None,
           exclude: list[str] | None, webhook: str | None, kafka_topic: str | None,
           prop: list[str] | None, run_as: str | None) -> dict[str, Any]:
    return {"mailboxes": mailbox or [], "mailbox_pattern": mailbox_pattern,
            "include": include or [], "exclude": exclude or [], "webhook": webhook,
            "kafka_topic": kafka_topic, "properties": _properties(prop), "run_as": run_as}


def _show_rule(rule: dict[str, Any]) -> None:
    if state.json:
        out(rule)
        return
    sel = rule["mailboxes"]
    where = {"all": "all mailboxes", "list": ", ".join(sel.get("names", [])),
             "pattern": f"/{sel.get('pattern')}/"}[sel["kind"]]
    app_ = rule["application"]
    target = app_.get("url") or f"kafka topic {app_.get('topic')}"
    state_ = "enabled" if rule["enabled"] else "disabled (raises nothing)"
    typer.echo(f"{rule['name']}  {state_}  mailboxes: {where}  -> {app_['kind']} {target}")
    for side in ("include", "exclude"):
        for f in rule[side]:
            field = f"header:{f['header']}" if f["field"] == "header" else f["field"]
            typer.echo(f"  {side} {field} /{f['pattern']}/")
    for k, v in sorted(rule["properties"].items()):
        typer.echo(f"  property {k}={v}")
    if rule.get("run_as"):
        typer.echo(f"  runs as {rule['run_as']}: only mailboxes that user may read")


@rule_app.command("create")
def rule_create(name: str, mailbox: Mailboxes = None, mailbox_pattern: Pattern = None,
                include: Include = None, exclude: Exclude = None, webhook: WebhookURL = None,
                kafka_topic: Topic = None, prop: Properties = None,
                run_as: RunAs = None, secret_file: SecretFile = None) -> None:
    """A new rule, enabled: from now on each arrival (delivered, copied, moved) in a watched
    mailbox that the filters let through raises an event for the application."""
    secret = _secret(secret_file)
    store = state.admin_reader()
    change = store.create_rule(name, secret=secret, **_terms(
        mailbox, mailbox_pattern, include, exclude, webhook, kafka_topic, prop, run_as))
    made = change.extra.get("secret")
    out({"rule": name, "created": True, **change.extra},
        f"rule {name} created" + (f"; {_shown_once(made)}" if made else ""))


@rule_app.command("secret")
def rule_secret(name: str, secret_file: SecretFile = None) -> None:
    """Replace a rule's webhook secret (rotate it): from FILE, or a new random one, shown
    this once. Every event handed over from now on is signed with the new secret."""
    change = state.admin_reader().rotate_rule_secret(name, _secret(secret_file))
    made = change.extra.get("secret")
    out({"rule": name, "rotated": True, **change.extra},
        f"rule {name}: secret replaced" + (f"; {_shown_once(made)}" if made else
                                          f" by the one in {secret_file}"))


@rule_app.command("change")
def rule_change(name: str, mailbox: Mailboxes = None, mailbox_pattern: Pattern = None,
                include: Include = None, exclude: Exclude = None, webhook: WebhookURL = None,
                kafka_topic: Topic = None, prop: Properties = None,
                run_as: RunAs = None) -> None:
    """Replace a rule's definition (events it raised before keep theirs)."""
    change = state.admin_reader().change_rule(name, **_terms(
        mailbox, mailbox_pattern, include, exclude, webhook, kafka_topic, prop, run_as))
    out({"rule": name, "changed": change.changed},
        f"rule {name} {'changed' if change.changed else 'unchanged'}")


@rule_app.command("show")
def rule_show(name: str) -> None:
    """One rule: its mailboxes, filters, application, properties, enabled or not."""
    _show_rule(state.admin_reader().rule(name))


@rule_app.command("list")
def rule_list() -> None:
    """Every rule."""
    rules = state.admin_reader().rules()
    for rule in rules:
        _show_rule(rule)
    if not state.json:
        typer.echo(f"{len(rules)} rules", err=True)


@rule_app.command("enable")
def rule_enable(name: str) -> None:
    """Enable a rule: arrivals from now on raise events again."""
    change = state.admin_reader().enable_rule(name)
    out({"rule": name, "changed": change.changed}, f"rule {name} enabled")


@rule_app.command("disable")
def rule_disable(name: str) -> None:
    """Disable a rule: it raises nothing until enabled (events raised before stay)."""
    change = state.admin_reader().disable_rule(name)
    out({"rule": name, "changed": change.changed},
        f"rule {name} disabled: it raises nothing until `letterlog rule enable {name}`")


@rule_app.command("delete")
def rule_delete(name: str) -> None:
    """Delete a rule (events it raised before stay, and are still dispatched)."""
    state.admin_reader().delete_rule(name)
    out({"rule": name, "deleted": True}, f"rule {name} deleted")


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


@app.command()
def dispatcher(once: Annotated[bool, typer.Option(
        help="hand over what is pending, then exit")] = False) -> None:
    """Hand pending rule events to their applications (webhook, Kafka), recording each
    outcome in the log; one dispatcher per store."""
    if once:
        d = Dispatcher(state.admin_reader())
        try:
            counts = d.run_once()
        finally:
            d.close()
        out(counts, f"{counts['dispatched']} events handed over: {counts['complete']} "
                    f"complete, {counts['failed']} failed")
        return
    def metrics(store: Store) -> Any:
        try:  # local: the metrics are the kafka extra's, this command's alone
            from adapters.streaming.telemetry import RuleEventMetrics, serve_metrics
        except ImportError:  # prometheus-client is in the kafka extra
            return None
        port = serve_metrics("dispatcher", store.settings.data, store.settings.metrics_port)
        return RuleEventMetrics() if port is not None else None

    # waits out an outage of HBase or PostgreSQL, on a store opened afresh (ADR 0070)
    run_dispatcher(lambda: Letterlog.open(state.data, create=False),
                   stop_on_signals(), opened=metrics)
