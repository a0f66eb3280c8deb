"""``letterlog rule create|secret|change|show|list|enable|disable|delete``: the event rules,
which arrivals raise an event for which application (docs/event-rules.md)."""

from __future__ import annotations

import typer

from adapters.cli.common import group, out, state
from adapters.cli.ruleterms import (
    Exclude,
    Include,
    Mailboxes,
    Pattern,
    Properties,
    RunAs,
    SecretFile,
    Topic,
    WebhookURL,
    secret_from,
    show_rule,
    shown_once,
    terms,
)

app = group("Event rules, the events they raise, and the dispatcher.")
SECTION = (151, 'Event rules')  # the root help's section (adapters.cli.table)
rule_app = group("Event rules: which arrivals raise an event for which application "
                 "(see docs/event-rules.md).")
app.add_typer(rule_app, name="rule")


@rule_app.command("create")
def rule_create(name: str, mailbox: Mailboxes = None, mailbox_pattern: Pattern = None,
                include: Include = None, exclude: Exclude = None, webhook: WebhookURL = None,
                kafka_topic: Topic = None, prop: Properties = None,
                run_as: RunAs = None, secret_file: SecretFile = None) -> None:
    """A new rule, enabled: from now on each arrival (delivered, copied, moved) in a watched
    mailbox that the filters let through raises an event for the application."""
    secret = secret_from(secret_file)
    store = state.admin_reader()
    change = store.create_rule(name, secret=secret, **terms(
        mailbox, mailbox_pattern, include, exclude, webhook, kafka_topic, prop, run_as))
    made = change.extra.get("secret")
    out({"rule": name, "created": True, **change.extra},
        f"rule {name} created" + (f"; {shown_once(made)}" if made else ""))


@rule_app.command("secret")
def rule_secret(name: str, secret_file: SecretFile = None) -> None:
    """Replace a rule's webhook secret (rotate it): from FILE, or a new random one, shown
    this once. Every event handed over from now on is signed with the new secret."""
    change = state.admin_reader().rotate_rule_secret(name, secret_from(secret_file))
    made = change.extra.get("secret")
    out({"rule": name, "rotated": True, **change.extra},
        f"rule {name}: secret replaced" + (f"; {shown_once(made)}" if made else
                                          f" by the one in {secret_file}"))


@rule_app.command("change")
def rule_change(name: str, mailbox: Mailboxes = None, mailbox_pattern: Pattern = None,
                include: Include = None, exclude: Exclude = None, webhook: WebhookURL = None,
                kafka_topic: Topic = None, prop: Properties = None,
                run_as: RunAs = None) -> None:
    """Replace a rule's definition (events it raised before keep theirs)."""
    change = state.admin_reader().change_rule(name, **terms(
        mailbox, mailbox_pattern, include, exclude, webhook, kafka_topic, prop, run_as))
    out({"rule": name, "changed": change.changed},
        f"rule {name} {'changed' if change.changed else 'unchanged'}")


@rule_app.command("show")
def rule_show(name: str) -> None:
    """One rule: its mailboxes, filters, application, properties, enabled or not."""
    show_rule(state.admin_reader().rule(name))


@rule_app.command("list")
def rule_list() -> None:
    """Every rule."""
    rules = state.admin_reader().rules()
    for rule in rules:
        show_rule(rule)
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
