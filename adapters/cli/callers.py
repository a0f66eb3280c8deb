"""Who may run which command: the rule every registered command declares for a caller
acting as a user (``--as USER``).

``CHECKED``: the command reaches the store only through ``state.store()`` /
``state.reader()`` / ``state.read_models()``, which for a user is the caller's view
(``adapters.caller.CallerView``): each of its commands and queries checks the user's rights
first, and anything the view does not offer is refused. ``ADMINISTRATOR``: the command is
the administrator's (it opens the store, the log, the servers or the files by other means:
``backup``, ``export``, ``lda``, ``processes``, ...); a user is refused before anything runs.

A command that is not in ``RULES`` is refused to users too, and
``tests/e2e/test_cli_callers.py`` fails until it is declared here.
"""

from __future__ import annotations

CHECKED = "checked"
ADMINISTRATOR = "administrator"

_CHECKED = (
    "deliver", "extract", "show", "flag", "label", "move", "copy", "delete", "restore",
    "expunge", "policy", "subscribe", "unsubscribe", "mailbox create", "mailbox rename",
    "mailbox delete", "mailbox list", "list", "search", "labelled", "thread", "counters",
    "du", "status", "subscriptions", "body", "acl get", "acl set", "acl add", "acl remove",
    "acl delete", "acl rights", "quota get",
)
_ADMINISTRATOR = (
    "import mbox", "import maildir", "rebuild", "export", "verify", "compact", "demo",
    "view list", "view drop", "spark package", "backup", "restore-backup", "keys migrate",
    "payloads migrate", "purger",
    "erase-message", "erase-account", "purge run", "erase complete", "erase export",
    "erase reapply", "erase status", "relay", "worker", "lag", "dead-letters list",
    "dead-letters show", "dead-letters discard", "dead-letters redrive", "processes start",
    "processes status", "processes restart", "processes stop", "bench ingest",
    "bench project", "bench rebuild", "bench query", "bench stream", "bench startup",
    "bench purge", "bench imap", "bench keys", "imap", "server start", "server stop",
    "server status",
    "lda", "lmtp", "init",
    "users list", "users purge", "dispatcher", "rule create", "rule change", "rule show",
    "rule list", "rule enable", "rule disable", "rule delete", "rule secret", "events list",
    "events show", "events resend", "events purge", "acl list", "root set", "root get",
    "root delete", "root list", "quota set", "purge-queue",
)
RULES: dict[str, str] = {**{c: CHECKED for c in _CHECKED},
                         **{c: ADMINISTRATOR for c in _ADMINISTRATOR}}
"""Every command (``group sub`` for a group's) and the rule it runs under for a user."""


def refusal(command: str | None, user: str) -> str | None:
    """Why ``user`` may not run ``command`` at all, or None when the command's own checks
    decide."""
    if command is None or RULES.get(command) == CHECKED:
        return None
    return (f"permission denied: {command} is the administrator's; {user} may not run it"
            + ("" if command in RULES else " (no rule declared for it)"))
