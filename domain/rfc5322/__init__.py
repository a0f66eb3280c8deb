"""Byte-exact inspection of RFC 5322 messages: what a delivery records about a message.

The bytes are never re-serialised or changed, only read. Only the total size (and input
that is not a message at all) rejects; the other limits cap the parse (`limits`). Every
parser or header defect is recorded as data instead of being raised.

Modules: `limits` (what rejects, the limits of the parse), `windows` (how far the parse
goes), `scan` (byte scans without a parser: header block, long lines, MIME structure),
`reader` (the fast reader), `parsing` (the stdlib parser, fed in chunks), `headers` (header
objects), `envelope`, `attachments`, `filenames`, `text`, `defects` (`defect_upcasting`:
those recorded before ADR 0040), `facts` (what a delivery records), and `inspection`
(`inspect_message`, which puts them together).

May import: the standard library (``email``) only.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from domain.rfc5322.envelope import Envelope, message_ids
    from domain.rfc5322.facts import MessageFacts
    from domain.rfc5322.filenames import sanitise_filename
    from domain.rfc5322.inspection import inspect_message, inspect_message_reference
    from domain.rfc5322.limits import KiB, MessageLimits, MiB
    from domain.rfc5322.scan import LineEnding, header_block_size, line_ending, prescan_structure
    from domain.rfc5322.text import clean_text

# Each name is imported from its module on first use (PEP 562): a process that only needs
# the limits (opening a store for ``flag``) does not load the parser and the email package.
_MODULE_OF = {
    "sanitise_filename": "filenames", "Envelope": "envelope", "message_ids": "envelope",
    "MessageFacts": "facts", "inspect_message": "inspection",
    "inspect_message_reference": "inspection",
    "KiB": "limits", "MessageLimits": "limits", "MiB": "limits", "LineEnding": "scan",
    "header_block_size": "scan", "line_ending": "scan", "prescan_structure": "scan",
    "clean_text": "text",
}


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "Envelope",
    "KiB",
    "LineEnding",
    "MessageFacts",
    "MessageLimits",
    "MiB",
    "clean_text",
    "header_block_size",
    "inspect_message",
    "inspect_message_reference",
    "line_ending",
    "message_ids",
    "prescan_structure",
    "sanitise_filename",
]
