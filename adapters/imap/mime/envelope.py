"""ENVELOPE (RFC 3501 7.4.2) and the address lists it is made of, read from the header's
bytes (RFC 5322 groups, routes and comments; encoded words left as they are)."""

from __future__ import annotations

import re

from adapters.imap.mime.parts import Part
from adapters.imap.wire import nstring, plist


def envelope(part: Part) -> bytes:
    def value(name: str) -> bytes:
        v = part.get(name)
        return nstring(v) if v else b"NIL"

    from_ = addresses(part.get("from"))
    sender = addresses(part.get("sender")) or from_
    reply_to = addresses(part.get("reply-to")) or from_
    return plist([value("date"), value("subject"), from_ or b"NIL", sender or b"NIL",
                  reply_to or b"NIL", addresses(part.get("to")) or b"NIL",
                  addresses(part.get("cc")) or b"NIL", addresses(part.get("bcc")) or b"NIL",
                  value("in-reply-to"), value("message-id")])


_ADDR_TOKENS = re.compile(rb'"(?:[^"\\]|\\.)*"|\((?:[^()\\]|\\.)*\)|[<>@,;:]|[^\s"<>@,;:()]+',
                          re.S)


Address = tuple[str | None, str | None, str | None, str | None]  # name, adl, mailbox, host


def addresses(value: bytes | None) -> bytes:
    """An address list as IMAP's list of (name adl mailbox host); a group as
    (NIL NIL group NIL) ... (NIL NIL NIL NIL). Empty bytes when there is none."""
    found = parse_addresses(value)
    if not found:
        return b""
    return b"(" + b"".join(plist([nstring(name), nstring(adl),  # RFC 3501: no SP between
                                  b'""' if mailbox == "" else nstring(mailbox), nstring(host)])
                           for name, adl, mailbox, host in found) + b")"


def parse_addresses(value: bytes | None) -> list[Address]:
    """RFC 5322 address lists, groups and obsolete routes included; a comment after an
    address without a display name is its name (as Dovecot reads it)."""
    if not value:
        return []
    all_toks = _ADDR_TOKENS.findall(value)
    out: list[Address] = []
    i = 0
    group_open = False
    toks = [t for t in all_toks if not t.startswith(b"(")]
    comments_after: dict[int, bytes] = {}
    k = -1
    for t in all_toks:
        if t.startswith(b"("):
            comments_after.setdefault(k, t[1:-1])
        else:
            k += 1
    while i < len(toks):
        j = i
        while j < len(toks) and toks[j] not in (b",", b";", b":", b"<"):
            j += 1
        stop = toks[j] if j < len(toks) else b","
        words = toks[i:j]
        if stop == b":" and not group_open:
            out.append((None, None, _phrase(words), None))
            group_open = True
            i = j + 1
            continue
        if stop == b"<":
            end = toks.index(b">", j) if b">" in toks[j:] else len(toks)
            inside = toks[j + 1:end]
            route = None
            if b":" in inside:
                c = inside.index(b":")
                route = b"".join(inside[:c]).decode("latin-1")
                inside = inside[c + 1:]
            out.append(_address(_phrase(words) or None, route, inside))
            j = end + 1
            while j < len(toks) and toks[j] not in (b",", b";"):
                j += 1
            stop = toks[j] if j < len(toks) else b","
        elif words:
            comment = comments_after.get(j - 1)
            name = comment.decode("utf-8", "surrogateescape") if comment else None
            out.append(_address(name, None, words))
        if stop == b";" and group_open:
            out.append((None, None, None, None))
            group_open = False
        i = j + 1
    if group_open:
        out.append((None, None, None, None))
    return out


def _phrase(words: list[bytes]) -> str:
    parts = [w[1:-1].replace(b'\\"', b'"').replace(b"\\\\", b"\\") if w.startswith(b'"')
             else w for w in words]
    return b" ".join(parts).decode("utf-8", "surrogateescape")


def _address(name: str | None, route: str | None, spec: list[bytes]) -> Address:
    if b"@" in spec:
        at = len(spec) - 1 - spec[::-1].index(b"@")
        local, host = spec[:at], spec[at + 1:]
    else:
        local, host = spec, []
    mailbox = b"".join(local).decode("utf-8", "surrogateescape")
    domain = b"".join(host).decode("utf-8", "surrogateescape")
    if mailbox.startswith('"') and mailbox.endswith('"') and len(mailbox) > 1:
        mailbox = mailbox[1:-1]
    return name, route, mailbox, domain or None


