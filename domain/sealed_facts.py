"""What of a message's description may stay outside the seal, and what goes inside (ADR 0081).

The log is immutable: anything derived from a message's bytes that an event keeps in plain
text outlives the message's erasure. Two such things used to: the top-level media type
(``facts.content_type``, e.g. ``application/x-acme-invoice``: a vendor, a product, an
account's habits) and the message's SHA-256 (with the size, a low-entropy message, a login
code, is recovered by guessing: 4,712 guesses, 12 ms). Now:

- ``facts.content_type`` outside the seal is one word of a fixed vocabulary
  (``reduced_media_type``); the message's own media type, when the vocabulary changed it, is
  in the sealed part (``personal["content_type"]``);
- the digest of a message is in the sealed part only (``personal["sha256"]``); the event's
  ``sha256`` field is empty (ADR 0081 for an inline message; ADR 0099 for a stored one, whose
  event names its payload by ``address``, a random name the payload store forgets with the
  bytes).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MEDIA_TYPES = frozenset({
    "text/plain", "text/html", "text/calendar", "text/enriched", "text/rfc822-headers",
    "multipart/mixed", "multipart/alternative", "multipart/related", "multipart/signed",
    "multipart/encrypted", "multipart/report", "multipart/digest", "multipart/parallel",
    "message/rfc822", "message/delivery-status", "message/disposition-notification",
    "message/partial", "message/external-body", "message/global",
    "application/pkcs7-mime", "application/pgp-encrypted", "application/octet-stream",
    "application/pdf", "application/ms-tnef",
})
"""Media types common to mail in general (RFC 2045-2049, 1847, 3462, 3798, 5751, 6532, 3156):
kept as they are, naming nothing about one sender."""

TOP_LEVEL = frozenset({"text", "multipart", "message", "application", "image", "audio",
                       "video", "font", "model", "haptics"})
"""The registered top-level types (IANA): any other media type keeps only its top level."""

OTHER = "other/other"


def reduced_media_type(media_type: str) -> str:
    """``media_type`` as it may stand outside the seal: itself if in ``MEDIA_TYPES``, else
    ``<top-level>/other`` for a registered top level, else ``other/other``."""
    media = media_type.lower()
    if media in MEDIA_TYPES:
        return media
    top = media.partition("/")[0]
    return f"{top}/other" if top in TOP_LEVEL else OTHER


def is_reduced(media_type: object) -> bool:
    return isinstance(media_type, str) and (
        media_type in MEDIA_TYPES or media_type == OTHER
        or (media_type.endswith("/other") and media_type[:-6] in TOP_LEVEL))


def reduce_facts(facts: Mapping[str, Any]) -> dict[str, Any]:
    """``facts`` with its ``content_type`` reduced (the upcaster of events stored before)."""
    found = dict(facts)
    media = found.get("content_type")
    if isinstance(media, str):
        found["content_type"] = reduced_media_type(media)
    return found


def sealed_description(sha256: str, media_type: str) -> dict[str, Any]:
    """What the sealed part adds to the envelope: the message's digest, the media type when
    the vocabulary changed it."""
    found: dict[str, Any] = {}
    if sha256:
        found["sha256"] = sha256
    if media_type and reduced_media_type(media_type) != media_type:
        found["content_type"] = media_type
    return found


def digest(sha256: str, personal: Mapping[str, Any]) -> str:
    """A message's SHA-256 from its event: the plain field (an event written before ADR
    0099: a stored message's, or before ADR 0081 any), else the sealed one ("" once its key
    is destroyed)."""
    if sha256:
        return sha256
    found = personal.get("sha256", "") if personal else ""
    return found if isinstance(found, str) else ""


def media_type(facts: Mapping[str, Any], personal: Mapping[str, Any]) -> str:
    """A message's media type: the sealed one if the vocabulary reduced it, else the plain."""
    found = personal.get("content_type") if personal else None
    if isinstance(found, str) and found:
        return found
    plain = facts.get("content_type", "")
    return plain if isinstance(plain, str) else ""
