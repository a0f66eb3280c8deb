"""What a delivery records about a message: its facts, found without changing a byte.

`inspect_message` checks what rejects (`limits.check_input`, `limits.reject_binary`), works
out how much of the message the parser reads (`windows.line_window`,
`windows.structure_window`: the limits cap the parse, never the delivery), reads it, and
describes what it read. Well-formed messages are read by the fast reader
(`reader.read_fast`), which builds the stdlib parser's message tree an order of magnitude
faster; anything unusual, and anything cut short, goes to the stdlib parser, fed a chunk at
a time within the ``parse_seconds`` budget. `inspect_message_reference` gives the same facts
by the stdlib parser and ``policy.default`` alone: it is the specification the fast paths
are tested against.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from email import policy
from email.feedparser import BytesFeedParser
from email.message import EmailMessage, Message
from email.policy import EmailPolicy

from domain.rfc5322.attachments import attachment_names
from domain.rfc5322.defects import Defects
from domain.rfc5322.envelope import Envelope, content_type_of, envelope_fast, read_envelope
from domain.rfc5322.headers import FAST_POLICY, HeaderCache
from domain.rfc5322.limits import MessageLimits, check_input, reject_binary
from domain.rfc5322.reader import ReadMessage, read_fast
from domain.rfc5322.scan import LineEnding, header_block, header_block_size_by_lines, line_ending
from domain.rfc5322.windows import ParseWindow, line_window, structure_window

DEFAULT_LIMITS = MessageLimits()

PARSE_CHUNK = 64 * 1024
"""The stdlib parser is fed this much at a time; the time budget is checked in between."""


@dataclass(frozen=True)
class MessageFacts:
    size: int
    sha256: str
    header_bytes: int
    envelope: Envelope
    content_type: str
    part_count: int
    depth: int
    has_attachments: bool
    attachment_names: tuple[str, ...]
    defects: tuple[str, ...]
    line_ending: LineEnding
    truncated: tuple[str, ...] = ()  # the limits (settings) that stopped the parse


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
        message, window = _parse(raw, window, deadline, defects, FAST_POLICY)
    return _facts(raw, header_bytes, limits, window, message, defects, fast=True)


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
    message, window = _parse(raw, window, deadline, defects, reference)
    return _facts(raw, header_bytes, limits, window, message, defects, fast=False)


def _facts(
    raw: bytes,
    header_bytes: int,
    limits: MessageLimits,
    window: ParseWindow,
    message: Message,
    defects: Defects,
    fast: bool,
) -> MessageFacts:
    entities, capped = _walk(message, limits)
    truncated = window.truncated + tuple(c for c in capped if c not in window.truncated)
    part_count = len(entities)
    depth = max(level for _, level in entities)
    if fast and isinstance(message, ReadMessage):
        env = envelope_fast(message, defects)
    else:
        env = read_envelope(message, defects)
    content_type = content_type_of(message, defects)
    names = tuple(attachment_names(entities, defects, remember=fast))
    for part, _ in entities:
        defects.add_all(part.defects)
    return MessageFacts(
        size=len(raw),
        sha256=hashlib.sha256(raw).hexdigest(),
        header_bytes=header_bytes,
        envelope=env,
        content_type=content_type,
        part_count=part_count,
        depth=depth,
        has_attachments=bool(names),
        attachment_names=names,
        defects=defects.recorded(),
        line_ending=line_ending(raw),
        truncated=truncated,
    )


def _parse(
    raw: bytes, window: ParseWindow, deadline: float, defects: Defects,
    parsing: EmailPolicy[EmailMessage],
) -> tuple[EmailMessage, ParseWindow]:
    """The stdlib parser's tree of ``raw[:window.end]``, fed a chunk at a time; once
    ``deadline`` (``time.monotonic()``) has passed it is given no more (the window ends
    there: the ``parse_seconds`` limit)."""
    parser = BytesFeedParser(_factory=EmailMessage, policy=parsing)
    try:
        for start in range(0, window.end, PARSE_CHUNK):
            parser.feed(raw[start:min(start + PARSE_CHUNK, window.end)])
            if time.monotonic() > deadline and start + PARSE_CHUNK < window.end:
                window = window.cut(start + PARSE_CHUNK, "parse_seconds")
                break
        message: EmailMessage = parser.close()
        return message, window
    except RecursionError:  # nesting deeper than the parser's stack: headers only
        defects.add("ParserFailure", error=RecursionError())
        return _parse(raw, window.cut(header_block(raw)[1], "max_depth"), deadline, defects,
                      parsing)
    except Exception as error:  # the parser is meant never to raise; keep the bytes anyway
        defects.add("ParserFailure", error=error)
        return EmailMessage(policy=policy.default), window


def _walk(message: Message,
          limits: MessageLimits) -> tuple[list[tuple[Message, int]], tuple[str, ...]]:
    """The parts in order with their depth, at most ``max_parts`` nested at most
    ``max_depth`` deep; and the limits that left parts out."""
    found: list[tuple[Message, int]] = []
    capped: list[str] = []
    for part, depth in _parts(message):
        if depth > limits.max_depth:
            if "max_depth" not in capped:
                capped.append("max_depth")
            continue
        if len(found) == limits.max_parts:
            capped.append("max_parts")
            break
        found.append((part, depth))
    return found, tuple(capped)


def _parts(message: Message) -> Iterator[tuple[Message, int]]:
    stack: list[tuple[Message, int]] = [(message, 0)]
    while stack:
        part, depth = stack.pop()
        yield part, depth
        payload = part.get_payload() if part.is_multipart() else None
        if isinstance(payload, list):
            children = (child for child in reversed(payload) if isinstance(child, Message))
            stack.extend((child, depth + 1) for child in children)
