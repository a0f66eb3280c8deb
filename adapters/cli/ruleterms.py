"""What a person types for an event rule (the mailboxes it watches, its filters, its
application and the properties handed to it, a webhook's secret) and how a rule is shown:
``rulebook``'s commands share them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from adapters.cli.common import fail, out, state

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


def secret_from(path: Path | None) -> str | None:
    """The secret in ``path`` (its one line), or None: none given."""
    if path is None:
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        fail(f"--secret-file {path}: {getattr(e, 'strerror', None) or e}")
    return text.removesuffix("\n").removesuffix("\r")


def shown_once(secret: str) -> str:
    return (f"its secret (shown this once; give it to the receiver, which checks "
            f"X-Letterlog-Signature with it):\n{secret}")


def properties(items: list[str] | None) -> dict[str, str]:
    found = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            fail(f"--property {item!r}: write KEY=VALUE")
        found[key] = value
    return found


def terms(mailbox: list[str] | None, mailbox_pattern: str | None, include: list[str] | None,
           exclude: list[str] | None, webhook: str | None, kafka_topic: str | None,
           prop: list[str] | None, run_as: str | None) -> dict[str, Any]:
    return {"mailboxes": mailbox or [], "mailbox_pattern": mailbox_pattern,
            "include": include or [], "exclude": exclude or [], "webhook": webhook,
            "kafka_topic": kafka_topic, "properties": properties(prop), "run_as": run_as}


def show_rule(rule: dict[str, Any]) -> None:
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
