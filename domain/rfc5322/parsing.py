"""The stdlib parser's tree of a message, fed a chunk at a time within the parse's time
budget (the ``parse_seconds`` limit); a parser failure is a recorded defect, never raised."""

from __future__ import annotations

import time
from email import policy
from email.feedparser import BytesFeedParser
from email.message import EmailMessage
from email.policy import EmailPolicy

from domain.rfc5322.defects import Defects
from domain.rfc5322.scan import header_block
from domain.rfc5322.windows import ParseWindow

PARSE_CHUNK = 64 * 1024
"""The stdlib parser is fed this much at a time; the time budget is checked in between."""


def parse_in_chunks(
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
        return parse_in_chunks(raw, window.cut(header_block(raw)[1], "max_depth"), deadline,
                               defects, parsing)
    except Exception as error:  # the parser is meant never to raise; keep the bytes anyway
        defects.add("ParserFailure", error=error)
        return EmailMessage(policy=policy.default), window
