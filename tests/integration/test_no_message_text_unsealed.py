"""No text of a message's headers reaches an event outside the seal (issue 27, item 2).

Every corpus message is delivered and then moved (``Delivered`` and ``Moved`` both carry
the message's facts); every event is then read back as stored, its ``personal`` part (the
one sealed field) left out, and its other fields searched for any piece of any header value
of the message longer than six characters: the subject, display names, addresses, file
names (raw and decoded), continuation lines, anything a defect string might quote.
"""

from __future__ import annotations

import email
import re
from collections.abc import Iterator
from email import policy
from email.header import decode_header, make_header
from pathlib import Path
from typing import Any

import pytest

from adapters.embedded import Letterlog
from adapters.eventlog.reader import row_pages
from adapters.eventlog.transcoder import unpackb
from domain.sealed_facts import is_reduced
from tests.factories import corpus_messages

pytestmark = pytest.mark.slow

ACCOUNT = "k@q.test"
SHORTEST = 7  # pieces of header text longer than six characters are searched for
_FIELD_NAME = re.compile(r"^[!-9;-~]+:")
_SPLIT = re.compile(r"[\s;,<>\"'()=?:\[\]{}\\]+")


def _header_lines(raw: bytes) -> Iterator[str]:
    """The lines of every header block (the message's and each MIME part's, found after a
    boundary line), as text: a field's value without its name, any other line whole."""
    in_header = True
    for line in raw.decode("utf-8", "replace").splitlines():
        if not line.strip():
            in_header = False
        elif line.startswith("--"):
            in_header = True
        elif in_header:
            found = _FIELD_NAME.match(line)
            yield line[found.end():] if found else line


def _decoded_values(raw: bytes) -> Iterator[str]:
    """Every header value of every part as the email package decodes it, with each part's
    file name and parameter values."""
    message = email.message_from_bytes(raw, policy=policy.compat32)
    for part in message.walk():
        for _, value in part.items():
            text = str(value)
            yield text
            try:
                yield str(make_header(decode_header(text)))
            except Exception:  # noqa: BLE001, S112 - undecodable: its raw text is searched
                continue
        for getter in (part.get_filename, part.get_params):
            try:
                found: Any = getter()
            except Exception:  # noqa: BLE001, S112 - a broken header: its lines are searched
                continue
            if isinstance(found, str):
                yield found
            for item in found if isinstance(found, list) else ():
                yield from (str(v) for v in item if v)


def field_names(raw: bytes) -> set[str]:
    """The header field names the message uses (a defect names its header on purpose)."""
    text = raw.decode("utf-8", "replace")
    return {m[:-1].lower() for m in re.findall(r"(?m)^[!-9;-~]+:", text)}


def header_pieces(raw: bytes) -> set[str]:
    """Pieces of the message's header text longer than six characters (but the message's
    field names)."""
    pieces: set[str] = set()
    for text in (*_header_lines(raw), *_decoded_values(raw)):
        text = text.replace("\ufffd", " ")
        pieces.update(p for p in _SPLIT.split(text) if len(p) >= SHORTEST)
        whole = " ".join(text.split())
        if len(whole) >= SHORTEST:
            pieces.add(whole)
    names = field_names(raw)
    return {p for p in pieces if p.lower() not in names}


def unsealed_text(state: Any) -> Iterator[str]:
    """Every string in a stored event's state but its sealed ``personal`` part (and the
    topic of its aggregate's class, which a creation event names)."""
    if isinstance(state, dict):
        for name, value in state.items():
            if name not in ("personal", "originator_topic"):  # sealed; a class's topic
                yield from unsealed_text(value)
    elif isinstance(state, list | tuple | set | frozenset):
        for value in state:
            yield from unsealed_text(value)
    elif isinstance(state, str):
        yield state


def leaks(store: Letterlog, pieces: dict[Any, set[str]]) -> dict[str, list[str]]:
    """Per message: the pieces of its header text found in an unsealed field of its events
    (a piece of one word as a word there, split as the header text was; a longer piece
    anywhere). The media type in ``facts.content_type`` is recorded on purpose: not searched."""
    found: dict[str, list[str]] = {}
    for rows in row_pages(store.log):
        for _, originator_id, _, topic, stored in rows:
            state = unpackb(stored)
            message = pieces.get(str(originator_id).replace("-", ""))
            if message is None:
                continue
            name, searched = message
            content_type = (state.get("facts") or {}).get("content_type", "")
            assert not content_type or is_reduced(content_type), (topic, content_type)
            text = "\n".join(unsealed_text(state))
            words = set(_SPLIT.split(text))
            hits = sorted(p for p in searched if p.lower() != content_type
                          and (p in words if " " not in p else p in text))
            if hits:
                found.setdefault(name, []).extend(f"{topic.rsplit('.', 1)[-1]}: {h!r}"
                                                  for h in hits)
    return found


def test_no_header_text_of_any_corpus_message_is_outside_the_seal(corpus: Path,
                                                                   tmp_path: Path) -> None:
    pieces: dict[Any, tuple[str, set[str]]] = {}
    with Letterlog.open(tmp_path / "data", durability="normal") as store:
        store.create_mailbox(ACCOUNT, "Archive", create_account=True)
        for name, raw in corpus_messages(corpus):
            d = store.deliver(account=ACCOUNT, raw=raw)
            store.move(d.message_id, "Archive")
            pieces[d.message_id.hex] = (name, header_pieces(raw))
        assert len(pieces) >= 100
        found = leaks(store, pieces)
    assert found == {}, "header text outside the seal:\n" + "\n".join(
        f"{name}: {hits}" for name, hits in sorted(found.items()))


def test_the_search_finds_header_text_outside_the_seal(tmp_path: Path) -> None:
    """The search itself: a file name put where an unsealed field is is found."""
    raw = (b"From: Ada <ada@example.org>\r\nSubject: hello\r\nMIME-Version: 1.0\r\n"
           b"Content-Type: text/plain; name=\"secret-plans.txt\"\r\n\r\nhi\r\n")
    pieces = header_pieces(raw)
    assert {"secret-plans.txt", "ada@example.org"} <= pieces
    with Letterlog.open(tmp_path / "data", durability="normal") as store:
        d = store.deliver(account=ACCOUNT, raw=raw, labels=["secret-plans.txt"])
        found = leaks(store, {d.message_id.hex: ("m", pieces)})
    assert found and all("secret-plans.txt" in hit for hit in found["m"])
