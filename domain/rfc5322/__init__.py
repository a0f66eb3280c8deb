"""Byte-exact inspection of RFC 5322 messages: what a delivery records about a message.

The bytes are never re-serialised or changed, only read. Only the total size (and input
that is not a message at all) rejects; the other limits cap the parse (`limits`). Every
parser or header defect is recorded as data instead of being raised.

Modules: `limits` (what rejects, how far the parse goes), `scan` (byte scans without a
parser: header block, long lines, MIME structure), `reader` (the fast reader), `headers`
(header objects), `envelope`, `attachments`, `text`, `defects`, and `facts`
(`inspect_message`, which puts them together).

May import: the standard library (``email``) only.
"""

from domain.rfc5322.attachments import sanitise_filename
from domain.rfc5322.envelope import Envelope, message_ids
from domain.rfc5322.facts import MessageFacts, inspect_message, inspect_message_reference
from domain.rfc5322.limits import KiB, MessageLimits, MiB
from domain.rfc5322.scan import LineEnding, header_block_size, line_ending, prescan_structure
from domain.rfc5322.text import clean_text

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
