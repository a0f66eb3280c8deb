"""Byte-exact inspection of RFC 5322 messages: limits first, then facts.

The bytes are never re-serialised or changed, only read. Limits are enforced before the
full parse (size, header block, a structural pre-scan for parts and nesting); then the
stdlib parser (``policy.default``) reads the envelope, and every parser or header defect
is recorded as data instead of being raised.

That is `inspect_message_reference`. `inspect_message` gives the same facts an order of
magnitude faster: a reader that builds the stdlib parser's message tree for well-formed
mail (and leaves the rest to the parser), header objects made directly for plain values
and remembered across messages, and no pre-scan passes when that reader succeeded.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from email import policy
from email.errors import InvalidDateDefect, MessageDefect, MissingHeaderBodySeparatorDefect
from email.header import decode_header, make_header
from email.headerregistry import AddressHeader, BaseHeader, DateHeader, HeaderRegistry
from email.message import EmailMessage, Message
from email.parser import BytesParser
from email.policy import EmailPolicy, Policy
from email.utils import format_datetime, getaddresses, parsedate_to_datetime, unquote
from typing import Any, ClassVar, Literal, TypeVar, overload

from domain.errors import InvalidCommand, MessageRejected

KiB = 1024
MiB = 1024 * KiB

LineEnding = Literal["CRLF", "LF", "mixed", "none"]

ENVELOPE_FIELD_LIMIT = 16 * KiB
"""An envelope header longer than this is decoded from its first folded lines only."""

MAX_DEFECTS = 100
"""Defects recorded per message; the rest are summed up in one last entry."""

BINARY_SHARE = 0.01
BINARY_TOLERANCE = 1
"""More control bytes than this share (or one stray byte) at the start: binary, not mail."""

BINARY_WINDOW = 4 * KiB
"""How much of a message without headers is looked at to tell text from binary."""

MAX_FILENAME_BYTES = 255

_DateTime = datetime
_T = TypeVar("_T")


@dataclass(frozen=True)
class MessageLimits:
    max_size: int = 50 * MiB
    max_header_bytes: int = 256 * KiB
    max_parts: int = 1000
    max_depth: int = 32

    def __post_init__(self) -> None:
        for name in ("max_size", "max_header_bytes", "max_parts", "max_depth"):
            if getattr(self, name) < 1:
                raise InvalidCommand(f"MessageLimits.{name} must be at least 1")


@dataclass(frozen=True)
class Envelope:
    """Decoded envelope headers: "" or () when absent; addresses as ``Name <addr>``."""

    subject: str
    from_: str
    to: tuple[str, ...]
    cc: tuple[str, ...]
    bcc: tuple[str, ...]
    date: str | None
    sent_at: datetime | None
    message_id: str | None
    in_reply_to: str | None
    references: tuple[str, ...]


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


def inspect_message(raw: bytes, limits: MessageLimits = MessageLimits()) -> MessageFacts:
    """Check ``raw`` against ``limits`` and describe it; MessageRejected if it is unfit.

    Well-formed messages are read by a fast reader (`_read_fast`) that builds the same
    message tree as the stdlib parser; anything unusual goes to the stdlib parser. Both
    decode headers with `_FastHeaders`. The facts equal `inspect_message_reference`'s.

    A tree the fast reader built within the part and depth limits is what the structural
    pre-scan would have found (`prescan_structure` counts what the parser finds), so the
    pre-scan's passes over the bytes are only needed for the stdlib parser.
    """
    _check_input(raw, limits)
    header_lines, header_bytes = _header_block(raw, limits.max_header_bytes)
    _reject_binary(raw, header_bytes)
    defects = _Defects()
    message = _read_fast(raw, limits, header_lines)
    if message is None:
        _check_structure_bounds(raw, limits)
        message = _parse(raw, limits, defects, _FAST_POLICY)
    return _facts(raw, header_bytes, limits, message, defects, fast=True)


def inspect_message_reference(raw: bytes, limits: MessageLimits = MessageLimits()) -> MessageFacts:
    """`inspect_message` by the stdlib parser and ``policy.default``'s header classes only.

    The specification of `inspect_message`, kept to test the fast paths against.
    """
    header_bytes = _check_before_parsing(raw, limits, _header_block_size_by_lines)
    defects = _Defects()
    reference = policy.default.clone(header_factory=_HeaderCache())
    message = _parse(raw, limits, defects, reference)
    return _facts(raw, header_bytes, limits, message, defects, fast=False)


def _facts(
    raw: bytes,
    header_bytes: int,
    limits: MessageLimits,
    message: Message,
    defects: _Defects,
    fast: bool,
) -> MessageFacts:
    entities = list(_walk(message))
    part_count = len(entities)
    depth = max(level for _, level in entities)
    _check_structure(part_count, depth, limits)
    if fast and isinstance(message, _ReadMessage):
        envelope = _envelope_fast(message, defects)
    else:
        envelope = _envelope(message, defects)
    content_type = _content_type(message, defects)
    names = tuple(_attachment_names(entities, defects, remember=fast))
    for part, _ in entities:
        defects.add_all(part.defects)
    return MessageFacts(
        size=len(raw),
        sha256=hashlib.sha256(raw).hexdigest(),
        header_bytes=header_bytes,
        envelope=envelope,
        content_type=content_type,
        part_count=part_count,
        depth=depth,
        has_attachments=bool(names),
        attachment_names=names,
        defects=defects.recorded(),
        line_ending=line_ending(raw),
    )


def line_ending(raw: bytes) -> LineEnding:
    """CRLF or LF if all line breaks are, none without any, mixed otherwise."""
    breaks = raw.translate(None, _NOT_LINE_BREAK)
    if not breaks:
        return "none"
    cr = breaks.count(b"\r")
    if not cr:
        return "LF"
    if _BARE_CR.search(raw):
        return "mixed"
    return "CRLF" if len(breaks) == 2 * cr else "mixed"  # each CR is followed by an LF


_NOT_LINE_BREAK = bytes(b for b in range(256) if b not in b"\r\n")
_BARE_CR = re.compile(rb"\r(?!\n)")


# --- before the parser sees the bytes ---------------------------------------------------------


def _check_before_parsing(
    raw: bytes, limits: MessageLimits, block_size: Callable[[bytes, int], int] | None = None
) -> int:
    _check_input(raw, limits)
    header_bytes = (block_size or header_block_size)(raw, limits.max_header_bytes)
    _reject_binary(raw, header_bytes)
    _check_structure_bounds(raw, limits)
    return header_bytes


def _check_input(raw: bytes, limits: MessageLimits) -> None:
    if not isinstance(raw, bytes):
        raise MessageRejected(f"not a message: expected bytes, got {type(raw).__name__}")
    if not raw:
        raise MessageRejected("not a message: empty input (0 bytes)")
    if len(raw) > limits.max_size:
        raise MessageRejected(
            f"message too large: {len(raw)} bytes exceeds max_size={limits.max_size}"
        )
    if raw.isspace():  # what bytes.strip() strips, without copying the bytes
        raise MessageRejected(f"not a message: {len(raw)} bytes of whitespace only")


def _check_structure_bounds(raw: bytes, limits: MessageLimits) -> None:
    """Too many parts or too deep nesting, found before any parser has to find them."""
    if not _structure_fits(raw, limits):
        parts, depth = prescan_structure(raw, limits)
        _check_structure(parts, depth, limits, found="at least ", how=" (pre-scan)")


_NEWLINE = re.compile(rb"\r\n|\r|\n")
_HEADER_LINE = re.compile(rb"From |[\041-\071\073-\176]*:|[\t ]")  # = email.feedparser.headerRE


_HEADER_LINES = re.compile(rb"(?:(?:From |[\041-\071\073-\176]*:|[\t ])[^\r\n]*(?:\r\n|\r|\n|\Z))*")
"""Lines that ``email.feedparser.headerRE`` takes for header lines, one after the other."""


def header_block_size(raw: bytes, limit: int) -> int:
    """Bytes of the header block, blank separator line included, as the parser splits it.

    The block ends at the first blank line or before the first line that is not a header
    (the parser records MissingHeaderBodySeparatorDefect); 0 means no headers at all.
    """
    return _header_block(raw, limit)[1]


def _header_block(raw: bytes, limit: int) -> tuple[int, int]:
    """Where the header lines end, and `header_block_size`."""
    lines = _header_lines_end(raw, 0)
    blank = _NEWLINE.match(raw, lines)
    end = blank.end() if blank else lines
    if end > limit:
        return lines, _header_block_size_by_lines(raw, limit)  # says which line is too much
    return lines, end


def _header_lines_end(raw: bytes, pos: int) -> int:
    lines = _HEADER_LINES.match(raw, pos)
    return lines.end() if lines else pos  # it matches "" at least


def _header_block_size_by_lines(raw: bytes, limit: int) -> int:
    """`header_block_size` line by line, as the parser reads the lines."""
    pos = 0
    while pos < len(raw):
        newline = _NEWLINE.search(raw, pos)
        end = newline.end() if newline else len(raw)
        blank = newline is not None and newline.start() == pos
        if not blank and not _HEADER_LINE.match(raw, pos):
            return pos
        if end > limit:
            raise MessageRejected(
                f"header block too large: at least {end} bytes exceeds max_header_bytes={limit}"
            )
        if blank:
            return end
        pos = end
    return pos


_CONTROL = bytes(b for b in range(256) if b == 0x7F or (b < 0x20 and b not in b"\t\n\v\f\r\x1b"))
_NOT_CONTROL = bytes(b for b in range(256) if b not in _CONTROL)


def _reject_binary(raw: bytes, header_bytes: int) -> None:
    window = raw[:header_bytes]
    where = "header block"
    if not window.strip():
        window, where = raw[:BINARY_WINDOW], "first bytes"
    controls = len(window.translate(None, _NOT_CONTROL))
    if controls > max(BINARY_TOLERANCE, BINARY_SHARE * len(window)):
        raise MessageRejected(
            f"not a message: binary data, {controls} NUL/control bytes in the {where} "
            f"({len(window)} bytes, at most {BINARY_SHARE:.0%} allowed)"
        )


def _check_structure(
    parts: int, depth: int, limits: MessageLimits, found: str = "", how: str = ""
) -> None:
    if parts > limits.max_parts:
        raise MessageRejected(
            f"too many MIME parts: {found}{parts}{how} exceeds max_parts={limits.max_parts}"
        )
    if depth > limits.max_depth:
        raise MessageRejected(
            f"MIME nesting too deep: depth {found}{depth}{how} exceeds max_depth={limits.max_depth}"
        )


def _structure_bounds(raw: bytes) -> tuple[int, int]:
    """Upper bounds of (parts, depth) at C speed; only exceeding them costs a line scan.

    A multipart child follows a line starting with ``--``; a nesting level needs a
    ``boundary`` parameter or a ``message/`` type (digest children are message/rfc822 by
    default; delivery-status blocks are separated by blank lines).
    """
    lower = raw.lower()
    dash_lines = raw.count(b"\n--") + raw.count(b"\r--") + raw.startswith(b"--")
    messages = lower.count(b"message/")
    digest = 2 if b"digest" in lower else 1
    blocks = raw.count(b"\n\n") + raw.count(b"\n\r\n") if b"delivery-status" in lower else 0
    return 1 + digest * dash_lines + messages + blocks, digest * lower.count(b"boundary") + messages


def _structure_fits(raw: bytes, limits: MessageLimits) -> bool:
    """Whether `_structure_bounds` are within ``limits``, in fewer passes over the bytes.

    Over-estimates of both bounds come first: digest at most doubles, a line starting
    with ``--`` takes two dashes no other one has, and without ``delivery-status`` there
    are no status blocks. Only if they exceed a limit are the bounds themselves needed.
    """
    lower = raw.lower()
    messages = lower.count(b"message/")
    if (
        2 * lower.count(b"boundary") + messages <= limits.max_depth
        and 1 + 2 * (raw.count(b"-") // 2) + messages <= limits.max_parts
        and b"delivery-status" not in lower
    ):
        return True
    parts, depth = _structure_bounds(raw)
    return parts <= limits.max_parts and depth <= limits.max_depth


def prescan_structure(raw: bytes, limits: MessageLimits | None = None) -> tuple[int, int]:
    """(parts, depth) as the stdlib parser will find them, by a line scan without parsing.

    Body lines can only matter if they start with ``--``, so the scan jumps from one such
    line to the next, and stops when no multipart is open. With ``limits`` it also stops
    as soon as one of them is exceeded.
    """
    scan = _StructureScan()
    pos = 0
    while pos < len(raw):
        if scan.in_body():
            pos = scan.next_boundary(raw, pos)
            if pos < 0:
                break
        line = _LINE.match(raw, pos)
        assert line is not None
        scan.feed(line.group())
        pos = line.end()
        if limits and (scan.parts > limits.max_parts or scan.depth > limits.max_depth):
            break
    return scan.finish()


_LINE = re.compile(rb"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+")
_DASH_LINE = re.compile(rb"[\r\n]--")
_CONTENT_TYPE = re.compile(rb"content-type:", re.I)
_BOUNDARY_PARAM = re.compile(
    rb"""boundary\*?[ \t]*=[ \t]*(?:"([^"]*)"|(?:[\w.-]*'[\w.-]*')?([^\s;"]+))""", re.I
)


@dataclass
class _Entity:
    depth: int
    in_digest: bool
    fresh: bool = False  # just opened by a boundary line, nothing read yet
    content_type: bytes = b""
    in_content_type: bool = False

    def header(self, line: bytes) -> None:
        self.fresh = False
        if line[:1] not in (b" ", b"\t"):
            self.in_content_type = not self.content_type and bool(_CONTENT_TYPE.match(line))
        if self.in_content_type:
            self.content_type += line

    def media_type(self) -> tuple[bytes, bytes | None]:
        value = _NEWLINE.sub(b"", self.content_type[len(b"content-type:") :])
        media = value.split(b";", 1)[0].strip().lower()
        if media.count(b"/") != 1:
            media = b"message/rfc822" if self.in_digest and not value.strip() else b"text/plain"
        found = _BOUNDARY_PARAM.search(value)
        boundary = (found[1] if found[1] is not None else found[2]).rstrip() if found else None
        return media, boundary


class _StructureScan:
    """The feedparser's state machine, reduced to counting entities and nesting.

    Headers end at a blank or non-header line; any open boundary ends a part; message/*
    holds one message; delivery-status holds header blocks separated by blank lines.
    """

    def __init__(self) -> None:
        self.open: list[tuple[bytes, int, bool]] = []  # boundary, depth, is digest
        self.outermost: dict[bytes, int] = {}  # boundary: its lowest index in self.open
        self.entity: _Entity | None = _Entity(depth=0, in_digest=False)
        self.status_depth: int | None = None
        self.block_pending = False
        self.level = -1  # index in self.open of the multipart the last boundary belonged to
        self.parts = 0
        self.depth = 0

    def feed(self, line: bytes) -> None:
        if line[:2] == b"--" and self.open and self._boundary(line):
            return
        blank = line[:1] in (b"\r", b"\n")
        if self.entity is not None and not blank and _HEADER_LINE.match(line):
            self.entity.header(line)
        elif self.entity is not None:
            self._end_headers()
            if not blank:
                self.feed(line)
        elif self.status_depth is not None:
            if self.block_pending:
                self._count(self.status_depth)
            self.block_pending = blank

    def in_body(self) -> bool:
        """Reading a body, where only boundary lines matter."""
        return self.entity is None and self.status_depth is None

    def next_boundary(self, raw: bytes, pos: int) -> int:
        """Where the next line that is an open boundary starts; -1 if there is none."""
        while self.open:
            if not raw.startswith(b"--", pos):
                dashes = _DASH_LINE.search(raw, pos)
                if dashes is None:
                    break
                pos = dashes.start() + 1
            line = _LINE.match(raw, pos)
            assert line is not None
            if self._find(_mark(line.group()))[0] is not None:
                return pos
            pos = line.end()
        return -1

    def finish(self) -> tuple[int, int]:
        while self.entity is not None:
            self._end_headers()
        return self.parts, self.depth

    def _count(self, depth: int) -> None:
        self.parts += 1
        self.depth = max(self.depth, depth)

    def _end_headers(self) -> None:
        assert self.entity is not None
        entity, self.entity = self.entity, None
        self._count(entity.depth)
        media, boundary = entity.media_type()
        if media == b"message/delivery-status":
            self.status_depth, self.block_pending = entity.depth + 1, False
            self._count(entity.depth + 1)
        elif media.startswith(b"message/"):
            self.entity = _Entity(entity.depth + 1, in_digest=False)
        elif media.startswith(b"multipart/") and boundary is not None:
            self._open(boundary, entity.depth, media == b"multipart/digest")

    def _boundary(self, line: bytes) -> bool:
        """An enclosing boundary ends every part inside it, so the outermost match wins."""
        index, closing = self._find(_mark(line))
        if index is None:
            return False
        if self.entity is not None and self.entity.fresh and self.level == index:
            return True  # repeated boundary lines make no empty parts
        while self.entity is not None:
            self._end_headers()
        _, depth, digest = self.open[index]
        self._close(index if closing else index + 1)
        self.status_depth = None
        self.entity = None if closing else _Entity(depth + 1, digest, fresh=True)
        self.level = index
        return True

    def _find(self, mark: bytes) -> tuple[int | None, bool]:
        """The open multipart whose boundary ``mark`` is (outermost first), and if closing."""
        delimiter = self.outermost.get(mark)
        close = self.outermost.get(mark[:-2]) if mark[-2:] == b"--" else None
        if close is not None and (delimiter is None or close < delimiter):
            return close, True
        return delimiter, False

    def _open(self, boundary: bytes, depth: int, digest: bool) -> None:
        self.outermost.setdefault(boundary, len(self.open))
        self.open.append((boundary, depth, digest))

    def _close(self, keep: int) -> None:
        for boundary, _, _ in self.open[keep:]:
            if self.outermost.get(boundary, -1) >= keep:
                del self.outermost[boundary]
        del self.open[keep:]


def _mark(line: bytes) -> bytes:
    """What follows the ``--`` of a boundary line, as the feedparser's boundary regex sees it."""
    return line[2:].rstrip(b"\r\n").rstrip(b" \t")


# --- parsing -------------------------------------------------------------------------------


class _HeaderCache(HeaderRegistry):
    """``policy.default``'s header factory for one message, parsing each header once.

    The stdlib makes a new class for every header object it creates, and its parser
    re-reads Content-Type many times; both are remembered (header objects are immutable).
    This doubles the throughput of inspection on the test corpus.
    """

    _classes: ClassVar[dict[str, type[BaseHeader]]] = {}

    def __init__(self) -> None:
        super().__init__()
        self._made: dict[tuple[str, str], BaseHeader] = {}

    def __getitem__(self, name: str) -> type[BaseHeader]:
        made = self._classes.get(name.lower())
        if made is None:
            made = self._classes[name.lower()] = super().__getitem__(name)
        return made

    def __call__(self, name: str, value: str) -> BaseHeader:
        header = self._made.get((name, value))
        if header is None:
            header = self._made[(name, value)] = super().__call__(name, value)
        return header


def _parse(
    raw: bytes, limits: MessageLimits, defects: _Defects, parsing: EmailPolicy[EmailMessage]
) -> EmailMessage:
    parser = BytesParser(EmailMessage, policy=parsing)
    try:
        return parser.parsebytes(raw)
    except RecursionError:
        raise MessageRejected(
            f"MIME nesting too deep for the parser (max_depth={limits.max_depth})"
        ) from None
    except Exception as error:  # the parser is meant never to raise; keep the bytes anyway
        defects.add("ParserFailure", f"{type(error).__name__}: {error}")
        return EmailMessage(policy=policy.default)


def _walk(message: Message) -> Iterator[tuple[Message, int]]:
    stack: list[tuple[Message, int]] = [(message, 0)]
    while stack:
        part, depth = stack.pop()
        yield part, depth
        payload = part.get_payload() if part.is_multipart() else None
        if isinstance(payload, list):
            children = (child for child in reversed(payload) if isinstance(child, Message))
            stack.extend((child, depth + 1) for child in children)


class _Defects:
    def __init__(self) -> None:
        self._items: list[str] = []
        self._dropped = 0

    def add(self, kind: str, detail: str = "") -> None:
        if len(self._items) >= MAX_DEFECTS:
            self._dropped += 1
            return
        detail = clean_text(detail)[:200]
        self._items.append(f"{kind}: {detail}" if detail else kind)

    def add_all(self, defects: Iterable[Exception], header: str | None = None) -> None:
        for defect in defects:
            detail = ": ".join(filter(None, (header, str(defect))))
            self.add(type(defect).__name__, detail)

    def recorded(self) -> tuple[str, ...]:
        if self._dropped:
            return (*self._items, f"TooManyDefects: {self._dropped} more not recorded")
        return tuple(self._items)


# --- the fast reader ------------------------------------------------------------------------
#
# Reading a typical message with the stdlib parser and policy.default's header classes costs
# milliseconds, nearly all of it in machinery whose result the facts do not need (payloads,
# parse trees of plain values). The reader below builds the same message tree as the
# feedparser for well-formed input and gives up (None) on anything the parser would treat
# specially; the header factory decodes plain values directly and remembers what it made.
# Both are checked against `inspect_message_reference` (tests/unit/test_rfc5322.py: the
# corpus, generated mail, random structures and header values).


class _Unusual(Exception):
    """Something only the stdlib parser can say exactly what to make of."""


_MAX_FAST_LEVEL = 64
"""Nesting the fast reader follows; deeper messages are left to the parser and its limits."""


def _read_fast(raw: bytes, limits: MessageLimits, header_lines: int) -> EmailMessage | None:
    """The message tree the stdlib parser builds for ``raw``, or None if unsure.

    Mirrors ``email.feedparser`` for well-formed input: headers stored as its
    ``_parse_headers`` stores them, multipart bodies split at boundary lines (a line that
    is any open boundary ends a part), message/* holding one message. Payloads are not
    kept (the facts never read them). Whatever the parser would record a defect for or
    treat specially (no boundary, repeated or missing boundary lines, multipart/digest,
    message/delivery-status, misplaced From lines, ...) returns None, and so does a
    message with more parts or deeper nesting than ``limits`` allow. ``header_lines`` is
    where the header lines of the message end (`_header_block`).
    """
    try:
        return _Reader(raw, limits, header_lines).entity(0, (), 0)[0]
    except (_Unusual, RecursionError):
        return None
    except Exception:  # a header the stdlib chokes on: the parser decides what that means
        return None


class _ReadMessage(EmailMessage):
    """A message made with its raw header fields (stored as the feedparser stores them),
    which finds the first header of a name in a dict and fetches it from the policy once."""

    def __init__(self, fields: list[tuple[str, str]]) -> None:
        super().__init__(_FAST_POLICY)
        self._headers = fields  # what set_raw appends to, field by field
        self.first = {name.lower(): (name, value) for name, value in reversed(fields)}
        self._fetched: dict[str, Any] = {}
        self._media: str | None = None

    def set_raw(self, name: str, value: Any) -> None:
        super().set_raw(name, value)
        self.first.setdefault(name.lower(), (name, value))
        self._fetched.pop(name.lower(), None)
        self._media = None

    def get_content_type(self) -> str:
        if self._media is None:
            self._media = super().get_content_type()
        return self._media

    def get_boundary(self, failobj: Any = None) -> Any:
        """``Message.get_boundary``; from the parameters of a `_SimpleMime` Content-Type.

        Its text is ``type; name="value"; ...`` (names unique, values without quotes or
        backslashes), which ``get_param`` reads back as the value itself.
        """
        header = self.get("content-type")
        if not isinstance(header, _SimpleMime):
            return super().get_boundary(failobj)
        for name, value in header.parameters:
            if name.lower() == "boundary":
                return unquote(value).rstrip()  # as collapse_rfc2231_value unquotes it
        return failobj

    @overload
    def get(self, name: str, failobj: None = None) -> Any | None: ...
    @overload
    def get(self, name: str, failobj: _T) -> Any | _T: ...
    def get(self, name: str, failobj: object = None) -> object:
        key = name.lower()
        header = self._fetched.get(key)
        if header is None:
            first = self.first.get(key)
            if first is None:
                return failobj
            header = self._fetched[key] = self.policy.header_fetch_parse(*first)
        return header


class _Reader:
    def __init__(self, raw: bytes, limits: MessageLimits, header_lines: int) -> None:
        self.raw = raw
        self.top_header_end = header_lines
        self.parts_left = limits.max_parts
        self.max_level = min(limits.max_depth, _MAX_FAST_LEVEL)

    def entity(self, pos: int, bounds: tuple[bytes, ...], level: int) -> tuple[_ReadMessage, int]:
        """The entity at ``pos``, and where its body ends: at a line of ``bounds`` or EOF."""
        self.parts_left -= 1
        if level > self.max_level or self.parts_left < 0:
            raise _Unusual
        message, pos = self.headers(pos, bounds) or self.header_lines(pos, bounds)
        media = message.get_content_type()
        if media in ("message/delivery-status", "multipart/digest"):
            raise _Unusual
        maintype = media.split("/")[0]
        if maintype == "message":
            inner, end = self.entity(pos, bounds, level + 1)
            message.attach(inner)
            return message, end
        if maintype == "multipart":
            return message, self.multipart(message, pos, bounds, level)
        return message, self.next_bound(pos, bounds)

    def headers(self, pos: int, bounds: tuple[bytes, ...]) -> tuple[_ReadMessage, int] | None:
        """The entity with its header fields at ``pos``, and where its body starts.

        None if a line needs `header_lines`: a From line, a continuation line first, a
        field without a name, or a line starting with ``--`` (it may be a boundary).
        """
        raw = self.raw
        end = self.top_header_end if pos == 0 else _header_lines_end(raw, pos)
        fields = _fields(raw[pos:end].decode("ascii", "surrogateescape"))
        if fields is None:
            return None
        missing_separator = False
        if end == len(raw):
            body = end
        elif raw[end] in b"\r\n":
            body = self.line_end(end)  # after the blank line
        elif self.is_bound(end, bounds):
            body = end  # the parser's false EOF: a part with headers only
        else:
            body, missing_separator = end, True
        message = _ReadMessage(fields)
        if missing_separator:
            message.defects.append(MissingHeaderBodySeparatorDefect())
        return message, body

    def header_lines(self, pos: int, bounds: tuple[bytes, ...]) -> tuple[_ReadMessage, int]:
        """`headers` line by line, as the feedparser reads them."""
        raw = self.raw
        missing_separator = False
        lines: list[bytes] = []
        while pos < len(raw):
            end = self.line_end(pos)
            if self.is_bound(pos, bounds):
                break  # the parser's false EOF: a part with headers only
            if not _HEADER_LINE.match(raw, pos):
                if raw[pos] in b"\r\n":
                    pos = end
                else:
                    missing_separator = True
                break
            lines.append(raw[pos:end])
            pos = end
        unixfrom, fields = _header_fields(lines)
        message = _ReadMessage(fields)
        if unixfrom is not None:
            message.set_unixfrom(unixfrom)
        if missing_separator:
            message.defects.append(MissingHeaderBodySeparatorDefect())
        return message, pos

    def multipart(
        self, message: _ReadMessage, pos: int, bounds: tuple[bytes, ...], level: int
    ) -> int:
        """Reads the parts of ``message``; where its epilogue ends."""
        boundary = message.get_boundary()
        if not boundary or not boundary.isascii():
            raise _Unusual
        encoding = str(message.get("content-transfer-encoding", "8bit")).lower()
        if encoding not in ("7bit", "8bit", "binary"):
            raise _Unusual
        mark = boundary.encode("ascii")
        inner = (*bounds, mark)
        pos = self.next_bound(pos, inner)
        while True:
            if pos == len(self.raw) or self.is_bound(pos, bounds):
                raise _Unusual  # StartBoundaryNotFound or CloseBoundaryNotFound
            end = self.line_end(pos)
            if _bound_mark(self.raw[pos:end]) != mark:  # the close delimiter
                break
            pos = end
            if pos == len(self.raw) or self.is_bound(pos, inner):
                raise _Unusual  # repeated boundary lines, or an empty last part
            part, pos = self.entity(pos, inner, level + 1)
            message.attach(part)
        if not message.is_multipart():
            raise _Unusual  # the close delimiter before the first part
        return self.next_bound(end, bounds)

    def line_end(self, pos: int) -> int:
        newline = _NEWLINE.search(self.raw, pos)
        return newline.end() if newline else len(self.raw)

    def is_bound(self, pos: int, bounds: tuple[bytes, ...]) -> bool:
        """Whether the line at ``pos`` is a delimiter or close delimiter of ``bounds``."""
        if not bounds or not self.raw.startswith(b"--", pos):
            return False
        mark = _bound_mark(self.raw[pos : self.line_end(pos)])
        return mark in bounds or (mark[-2:] == b"--" and mark[:-2] in bounds)

    def next_bound(self, pos: int, bounds: tuple[bytes, ...]) -> int:
        """Where the next line that is one of ``bounds`` starts; the length if none.

        Such a line starts with ``--`` and one of the boundaries: searching for each of
        them skips through a body much faster than looking at every ``--``.
        """
        raw = self.raw
        first = len(raw)
        for bound in bounds:
            start = pos
            while (found := raw.find(b"--" + bound, start, first)) >= 0:
                if (found == 0 or raw[found - 1] in b"\r\n") and self.is_bound(found, bounds):
                    first = found
                    break
                start = found + 1
        return first


_FIELD = re.compile(
    r"([\041-\071\073-\176]+):[ \t]*([^\r\n]*(?:(?:\r\n|\r|\n)[ \t][^\r\n]*)*)(?:\r\n|\r|\n)?"
)
"""A header field and its continuation lines: its name, and its value as
``policy.header_source_parse`` takes it (leading blanks and the last line break off)."""
_FIELDS = re.compile(
    r"(?:[\041-\071\073-\176]+:[^\r\n]*(?:\r\n|\r|\n|\Z)(?:[ \t][^\r\n]*(?:\r\n|\r|\n|\Z))*)*"
)
"""Header lines that are all fields with a name: first lines and continuation lines."""


def _fields(lines: str) -> list[tuple[str, str]] | None:
    """Header lines (headerRE's) as ``policy.header_source_parse`` makes fields of them:
    (name, value) with the value's leading blanks and last line break off.

    None if one needs `_header_fields`: a From line, a line starting with a colon or with
    ``--`` (it may be a boundary), or a continuation line first.
    """
    if "\r" not in lines:
        eol = "\n"
    elif lines.count("\r\n") == lines.count("\r") == lines.count("\n"):
        eol = "\r\n"
    else:  # mixed line breaks
        dashes = lines.startswith("--") or "\n--" in lines or "\r--" in lines
        return _FIELD.findall(lines) if _FIELDS.fullmatch(lines) and not dashes else None
    fields: list[tuple[str, str]] = []
    for line in lines.split(eol):
        if line[:1] in (" ", "\t"):
            if not fields:
                return None
            name, value = fields[-1]
            fields[-1] = (name, value + eol + line)
        elif line.startswith(("From ", ":", "--")):
            return None
        elif line:  # not the end of the last line
            name, _, value = line.partition(":")
            fields.append((name, value.lstrip(" \t")))
    return fields


def _bound_mark(line: bytes) -> bytes:
    """What a ``--`` line says after its dashes, as the feedparser's boundary regex reads it."""
    return line[2:].rstrip(b"\r\n").rstrip(b" \t")


def _header_fields(lines: list[bytes]) -> tuple[str | None, list[tuple[str, str]]]:
    """``FeedParser._parse_headers`` for header blocks without defects: the From line at
    the start, and the fields as ``policy.header_source_parse`` splits them."""
    unixfrom = None
    fields: list[tuple[str, str]] = []
    field: list[bytes] = []
    for number, line in enumerate(lines):
        if line[:1] in (b" ", b"\t"):
            if not field:
                raise _Unusual  # FirstHeaderLineIsContinuationDefect
            field.append(line)
            continue
        if field:
            fields.append(_source_field(field))
            field = []
        if line.startswith(b"From "):
            if number:
                raise _Unusual  # MisplacedEnvelopeHeaderDefect, or the body's first line
            unixfrom = _decode(line.rstrip(b"\r\n"))
            continue
        if line[:1] == b":":
            raise _Unusual  # InvalidHeaderDefect: Missing header name
        field = [line]
    if field:
        fields.append(_source_field(field))
    return unixfrom, fields


def _source_field(lines: list[bytes]) -> tuple[str, str]:
    """One field from its lines, as ``policy.header_source_parse`` splits it."""
    name, _, value = lines[0].partition(b":")
    value = value.lstrip(b" \t") + b"".join(lines[1:])
    return _decode(name), _decode(value.rstrip(b"\r\n"))


def _decode(data: bytes) -> str:
    return data.decode("ascii", "surrogateescape")


class _Simple(str):
    """A header as ``policy.default``'s class decodes it, for values simple enough to read.

    Only what this module reads of a header object: its text, defects, addresses, date;
    and, remembered with the header, what the envelope makes of them (`_envelope_fast`).
    """

    defects: tuple[MessageDefect, ...] = ()
    _clean: str | None = None

    @property
    def clean(self) -> str:
        """``clean_text`` of the text."""
        if self._clean is None:
            self._clean = clean_text(self)
        return self._clean


class _SimpleAddresses(_Simple):
    addresses: tuple[str, ...] = ()
    _clean_addresses: tuple[str, ...] | None = None

    @property
    def clean_addresses(self) -> tuple[str, ...]:
        """``clean_text`` of each address."""
        if self._clean_addresses is None:
            self._clean_addresses = tuple(clean_text(a) for a in self.addresses)
        return self._clean_addresses


class _SimpleMime(_Simple):
    parameters: tuple[tuple[str, str], ...] = ()  # (name, value) as written, unquoted


class _SimpleDate(_Simple):
    datetime: _DateTime | None = None
    _utc: tuple[_DateTime | None] | None = None

    @property
    def utc(self) -> _DateTime | None:
        """The date in UTC, as `_Headers.sent_at` converts it."""
        if self._utc is None:
            self._utc = (_as_utc(self.datetime),)
        return self._utc[0]


_CACHED_VALUE_SIZE = 1 * KiB
_CACHE_SIZE = 2048


class _FastHeaders:
    """``policy.default``'s header factory, shared by all messages, with shortcuts.

    Header objects are immutable and depend only on the header's name and value, so they
    are remembered across messages (addresses, dates and content types repeat a lot), as
    `_Simple` copies: the stdlib's keep their parse trees (tens to hundreds of KiB each).
    Values that `_simple_header` can read skip the stdlib's header parser.
    """

    def __init__(self) -> None:
        self._classes = _HeaderCache()
        self._made: dict[tuple[str, str], str] = {}

    def __call__(self, name: str, value: str) -> str:
        key = (name.lower(), value)
        header = self._made.get(key)
        if header is None:
            header = _simple_header(key[0], value)
            if header is None:
                made = self._classes[name](name, value)
                header = _copy(made)
                if header is None:
                    return made
            if len(value) <= _CACHED_VALUE_SIZE:
                if len(self._made) >= _CACHE_SIZE:
                    self._made.clear()
                self._made[key] = header
        return header


def _copy(header: Any) -> _Simple | None:
    """What this module reads of a stdlib header object, without its parse tree; None if
    reading it raises (the header object itself then shows where)."""
    try:
        if isinstance(header, AddressHeader):
            addresses = _SimpleAddresses(header)
            addresses.addresses = tuple(str(address) for address in header.addresses)
            copy: _Simple = addresses
        elif isinstance(header, DateHeader):
            date = copy = _SimpleDate(header)
            date.datetime = header.datetime
        else:
            copy = _Simple(header)
        copy.defects = tuple(header.defects)
    except Exception:
        return None
    return copy


_FAST_POLICY = policy.default.clone(header_factory=_FastHeaders())

_NOT_SIMPLE = re.compile(r"=\?|[\x00-\x08\x0a-\x1f\x7f\ud800-\udfff]")
_ADDRESS_HEADERS = frozenset(("from", "to", "cc", "bcc"))


def _simple_header(name: str, value: str) -> _Simple | None:
    """What ``policy.default`` makes of a plain value, or None if that takes its parser.

    No encoded words, control characters (but tab) or undecodable bytes; Subject any such
    text; addresses plain ``addr@domain`` or ``Name <addr@domain>`` lists; dates anything
    ``parsedate_to_datetime`` reads; MIME type headers ``token; name=value`` parameters.
    """
    if _NOT_SIMPLE.search(value):
        return None
    if name == "subject":
        return _Simple(value)
    if name in _ADDRESS_HEADERS:
        return _simple_addresses(value)
    if name == "date":
        return _simple_date(value)
    if name in _MIME_VALUE:
        return _simple_mime(name, value)
    return None


_ATOM = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_DOT_ATOM = rf"{_ATOM}(?:\.{_ATOM})*"
_MAILBOX = re.compile(
    rf"""[ \t]*(?:
        (?:(?P<phrase>{_ATOM}(?:[ \t]+{_ATOM})*)|"(?P<quoted>[!#-\[\]-~]+(?:\ [!#-\[\]-~]+)*)")?
        [ \t]*<(?P<angle>{_DOT_ATOM}@{_DOT_ATOM})>
        |(?P<bare>{_DOT_ATOM}@{_DOT_ATOM})
    )[ \t]*(?:,|\Z)""",
    re.VERBOSE,
)
_WSP_RUN = re.compile(r"[ \t]+")
_SPECIALS = frozenset('()<>@,:;."[]\\')


def _simple_addresses(value: str) -> _SimpleAddresses | None:
    addresses: list[str] = []
    pos = 0
    while pos < len(value) or not addresses:
        found = _MAILBOX.match(value, pos)
        if found is None:
            return None
        pos = found.end()
        phrase, quoted, angle, bare = found.group("phrase", "quoted", "angle", "bare")
        if bare is not None:
            addresses.append(bare)
        elif phrase is not None:
            addresses.append(f"{_WSP_RUN.sub(' ', phrase)} <{angle}>")
        elif quoted is not None:
            name = f'"{quoted}"' if _SPECIALS.intersection(quoted) else quoted
            addresses.append(f"{name} <{angle}>")
        else:
            addresses.append(angle)
    if value.endswith(","):
        return None
    header = _SimpleAddresses(", ".join(addresses))
    header.addresses = tuple(addresses)
    return header


def _simple_date(value: str) -> _SimpleDate | None:
    if not value or not value.isascii():
        return None
    try:
        when = parsedate_to_datetime(value)
    except ValueError:
        header = _SimpleDate(value)
        header.defects = (InvalidDateDefect("Invalid date value or format"),)
        return header
    except Exception:
        return None
    try:
        header = _SimpleDate(format_datetime(when))
    except Exception:
        return None
    header.datetime = when
    return header


_TOKEN = r"[!#$&+\-.0-9A-Z^_`a-z{|}~]+"
_PARAMETER = re.compile(rf'[ \t]*;[ \t]*({_TOKEN})=(?:({_TOKEN})|"([ !#-\[\]-~]+)")[ \t]*')
_MIME_VALUE = {
    "content-type": re.compile(rf"[ \t]*{_TOKEN}/{_TOKEN}[ \t]*(?=;|\Z)"),
    "content-disposition": re.compile(rf"[ \t]*{_TOKEN}[ \t]*(?=;|\Z)"),
}


def _simple_mime(name: str, value: str) -> _SimpleMime | None:
    """A MIME type or disposition with plain ``name=value`` parameters.

    The stdlib's text of such a header is the value as written up to its first ``;``,
    then each parameter as ``name="value"``, separated by ``; ``.
    """
    head = _MIME_VALUE[name].match(value)
    if head is None:
        return None
    pos = head.end()
    parameters: list[tuple[str, str]] = []
    seen: set[str] = set()
    while pos < len(value):
        found = _PARAMETER.match(value, pos)
        if found is None or found[1].lower() in seen:  # duplicates are a defect
            return None
        seen.add(found[1].lower())
        parameters.append((found[1], found[2] or found[3]))
        pos = found.end()
    if not parameters:
        return _SimpleMime(value)
    text = "; ".join(f'{name}="{value}"' for name, value in parameters)
    header = _SimpleMime(f"{head.group()}; {text}")
    header.parameters = tuple(parameters)
    return header


# --- envelope ------------------------------------------------------------------------------


def _envelope(message: Message, defects: _Defects) -> Envelope:
    raw = _first_raw_values(message)
    headers = _Headers(raw, message.policy, defects)
    date = raw.get("date")
    return Envelope(
        subject=headers.text("subject"),
        from_=headers.text("from"),
        to=headers.addresses("to"),
        cc=headers.addresses("cc"),
        bcc=headers.addresses("bcc"),
        date=clean_text(_unfold(date)) if date is not None else None,
        sent_at=headers.sent_at(),
        message_id=next(iter(message_ids(raw.get("message-id"))), None),
        in_reply_to=next(iter(message_ids(raw.get("in-reply-to"))), None),
        references=message_ids(raw.get("references")),
    )


def _first_raw_values(message: Message) -> dict[str, str]:
    if isinstance(message, _ReadMessage):
        return {name: value for name, (_, value) in message.first.items()}
    values: dict[str, str] = {}
    for name, value in message.raw_items():
        values.setdefault(name.lower(), str(value))
    return values


class _Headers:
    """Envelope headers decoded by ``policy.default``, or from the raw value if that fails."""

    def __init__(self, raw: dict[str, str], parsing: Policy, defects: _Defects) -> None:
        self._raw = raw
        self._policy = parsing
        self._defects = defects

    def text(self, name: str) -> str:
        if name not in self._raw:
            return ""
        header = self._parsed(name)
        if header is not None:
            return clean_text(str(header))
        return _decode_raw(self._raw.get(name, ""))

    def addresses(self, name: str) -> tuple[str, ...]:
        if name not in self._raw:
            return ()
        header = self._parsed(name)
        try:
            if header is not None:
                return tuple(clean_text(str(a)) for a in header.addresses)
        except Exception as error:
            self._failed(name, error)
        pairs = getaddresses([_decode_raw(self._raw.get(name, ""))])
        return tuple(f"{n} <{a}>" if n and a else n or a for n, a in pairs if n or a)

    def sent_at(self) -> datetime | None:
        header = self._parsed("date")
        when = getattr(header, "datetime", None)
        try:
            if when is None and "date" in self._raw:
                when = parsedate_to_datetime(_unfold(self._raw["date"]))
        except (ValueError, TypeError, OverflowError, IndexError):
            return None
        return _as_utc(when)

    def _parsed(self, name: str) -> Any:
        value = self._raw.get(name)
        if value is None:
            return None
        if len(value) > ENVELOPE_FIELD_LIMIT:
            cut = value.rfind("\n", 0, ENVELOPE_FIELD_LIMIT)
            value = value[: cut if cut > 0 else ENVELOPE_FIELD_LIMIT]
            self._defects.add("HeaderTruncated", f"{name}: decoded its first {len(value)} bytes")
        try:
            header: Any = self._policy.header_fetch_parse(name, _utf8_header(value))
        except Exception as error:
            self._failed(name, error)
            return None
        self._defects.add_all(header.defects, header=name)
        return header

    def _failed(self, name: str, error: Exception) -> None:
        self._defects.add("HeaderDecodeFailure", f"{name}: {type(error).__name__}: {error}")


def _as_utc(when: object) -> datetime | None:
    try:
        if not isinstance(when, datetime):
            return None
        return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
    except (ValueError, TypeError, OverflowError, IndexError):
        return None


_ENVELOPE_FIELDS = ("subject", "from", "to", "cc", "bcc", "date")


def _envelope_fast(message: _ReadMessage, defects: _Defects) -> Envelope:
    """`_envelope` of a message whose envelope headers `_simple_header` reads without
    defects (the policy still makes each header object); any other by `_envelope`."""
    first = message.first
    fetch = message.policy.header_fetch_parse
    found: dict[str, Any] = {}
    for name in _ENVELOPE_FIELDS:
        field = first.get(name)
        if field is None:
            continue
        if len(field[1]) > ENVELOPE_FIELD_LIMIT:
            return _envelope(message, defects)
        try:
            header = fetch(name, _utf8_header(field[1]))
        except Exception:
            return _envelope(message, defects)
        if not isinstance(header, _Simple) or header.defects:
            return _envelope(message, defects)
        found[name] = header
    addresses: dict[str, tuple[str, ...]] = {}
    for name in ("to", "cc", "bcc"):
        listed = found.get(name)
        if listed is not None:
            if not isinstance(listed, _SimpleAddresses):
                return _envelope(message, defects)
            addresses[name] = listed.clean_addresses
    sent = found.get("date")
    if sent is not None and not (isinstance(sent, _SimpleDate) and sent.datetime is not None):
        return _envelope(message, defects)
    date = first.get("date")
    return Envelope(
        subject=found["subject"].clean if "subject" in found else "",
        from_=found["from"].clean if "from" in found else "",
        to=addresses.get("to", ()),
        cc=addresses.get("cc", ()),
        bcc=addresses.get("bcc", ()),
        date=clean_text(_unfold(date[1])) if date is not None else None,
        sent_at=sent.utc if sent is not None else None,
        message_id=_first_id(first.get("message-id")),
        in_reply_to=_first_id(first.get("in-reply-to")),
        references=message_ids(first["references"][1]) if "references" in first else (),
    )


def _first_id(field: tuple[str, str] | None) -> str | None:
    return next(iter(message_ids(field[1])), None) if field is not None else None


def _utf8_header(value: str) -> str:
    """Raw 8-bit header bytes that are valid UTF-8 (RFC 6532) as text; others unchanged."""
    if value.isascii():
        return value
    try:
        return value.encode("ascii", "surrogateescape").decode("utf-8")
    except UnicodeError:
        return value


def _unfold(value: str) -> str:
    if "\n" not in value and "\r" not in value:
        return value
    return _UNFOLD.sub("", value)


_UNFOLD = re.compile(r"\r\n|\r|\n")


def _decode_raw(value: str) -> str:
    text = _unfold(value)
    with contextlib.suppress(Exception):  # undecodable encoded words: keep the raw text
        text = str(make_header(decode_header(text)))
    return clean_text(text)


_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f]+")


def clean_text(text: str) -> str:
    """JSON-safe single-line text: raw 8-bit bytes decoded as UTF-8, controls become spaces."""
    if text.isascii():
        if text.isprintable():  # no control characters
            return text.strip()
    else:
        text = _repair_surrogates(text)
    return _CONTROL_CHARS.sub(" ", text).strip()


def _repair_surrogates(text: str) -> str:
    """Raw bytes the parser smuggled in as surrogates, decoded as UTF-8 (U+FFFD if not)."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeError:
        return text.encode("utf-8", "replace").decode("utf-8")


_MESSAGE_ID = re.compile(r"<([^<>]*)>")
_SIMPLE_ID = re.compile(r"[ \t]*<([!-;=?-~]+)>[ \t]*")  # what the general case makes "<id>"


def message_ids(value: str | None) -> tuple[str, ...]:
    """Message ids in order, each as ``<id>``, without duplicates.

    Without any ``<...>``, whitespace-separated tokens containing ``@`` are taken as ids.
    """
    if value is None:
        return ()
    simple = _SIMPLE_ID.fullmatch(value)
    if simple:
        return (f"<{simple[1]}>",)
    text = clean_text(_unfold(value))
    found = [m for m in _MESSAGE_ID.findall(text) if m.strip()]
    found = found or [token for token in text.split() if "@" in token]
    ids = ("<" + "".join(m.split()).strip("<>") + ">" for m in found)
    return tuple(dict.fromkeys(i for i in ids if i != "<>"))


def _content_type(message: Message, defects: _Defects) -> str:
    try:
        return message.get_content_type()
    except Exception as error:
        defects.add("HeaderDecodeFailure", f"content-type: {type(error).__name__}: {error}")
        return "text/plain"


# --- attachments ---------------------------------------------------------------------------


def _attachment_names(
    entities: list[tuple[Message, int]], defects: _Defects, remember: bool = False
) -> Iterator[str]:
    """A part with a file name or ``Content-Disposition: attachment`` is an attachment.

    Multipart containers are not, nor is message/external-body (its content is elsewhere).
    With ``remember``, what a part's two headers say is remembered across messages.
    """
    name_of = _remembered_attachment_name if remember else _attachment_name
    for part, _ in entities:
        try:
            content_type = _header(part, "content-type", defects)
            media = part.get_default_type() if content_type is None else _media_type(content_type)
            if media.startswith("multipart/") or media == "message/external-body":
                continue
            disposition = _header(part, "content-disposition", defects)
            name = name_of(part, disposition, content_type)
            if name is not None:
                yield name
        except Exception as error:
            defects.add("HeaderDecodeFailure", f"attachment: {type(error).__name__}: {error}")


def _attachment_name(part: Message, disposition: object, content_type: object) -> str | None:
    """The safe file name of an attachment; None if ``part`` is not one."""
    filename = part.get_filename()
    if filename is not None or _first_value(disposition) == "attachment":
        return sanitise_filename(str(filename or ""))
    return None


_ATTACHMENT_NAMES: dict[tuple[str | None, str | None], str | None] = {}


def _remembered_attachment_name(
    part: Message, disposition: object, content_type: object
) -> str | None:
    """`_attachment_name`, which reads nothing but the first Content-Disposition and
    Content-Type header of ``part`` (``get_filename`` and ``get_param`` read those)."""
    key = (
        None if disposition is None else str(disposition),
        None if content_type is None else str(content_type),
    )
    if key in _ATTACHMENT_NAMES:
        return _ATTACHMENT_NAMES[key]
    name = _attachment_name(part, disposition, content_type)
    if sum(len(text or "") for text in key) <= _CACHED_VALUE_SIZE:
        if len(_ATTACHMENT_NAMES) >= _CACHE_SIZE:
            _ATTACHMENT_NAMES.clear()
        _ATTACHMENT_NAMES[key] = name
    return name


def _header(part: Message, name: str, defects: _Defects) -> object:
    header = part.get(name)
    defects.add_all(getattr(header, "defects", ()), header=name)
    return header


def _first_value(header: object) -> str:
    """A header's value before any parameter, as Message.get_content_disposition reads it."""
    return str(header).partition(";")[0].strip().lower() if header is not None else ""


def _media_type(header: object) -> str:
    """The media type of a Content-Type header, as Message.get_content_type reads it."""
    value = _first_value(header)
    return value if value.count("/") == 1 else "text/plain"


_SEPARATORS = re.compile(r"[/\\]")
_SPACES = re.compile(r"\s+")
_DOTS = re.compile(r"\.{2,}")
_RESERVED = re.compile(r'[<>:"|?*]')
_DEVICES = frozenset(
    ["CON", "PRN", "AUX", "NUL"] + [f"{p}{n}" for p in ("COM", "LPT") for n in range(1, 10)]
)


def sanitise_filename(name: str) -> str:
    """A file name safe to offer for download and to write to any file system.

    Only the last path component; no NUL, CR, LF or other control or invisible format
    characters; no ``..``; no leading/trailing dots or spaces; no ``<>:"|?*``; not a
    Windows device name; at most 255 UTF-8 bytes, keeping the extension; ``attachment``
    when nothing is left.
    """
    text = unicodedata.normalize("NFC", _repair_surrogates(name))
    text = "".join(" " if ch.isspace() else ch for ch in text if _visible(ch))
    components = [c.strip(" .") for c in _SEPARATORS.split(text)]
    text = next((c for c in reversed(components) if c), "")
    text = _RESERVED.sub("_", _DOTS.sub(".", _SPACES.sub(" ", text)))
    if text.split(".", 1)[0].strip().upper() in _DEVICES:
        text = "_" + text
    return _truncate(text).strip(" .") or "attachment"


def _visible(ch: str) -> bool:
    return ch.isspace() or unicodedata.category(ch)[0] != "C"


def _truncate(text: str) -> str:
    if len(text.encode()) <= MAX_FILENAME_BYTES:
        return text
    stem, dot, extension = text.rpartition(".")
    if not dot or not stem or len(extension.encode()) > 16:
        stem, extension = text, ""
    suffix = "." + extension if extension else ""
    budget = MAX_FILENAME_BYTES - len(suffix.encode())
    return stem.encode()[:budget].decode("utf-8", "ignore").rstrip(" .") + suffix
