"""What a delivery records about a message (``MessageFacts``), described from what was read
of it (``inspection`` reads it): size and digest, envelope, content type, its parts within
the part and depth limits, attachments, defects, the limits that cut the parse short."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from email.message import Message

from domain.rfc5322.attachments import attachment_names
from domain.rfc5322.defects import Defects
from domain.rfc5322.envelope import Envelope, content_type_of, envelope_fast, read_envelope
from domain.rfc5322.limits import MessageLimits
from domain.rfc5322.reader import ReadMessage
from domain.rfc5322.scan import LineEnding, line_ending
from domain.rfc5322.windows import ParseWindow


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


def describe(
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
