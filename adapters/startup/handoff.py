"""The lda's fast path: hand the message to a running ``letterlog lmtp`` server of the same
data directory, over the unix socket it keeps there (``DATA/lda.sock``), instead of
importing the application and opening the store in this process (ADR 0060).

This module is the client half, and what ``letterlog`` runs first for an ``lda`` command
line: it imports the standard library's ``os`` and ``sys`` (already loaded by the
interpreter) and the ``_socket`` extension alone, so a delivery costs this process little
more than the interpreter's start. The server half is ``adapters.mta.handoffserver`` (``Handoff``):
its writer delivers the message with the store already open, with the lda's own options,
envelope and idempotency key (queue id, recipient and content, as ``lda`` makes it), and its
answer becomes lda's exit status and its one RFC 3463 line on standard error.

``handoff(argv)`` returns None, having sent no message, whenever it cannot be sure the
server delivers exactly as ``lda`` would: a command line it does not parse (help, a usage
error, ``--as``), no server listening, a server that refuses (another data directory,
other ``LETTERLOG_*`` settings, shutting down). The caller then runs ``lda`` as before.
Once the message is sent, every failure is a temporary one (75): the server gone before it
answered, no answer in time. A client that dies (Postfix's time limit kills it) closes the
connection; the server starts no append for a client that is gone.

The protocol: frames of a 4-byte big-endian length and a payload. The client sends the
request (``key=value`` fields separated by NUL), the server answers ``ok<NUL>MAX_SIZE`` or
``no<NUL>REASON``; the client sends the message as it reads it, in frames of at most
``CHUNK`` bytes, and an empty frame at its end (at most MAX_SIZE bytes in all: past that the
client closes the connection and answers 5.3.4 itself); the server answers
``EXIT<NUL>LINE`` (LINE: the RFC 3463 code and the text). So the client holds one chunk at a
time, whatever the message's size (issue 42, item 7).
"""

from __future__ import annotations

import os
import sys

from adapters.startup.ldaoptions import LDA_OPTIONS

SOCKET_NAME = "lda.sock"
VERSION = "2"  # 2: the message in chunks
GRACE = 10.0
"""Seconds past the delivery's deadline the server waits for an append in progress (as
``Deadline.grace``); the client waits that and a little more before it gives up (75)."""
HEADER_LIMIT = 1 << 16
CHUNK = 1 << 16
"""Bytes the client reads from standard input and sends at a time."""
IGNORED_SETTINGS = frozenset({
    # what does not change how a message is delivered, or is the request's own field
    "LETTERLOG_DATA", "LETTERLOG_ACCOUNTS_MUST_EXIST", "LETTERLOG_LOCK_TIMEOUT",
    "LETTERLOG_METRICS_PORT", "LETTERLOG_STREAM_INSTANCE", "LETTERLOG_SYSLOG_SOCKET",
})
EXIT_STATUSES = frozenset({0, 64, 65, 67, 75, 77})

_ROOT_FLAGS = frozenset({"--json", "--bytes"})
_VALUES = {option: field for field, (option, value) in LDA_OPTIONS.items() if value}
_FLAGS = {option: field for field, (option, value) in LDA_OPTIONS.items() if not value}
_TRUE = frozenset({"1", "true", "t", "yes", "y", "on"})
_FALSE = frozenset({"0", "false", "f", "no", "n", "off"})


def settings_environment(environ: dict[str, str] | os._Environ[str]) -> str:
    """The ``LETTERLOG_*`` variables that shape a delivery, one string (compared by the
    server with its own)."""
    return "\n".join(sorted(f"{k}={v}" for k, v in environ.items()
                            if k.startswith("LETTERLOG_") and k not in IGNORED_SETTINGS))


