"""How a message is inspected: its facts (``facts``), found without changing a byte.

`inspect_message` checks what rejects (`limits.check_input`, `limits.reject_binary`), works
out how much of the message the parser reads (`windows.line_window`,
`windows.structure_window`: the limits cap the parse, never the delivery), reads it, and
describes what it read (`facts.describe`). Well-formed messages are read by the fast reader
(`reader.read_fast`), which builds the stdlib parser's message tree an order of magnitude
faster; anything unusual, and anything cut short, goes to the stdlib parser, fed a chunk at
a time within the ``parse_seconds`` budget (`parsing`). `inspect_message_reference` gives
the same facts by the stdlib parser and ``policy.default`` alone: it is the specification
the fast paths are tested against.
"""

from __future__ import annotations

import time
from email import policy

from domain.rfc5322.defects import Defects
from domain.rfc5322.facts import MessageFacts, describe
from domain.rfc5322.headers import FAST_POLICY, HeaderCache
from domain.rfc5322.limits import MessageLimits, check_input, reject_binary
from domain.rfc5322.parsing import parse_in_chunks
from domain.rfc5322.reader import read_fast
from domain.rfc5322.scan import header_block, header_block_size_by_lines
from domain.rfc5322.windows import line_window, structure_window

DEFAULT_LIMITS = MessageLimits()


def inspect_message(raw: bytes, limits: MessageLimits = DEFAULT_LIMITS, *,
                    refuse_binary: bool = True) -> MessageFacts:
    """Describe ``raw``; MessageRejected only if it is too large or not a message at all.
    ``refuse_binary=False``: bytes with control characters are described as the text they
    are not, never refused (an MTA's delivery: real mail is never rejected for its
    structure; only empty, blank or too large input is).

    A tree the fast reader built within the part and depth limits is what the structural
    pre-scan would have found (`scan.prescan_structure` counts what the parser finds), so
    the pre-scan's passes over the bytes are only needed for the stdlib parser.
    """
    check_input(raw, limits)
    header_lines, header_bytes = header_block(raw)
    if refuse_binary:
        reject_binary(raw, header_bytes)
    defects = Defects()
    deadline = time.monotonic() + limits.parse_seconds
    window = line_window(raw, header_bytes, limits)
    message = read_fast(raw, limits, header_lines, deadline) if not window.truncated else None
    if message is None:
        window = structure_window(raw, window, limits)
        message, window = parse_in_chunks(raw, window, deadline, defects, FAST_POLICY)
    return describe(raw, header_bytes, limits, window, message, defects, fast=True)


def inspect_message_reference(raw: bytes,
                              limits: MessageLimits = DEFAULT_LIMITS) -> MessageFacts:
    """`inspect_message` by the stdlib parser and ``policy.default``'s header classes only."""
    check_input(raw, limits)
    header_bytes = header_block_size_by_lines(raw)
    reject_binary(raw, header_bytes)
    defects = Defects()
    deadline = time.monotonic() + limits.parse_seconds
    window = structure_window(raw, line_window(raw, header_bytes, limits), limits)
    reference = policy.default.clone(header_factory=HeaderCache())
    message, window = parse_in_chunks(raw, window, deadline, defects, reference)
    return describe(raw, header_bytes, limits, window, message, defects, fast=False)
