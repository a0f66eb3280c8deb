"""Each member of the user's face (``adapters.face.Face``) and the rule it is checked by in
``CallerView``."""

from __future__ import annotations

RIGHTS_RULE, OWNER, VISIBLE, PRESENT, SESSION = "rights", "owner", "visible", "present", "session"
FACE_RULES: dict[str, str] = {
    **dict.fromkeys((
        "deliver", "check_delivery", "begin_upload", "append_chunk", "complete_upload",
        "extract", "extract_to", "extract_to_stream", "show", "flag", "label", "set_policy",
        "move", "copy", "delete", "restore", "expunge", "create_mailbox", "rename_mailbox",
        "delete_mailbox", "acl_get", "acl_set", "acl_delete", "messages", "search",
        "mailbox_status", "body"), RIGHTS_RULE),
    **dict.fromkeys(("subscribe", "unsubscribe", "subscriptions", "counters", "usage",
                     "label_messages", "quota", "quota_shown"), OWNER),
    **dict.fromkeys(("mailbox_list", "thread", "my_rights"), VISIBLE),
    "reading": PRESENT,
    **dict.fromkeys(("close", "__enter__", "__exit__"), SESSION),
}
"""The rule of every member of the user's face (``adapters.face.Face``) in this view:
``rights``: the caller's rights on the mailbox, as ``domain.rights.COMMAND_RIGHTS`` names
them (a mailbox it may not look up is refused as missing); ``owner``: account-wide, the
account's owner only; ``visible``: answers only what the caller may look up or read
(nothing of a mailbox it has no right on); ``present``: the current read models only (past
ones are the administrator's); ``session``: the view's own lifetime.
``tests/e2e/test_cli_callers.py`` fails for a member of the face without a rule here."""
