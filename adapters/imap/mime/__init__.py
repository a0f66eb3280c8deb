"""A message's MIME structure read from its stored bytes, for FETCH: ENVELOPE,
BODYSTRUCTURE / BODY and BODY[section] (RFC 3501 sections 6.4.5 and 7.4.2).

Every part is a range of offsets into the stored bytes (its header, its body), so a
section is a slice of the message exactly as it was delivered: nothing is re-serialised.
Header fields are read as bytes; their values are given to the client as they are (an
encoded-word stays encoded, as IMAP wants it).

One module per answer: ``parts`` (the parse), ``structure`` (BODYSTRUCTURE), ``envelope``
(ENVELOPE and address lists), ``sections`` (BODY[section]), ``binary`` (BINARY, RFC 3516).

May import: the standard library and ``adapters.imap.wire`` (IMAP's strings and lists);
each answer imports ``parts``, never the session or the server.
"""

from __future__ import annotations

from adapters.imap.mime.binary import (
    UnknownEncoding,
    binary_body,
    binary_form,
    binary_measure,
    binary_parts_as_base64,
    binary_section,
    decode_body,
)
from adapters.imap.mime.envelope import Address, addresses, envelope, parse_addresses
from adapters.imap.mime.parts import Part, parse
from adapters.imap.mime.sections import SectionError, part_at, section
from adapters.imap.mime.structure import bodystructure

__all__ = ["Address", "Part", "SectionError", "UnknownEncoding", "addresses", "binary_body",
           "binary_form", "binary_measure", "binary_parts_as_base64", "binary_section",
           "bodystructure", "decode_body", "envelope", "parse", "parse_addresses", "part_at",
           "section"]
