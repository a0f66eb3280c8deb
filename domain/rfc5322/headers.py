"""Header objects as ``policy.default`` makes them, made directly for plain values and
remembered across messages (the stdlib's header parser is most of a parse's cost)."""

from __future__ import annotations

import re
from datetime import datetime
from email import policy
from email.errors import InvalidDateDefect, MessageDefect
from email.headerregistry import AddressHeader, BaseHeader, DateHeader, HeaderRegistry
from email.utils import format_datetime, parsedate_to_datetime
from typing import Any, ClassVar

from domain.rfc5322.limits import KiB
from domain.rfc5322.text import as_utc, clean_text

_DateTime = datetime


class HeaderCache(HeaderRegistry):
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



class Simple(str):
    """A header as ``policy.default``'s class decodes it, for values simple enough to read.

    Only what this module reads of a header object: its text, defects, addresses, date;
    and, remembered with the header, what the envelope makes of them (`envelope_fast`).
    """

    defects: tuple[MessageDefect, ...] = ()
    _clean: str | None = None

    @property
    def clean(self) -> str:
        """``clean_text`` of the text."""
        if self._clean is None:
            self._clean = clean_text(self)
        return self._clean


class SimpleAddresses(Simple):
    addresses: tuple[str, ...] = ()
    _clean_addresses: tuple[str, ...] | None = None

    @property
    def clean_addresses(self) -> tuple[str, ...]:
        """``clean_text`` of each address."""
        if self._clean_addresses is None:
            self._clean_addresses = tuple(clean_text(a) for a in self.addresses)
        return self._clean_addresses


class SimpleMime(Simple):
    parameters: tuple[tuple[str, str], ...] = ()  # (name, value) as written, unquoted


class SimpleDate(Simple):
    datetime: _DateTime | None = None
    _utc: tuple[_DateTime | None] | None = None

    @property
    def utc(self) -> _DateTime | None:
        """The date in UTC, as `_Headers.sent_at` converts it."""
        if self._utc is None:
            self._utc = (as_utc(self.datetime),)
        return self._utc[0]


CACHED_VALUE_SIZE = 1 * KiB
CACHE_SIZE = 2048


class _FastHeaders:
    """``policy.default``'s header factory, shared by all messages, with shortcuts.

    Header objects are immutable and depend only on the header's name and value, so they
    are remembered across messages (addresses, dates and content types repeat a lot), as
    `Simple` copies: the stdlib's keep their parse trees (tens to hundreds of KiB each).
    Values that `simple_header` can read skip the stdlib's header parser.
    """

    def __init__(self) -> None:
        self._classes = HeaderCache()
        self._made: dict[tuple[str, str], str] = {}

    def __call__(self, name: str, value: str) -> str:
        key = (name.lower(), value)
        header = self._made.get(key)
        if header is None:
            header = simple_header(key[0], value)
            if header is None:
                made = self._classes[name](name, value)
                header = _copy(made)
                if header is None:
                    return made
            if len(value) <= CACHED_VALUE_SIZE:
                if len(self._made) >= CACHE_SIZE:
                    self._made.clear()
                self._made[key] = header
        return header


def _copy(header: Any) -> Simple | None:
    """What this module reads of a stdlib header object, without its parse tree; None if
    reading it raises (the header object itself then shows where)."""
    try:
        if isinstance(header, AddressHeader):
            addresses = SimpleAddresses(header)
            addresses.addresses = tuple(str(address) for address in header.addresses)
            copy: Simple = addresses
        elif isinstance(header, DateHeader):
            date = copy = SimpleDate(header)
            date.datetime = header.datetime
        else:
            copy = Simple(header)
        copy.defects = tuple(header.defects)
    except Exception:
        return None
    return copy


FAST_POLICY = policy.default.clone(header_factory=_FastHeaders())

_NOT_SIMPLE = re.compile(r"=\?|[\x00-\x08\x0a-\x1f\x7f\ud800-\udfff]")
_ADDRESS_HEADERS = frozenset(("from", "to", "cc", "bcc"))


def simple_header(name: str, value: str) -> Simple | None:
    """What ``policy.default`` makes of a plain value, or None if that takes its parser.

    No encoded words, control characters (but tab) or undecodable bytes; Subject any such
    text; addresses plain ``addr@domain`` or ``Name <addr@domain>`` lists; dates anything
    ``parsedate_to_datetime`` reads; MIME type headers ``token; name=value`` parameters.
    """
    if _NOT_SIMPLE.search(value):
        return None
    if name == "subject":
        return Simple(value)
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


def _simple_addresses(value: str) -> SimpleAddresses | None:
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
    header = SimpleAddresses(", ".join(addresses))
    header.addresses = tuple(addresses)
    return header


def _simple_date(value: str) -> SimpleDate | None:
    if not value or not value.isascii():
        return None
    try:
        when = parsedate_to_datetime(value)
    except ValueError:
        header = SimpleDate(value)
        header.defects = (InvalidDateDefect("Invalid date value or format"),)
        return header
    except Exception:
        return None
    try:
        header = SimpleDate(format_datetime(when))
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


def _simple_mime(name: str, value: str) -> SimpleMime | None:
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
        return SimpleMime(value)
    text = "; ".join(f'{name}="{value}"' for name, value in parameters)
    header = SimpleMime(f"{head.group()}; {text}")
    header.parameters = tuple(parameters)
    return header