def parse(argv: list[str]) -> dict[str, str] | None:
    """The request of an ``lda`` command line (``letterlog``'s arguments), or None for any
    line this parser does not take as ``lda`` with options it knows (the full command line
    parser then reads it, and answers a usage error as it always did)."""
    fields: dict[str, str] = {"detail_mailbox": "0", "envelope_headers": "0",
                              "timeout": "300", "recipient_delimiter": "+", "json": "0"}
    data = None
    words = iter(argv)
    command = False
    for word in words:
        name, eq, value = word.partition("=")
        if not command:
            if word == "lda":
                command = True
            elif name == "--data":
                data = value if eq else next(words, None)
                if data is None:
                    return None
            elif word in _ROOT_FLAGS:
                fields["json"] = "1" if word == "--json" else fields["json"]
            else:
                return None
        elif word in _FLAGS:
            fields[_FLAGS[word]] = "1"
        elif word in _ROOT_FLAGS:
            fields["json"] = "1" if word == "--json" else fields["json"]
        elif name in _VALUES:
            got = value if eq else next(words, None)
            if got is None:
                return None
            fields[_VALUES[name]] = got
        else:
            return None
    if not command or "recipient" not in fields:
        return None
    try:
        if not float(fields["timeout"]) >= 1.0:
            return None
    except ValueError:
        return None
    if "accounts_must_exist" not in fields:
        given = os.environ.get("LETTERLOG_ACCOUNTS_MUST_EXIST", "").strip().lower()
        if given and given not in _TRUE | _FALSE:
            return None
        fields["accounts_must_exist"] = "1" if given in _TRUE else "0"
    data = data or os.environ.get("LETTERLOG_DATA") or "letterlog-data"
    try:
        fields["data"] = os.path.realpath(data)
    except OSError:
        return None
    fields["settings"] = settings_environment(os.environ)
    fields["version"] = VERSION
    return fields


def encode(fields: dict[str, str]) -> bytes:
    return "\0".join(f"{k}={v}" for k, v in fields.items()).encode("utf-8", "surrogateescape")


def decode(payload: bytes) -> dict[str, str]:
    text = payload.decode("utf-8", "surrogateescape")
    return dict(part.partition("=")[::2] for part in text.split("\0") if part)


def frame(payload: bytes) -> bytes:
    return len(payload).to_bytes(4, "big") + payload


def _receive(sock: object, limit: int = HEADER_LIMIT) -> bytes | None:
    """One frame, or None at the end of the connection."""
    head = _exactly(sock, 4)
    if head is None:
        return None
    size = int.from_bytes(head, "big")
    if size > limit:
        return None
    return _exactly(sock, size)


def _exactly(sock: object, size: int) -> bytes | None:
    parts: list[bytes] = []
    while size:
        chunk = sock.recv(min(size, 1 << 16))  # type: ignore[attr-defined]
        if not chunk:
            return None
        parts.append(chunk)
        size -= len(chunk)
    return b"".join(parts)


def read_start(fd: int) -> tuple[bytes, bool]:
    """The start of the message on ``fd``: read until it holds more than blanks (after an
    mbox ``From `` line), or to its end; and whether that was the end."""
    head = b""
    while True:
        chunk = os.read(fd, CHUNK)
        if not chunk:
            return head, True
        head += chunk
        if not nothing_to_deliver(head) or len(head) > CHUNK * 16:
            return head, False


def send_message(sock: object, fd: int, head: bytes, ended: bool, limit: int) -> bool:
    """Sends ``head`` and the rest of ``fd`` in frames of at most ``CHUNK`` bytes, then the
    empty frame that ends the message; False (the end frame not sent: the server stores
    nothing) as soon as it passes ``limit`` bytes."""
    size = 0
    pending = head
    while True:
        for at in range(0, len(pending), CHUNK):
            part = pending[at:at + CHUNK]
            size += len(part)
            if size > limit:
                return False
            sock.sendall(frame(part))  # type: ignore[attr-defined]
        if ended:
            break
        pending = os.read(fd, CHUNK)
        ended = not pending
    sock.sendall(frame(b""))  # type: ignore[attr-defined]
    return True


NOTHING_ON_INPUT = ("4.3.0 letterlog: no message on standard input (empty or blank); "
                    "try again later")
"""lda's answer to empty input: a broken wrapper, not a message to bounce (ADR 0067)."""


def nothing_to_deliver(raw: bytes) -> bool:
    """Whether ``raw`` holds no message at all: empty, blank, or an mbox ``From `` line
    alone. Postfix never hands that over (it adds a ``Received`` header to every message):
    whatever ran lda lost the message, and a retry may bring it."""
    if raw.startswith(b"From "):
        end = raw.find(b"\n")
        raw = raw[end + 1:] if end >= 0 else b""
    return not raw or raw.isspace()


