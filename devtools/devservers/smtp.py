"""One SMTP transaction, as a test hands a message to a real MTA's smtpd."""

from __future__ import annotations

import re
import smtplib
from collections.abc import Sequence

__all__ = ["submit"]

_EOL_RE = re.compile(rb"\r\n|\r|\n")


def submit(host: str, port: int, sender: str, recipients: Sequence[str], raw: bytes) -> bytes:
    """MAIL, RCPT for each recipient, DATA; returns the server's answer to DATA.

    Line ends are made CRLF first, as SMTP wants (smtplib sends bytes as they are: a bare
    LF message would gain an empty last line from the CRLF smtplib ends it with)."""
    raw = _EOL_RE.sub(b"\r\n", raw)
    eight_bit = any(b > 0x7F for b in raw)
    with smtplib.SMTP(host, port, timeout=60) as smtp:
        smtp.ehlo("client.letterlog.test")
        code, resp = smtp.mail(sender, ["BODY=8BITMIME"] if eight_bit else [])
        if code != 250:
            raise smtplib.SMTPSenderRefused(code, resp, sender)
        for rcpt in recipients:
            code, resp = smtp.rcpt(rcpt)
            if code not in (250, 251):
                raise smtplib.SMTPRecipientsRefused({rcpt: (code, resp)})
        code, resp = smtp.data(raw)
        if code != 250:
            raise smtplib.SMTPDataError(code, resp)
    return resp
