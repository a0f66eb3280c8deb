"""The lda's options, one table: its typer command (``adapters/cli/mta.py``) declares each by
this name, the hand-off client's parser (``handoff.py``) reads them, and
``tests/unit/test_mta_handoff.py`` holds the command and the compiled client
(``lda_client.c``) to it. A module of its own so that the command's module (which every
``letterlog --help`` imports) need not load the client."""

from __future__ import annotations

LDA_OPTIONS: dict[str, tuple[str, bool]] = {
    # field: (option, whether it takes a value)
    "recipient": ("--recipient", True),
    "sender": ("--sender", True),
    "original_recipient": ("--original-recipient", True),
    "queue_id": ("--queue-id", True),
    "mailbox": ("--mailbox", True),
    "detail_mailbox": ("--detail-mailbox", False),
    "accounts_must_exist": ("--accounts-must-exist", False),
    "recipient_delimiter": ("--recipient-delimiter", True),
    "envelope_headers": ("--envelope-headers", False),
    "timeout": ("--timeout", True),
}