def _answer(status: int, line: str, as_json: bool) -> int:
    """lda's answer: a failure's line on stderr (Postfix's DSN); a success's on stdout
    (Postfix's log records it: the message's letterlog id), or as JSON."""
    if status:
        os.write(2, (line + "\n").encode("ascii", "replace"))
    elif not as_json:
        os.write(1, (line + "\n").encode("ascii", "replace"))
    else:
        import json  # local: a --json answer alone

        code, _, text = line.partition(" ")
        sys.stdout.write(json.dumps({"status": code, "text": text}) + "\n")
        sys.stdout.flush()
    return status


def as_store_owner(data: str) -> str | None:
    """Run as root (Postfix's ``mailbox_command``, a shell, a wrapper: a common mistake),
    become the owner of the data directory before anything is read or written, as
    ``dovecot-lda`` switches to the user's uid: files root made in the store would be
    unreadable by its owner. Returns None when this process may go on (not root, now the
    owner, a store that root owns, or no directory to look at: lda then answers 4.3.2
    itself), else the 4.3.0 line to exit 75 with."""
    if os.geteuid() != 0:
        return None
    try:
        st = os.stat(data)
    except OSError:
        return None
    if st.st_uid == 0:
        return None
    try:
        try:
            import pwd  # local: an lda run as root alone

            os.initgroups(pwd.getpwuid(st.st_uid).pw_name, st.st_gid)
        except KeyError:  # an owner with no account: no supplementary groups
            os.setgroups([])
        os.setgid(st.st_gid)
        os.setuid(st.st_uid)
    except OSError as e:
        return (f"4.3.0 letterlog lda runs as root and cannot become the store's owner "
                f"(uid {st.st_uid}: {e.strerror}); run it as that user (pipe(8): "
                f"user=OWNER in master.cf)")
    if os.geteuid() != st.st_uid or os.getegid() != st.st_gid:
        return "4.3.0 letterlog lda could not become the store's owner; run it as that user"
    return None


def handoff(argv: list[str], *, fd: int = 0) -> int | None:
    """Delivers the message on ``fd`` through the data directory's LMTP server and returns
    lda's exit status, or None when the caller is to run ``lda`` itself (nothing was sent,
    nothing was read from ``fd``)."""
    import time  # local: a hand-off alone, not every importer of this module

    started = time.monotonic()
    fields = parse(argv)
    if fields is None:
        return None
    refused = as_store_owner(fields["data"])
    if refused is not None:
        return _answer(75, refused, False)
    import _socket  # local: a hand-off alone (the C module, without socket.py)

    timeout = float(fields["timeout"])
    as_json = fields.pop("json") == "1"
    path = os.path.join(fields["data"], SOCKET_NAME)
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(min(5.0, timeout))
        try:
            sock.connect(path)
            sock.sendall(frame(encode(fields)))
            reply = _receive(sock)
        except OSError:  # no server, another user's, a stale socket, no answer in time
            return None
        kind, _, value = (reply or b"").decode("ascii", "replace").partition("\0")
        if kind != "ok" or not value.isdigit():
            return None  # refused: nothing was read from fd, lda runs here
        limit = int(value)
        head, ended = read_start(fd)
        if ended and nothing_to_deliver(head):
            return _answer(75, NOTHING_ON_INPUT, False)
        left = timeout - (time.monotonic() - started)
        sock.settimeout(max(left, 0.0) + GRACE + 2.0)
        try:
            if not send_message(sock, fd, head, ended, limit):
                return _answer(65, f"5.3.4 message too large: more than {limit} bytes "
                               f"(max_message_size={limit})", False)
            answer = _receive(sock)
        except TimeoutError:
            return _answer(75, f"4.3.0 delivery timed out after {timeout:g} s (store busy or "
                           "slow); try again later", False)
        except OSError as e:
            answer = None
            why = e.strerror or type(e).__name__
        else:
            why = "the connection closed"
        status, _, line = (answer or b"").decode("utf-8", "replace").partition("\0")
        if answer is None or not status.isdigit() or int(status) not in EXIT_STATUSES:
            return _answer(75, f"4.3.0 letterlog: the lmtp server stopped while delivering "
                           f"({why}); try again later", False)
        return _answer(int(status), line, as_json)
    finally:
        sock.close()
