"""Attachments: which parts of a message are, and their names (made safe by ``filenames``)."""

from __future__ import annotations

from collections.abc import Iterator
from email.message import Message

from domain.rfc5322.defects import Defects
from domain.rfc5322.filenames import sanitise_filename
from domain.rfc5322.headers import CACHE_SIZE, CACHED_VALUE_SIZE


def attachment_names(
    entities: list[tuple[Message, int]], defects: Defects, remember: bool = False
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
            defects.add("HeaderDecodeFailure", error=error)


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
    if sum(len(text or "") for text in key) <= CACHED_VALUE_SIZE:
        if len(_ATTACHMENT_NAMES) >= CACHE_SIZE:
            _ATTACHMENT_NAMES.clear()
        _ATTACHMENT_NAMES[key] = name
    return name


def _header(part: Message, name: str, defects: Defects) -> object:
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
