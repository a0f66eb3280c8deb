"""Modified UTF-7 (RFC 3501 section 5.1.3): how IMAP4rev1 names mailboxes outside ASCII."""

from __future__ import annotations

import base64
import re

_SHIFTED = re.compile(r"&([A-Za-z0-9+,]*)-")


def encode(name: str) -> str:
    out: list[str] = []
    run: list[str] = []

    def flush() -> None:
        if run:
            data = "".join(run).encode("utf-16-be")
            out.append("&" + base64.b64encode(data).decode().rstrip("=").replace("/", ",")
                       + "-")
            run.clear()

    for c in name:
        if 0x20 <= ord(c) <= 0x7E:
            flush()
            out.append("&-" if c == "&" else c)
        else:
            run.append(c)
    flush()
    return "".join(out)


def decode(name: str) -> str:
    if "&" not in name:
        return name

    def one(m: re.Match[str]) -> str:
        if not m.group(1):
            return "&"
        b64 = m.group(1).replace(",", "/")
        data = base64.b64decode(b64 + "=" * (-len(b64) % 4))
        return data.decode("utf-16-be")

    try:
        out = _SHIFTED.sub(one, name)
    except (ValueError, UnicodeDecodeError):
        raise ValueError(f"{name!r} is not modified UTF-7") from None
    if "&" in _SHIFTED.sub("", name):
        raise ValueError(f"{name!r} is not modified UTF-7")
    return out
