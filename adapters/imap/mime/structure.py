"""BODYSTRUCTURE and BODY (RFC 3501 7.4.2): the parts' types, parameters, sizes and
lines, and the extension data (disposition, language, location)."""

from __future__ import annotations

from collections.abc import Callable

from adapters.imap.mime.envelope import envelope
from adapters.imap.mime.parts import Part, _params, _uncomment
from adapters.imap.wire import nstring, plist


def _param_list(params: list[tuple[str, str]]) -> bytes:
    if not params:
        return b"NIL"
    return plist([nstring(k) + b" " + nstring(v) for k, v in params])


def _lines(body: bytes) -> int:
    return body.count(b"\n") + (1 if body and not body.endswith(b"\n") else 0)


def bodystructure(part: Part, extended: bool = True,
                  measure: Callable[[Part], tuple[int, int]] | None = None) -> bytes:
    """``measure``: each part's size and lines in another form of the message than its
    bytes (URLFETCH's BODYPARTSTRUCTURE of BINARY data: ``binary_measure``)."""
    if part.maintype == "multipart":
        out = b"".join(bodystructure(c, extended, measure) for c in part.children)
        out += b" " + nstring(part.subtype.upper())
        if extended:
            out += b" " + _param_list(part.params) + b" " + _extension(part)
        return b"(" + out + b")"
    enc = part.get("content-transfer-encoding")
    fields = [nstring(part.maintype.upper()), nstring(part.subtype.upper()),
              _param_list(part.params), nstring(part.get("content-id")),
              nstring(part.get("content-description")),
              nstring(enc.decode("latin-1").strip().upper() if enc else "7BIT")]
    size, lines = measure(part) if measure else (part.end - part.body_start, _lines(part.body))
    fields.append(str(size).encode())
    if part.message is not None:
        fields += [envelope(part.message), bodystructure(part.message, extended, measure),
                   str(lines).encode()]
    elif part.maintype == "text":
        fields.append(str(lines).encode())
    if extended:
        fields += [nstring(part.get("content-md5")), _extension(part)]
    return plist(fields)


def _extension(part: Part) -> bytes:
    """Disposition, language and location (the extension data after MD5 / parameters)."""
    disposition = part.get("content-disposition")
    if disposition:
        text = _uncomment(disposition.decode("latin-1"))
        kind = text.split(";", 1)[0].strip()
        disp = plist([nstring(kind.upper()), _param_list(_params(text[len(kind):] if ";" in
                                                                  text else ""))])
    else:
        disp = b"NIL"
    language = part.get("content-language")
    if language:
        langs = [x.strip() for x in _uncomment(language.decode("latin-1")).split(",")
                 if x.strip()]
        lang = plist([nstring(x) for x in langs]) if len(langs) > 1 else nstring(langs[0])
    else:
        lang = b"NIL"
    location = part.get("content-location")
    return b" ".join([disp, lang, nstring(location)])


