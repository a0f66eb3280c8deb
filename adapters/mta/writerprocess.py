"""The LMTP server's writer in a process of its own (ADR 0114). The server's process speaks
LMTP and the lda's fast path on its event loop; a second process holds the store and
appends (``adapters.mta.writer.Writer``). The two no longer share one interpreter lock, so
with several connections at once the protocol and the append run on two cores.

``WriterProcess`` is the server's handle, on its event loop. The writer process is started
as ``python -P -m adapters.cli.mtawriter`` (a fresh interpreter: no SQLite connection and no
thread is inherited; ``-P``: never another ``adapters`` from the working directory) and talks
over two socket pairs:

- *requests and answers*: length-prefixed pickles, each request's messages' bytes sent
  after it as they are (one copy in each process, however large). The server writes
  requests through the loop's transport (never blocking the loop) and reads the answers on
  the loop; the writer process reads every request waiting, appends all their messages
  together (group commit: while it appends, the next ones gather), and answers each;
- *lda sockets*: a handed-off lda's client socket is passed over the second pair
  (``SCM_RIGHTS``) before the request that carries its message, so the writer checks that
  the client is still there right before the append, as it did in one process.

A writer process that dies (killed, out of memory) fails the requests it held with a
temporary answer (each message is either stored, and the MTA's retry is answered as a
duplicate, or not); the next request starts another.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import itertools
import logging
import os
import pickle
import signal
import socket
import struct
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from adapters.mta.delivery import MtaOptions, split_recipient
from adapters.mta.replies import Outcome, classify, temporary
from adapters.readside.follower import sigint_ignored

log = logging.getLogger("letterlog.lmtp")

WATCH = "watch"
"""An item's key for a handed-off lda's client socket (``Writer``'s ``_refusal`` checks it);
in a request, True: the socket itself follows on the second pair."""

GONE = temporary("the writer process went away; try again later")
"""The answer to each request a dead writer process held."""

_HEADER = struct.Struct("!I")
"""An answer's header: the length of its pickle."""

_REQUEST = struct.Struct("!IQ")
"""A request's header: the length of its pickled description, then of its messages' bytes
(read with the description in one piece when small: ``SMALL``)."""

SMALL = 1 << 20
"""Messages' bytes up to this size are read with their request's description in one
piece (then sliced: a copy of little); past it each message is read on its own, straight
into one bytes object."""

PR_SET_PDEATHSIG = 1
"""prctl(2): the signal this process gets when its parent ends."""


def _frame(message: Any) -> bytes:
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEADER.pack(len(body)) + body


def _request_parts(kind: str, rids: list[int], payload: Any) -> list[bytes]:
    """A request's frames: its description pickled, then each distinct message's bytes as
    they are (never copied into a pickle: a 40 MiB message stays one copy; the items of a
    message to several recipients share one). In the description each item's ``raw`` is
    the index of its message's bytes, and the bytes' lengths follow the payload."""
    blobs: list[bytes] = []
    if kind == "deliver":
        index: dict[int, int] = {}
        items = []
        for item in payload:
            raw = item["raw"]
            at = index.setdefault(id(raw), len(blobs))
            if at == len(blobs):
                blobs.append(raw)
            items.append({**item, "raw": at})
        payload = items
    body = pickle.dumps((kind, rids, payload, [len(b) for b in blobs]),
                        protocol=pickle.HIGHEST_PROTOCOL)
    return [_REQUEST.pack(len(body), sum(len(b) for b in blobs)) + body, *blobs]


def _frames(buffer: bytearray) -> Iterator[Any]:
    """The whole frames at the start of ``buffer``, unpickled and removed from it."""
    at = 0
    while len(buffer) - at >= _HEADER.size:
        (size,) = _HEADER.unpack_from(buffer, at)
        end = at + _HEADER.size + size
        if len(buffer) < end:
            break
        yield pickle.loads(memoryview(buffer)[at + _HEADER.size:end])
        at = end
    del buffer[:at]


class _Answers(asyncio.Protocol):
    """The server's end of one writer process: answers resolve the requests' futures."""

    def __init__(self, proc: subprocess.Popen[bytes], watches: socket.socket) -> None:
        self.proc = proc
        self.watches = watches
        self.transport: Any = None  # uvloop's or asyncio's, set by ``WriterProcess._start``
        self.waiting: dict[int, asyncio.Future[Any]] = {}
        self.buffer = bytearray()
        self.gone = False
        self.closed = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        for rid, answer in _frames(self.buffer):
            future = self.waiting.pop(rid, None)
            if future is not None and not future.done():  # not timed out meanwhile
                future.set_result(answer)

    def connection_lost(self, exc: Exception | None) -> None:
        self.gone = True
        self.watches.close()
        waiting, self.waiting = self.waiting, {}
        if waiting and self.proc.poll() is not None:
            log.warning("the writer process is gone (exit %s); %d requests answered with "
                        "a temporary failure", self.proc.returncode, len(waiting))
        for future in waiting.values():
            if not future.done():
                future.set_result(GONE)
        if not self.closed.done():
            self.closed.set_result(None)

    def request(self, kind: str, payload: Any, count: int, ids: Iterator[int],
                watches: Sequence[socket.socket] = ()) -> list[asyncio.Future[Any]]:
        loop = asyncio.get_running_loop()
        rids = [next(ids) for _ in range(count)]
        futures = [loop.create_future() for _ in rids]
        for watch in watches:  # before the request: read first by the writer process
            socket.send_fds(self.watches, [b"w"], [watch.fileno()])
        for part in _request_parts(kind, rids, payload):
            self.transport.write(part)  # held by reference until sent, not copied
        self.waiting.update(zip(rids, futures, strict=True))
        return futures


class WriterProcess:
    """The server's handle on its writer process, used on the event loop: ``deliver``,
    ``check_recipient`` (the store's answers), ``check_address`` (none needed), ``close``."""

    def __init__(self, data: Path, options: MtaOptions) -> None:
        self.data = data
        self.options = options
        self._ids = itertools.count()
        self._child: _Answers | None = None
        self._starting = asyncio.Lock()

    async def _answers(self) -> _Answers:
        """The running writer process's end; one started if there is none (or it died)."""
        async with self._starting:
            child = self._child
            if child is None or child.gone:
                if child is not None:
                    await asyncio.get_running_loop().run_in_executor(None, child.proc.wait)
                child = self._child = await self._start()
            return child

    async def _start(self) -> _Answers:
        ours, theirs = socket.socketpair()
        watches, their_watches = socket.socketpair()
        with theirs, their_watches, sigint_ignored():
            proc = subprocess.Popen(
                [sys.executable, "-P", "-m", "adapters.cli.mtawriter", str(theirs.fileno()),
                 str(their_watches.fileno()), str(os.getpid())],
                pass_fds=[theirs.fileno(), their_watches.fileno()], stdin=subprocess.DEVNULL)
        loop = asyncio.get_running_loop()
        transport, child = await loop.create_unix_connection(
            lambda: _Answers(proc, watches), sock=ours)
        child.transport = transport  # connection_made may come later (uvloop)
        for part in _request_parts("open", [], (os.fspath(self.data), self.options)):
            transport.write(part)
        return child

    async def _request(self, kind: str, payload: Any, count: int,
                       watches: Sequence[socket.socket] = ()) -> list[Any]:
        child = await self._answers()
        try:
            futures = child.request(kind, payload, count, self._ids, watches)
        except OSError:  # the pair broke as it died: answered as a dead one's requests are
            return [GONE] * count
        return list(await asyncio.gather(*futures))

    async def start(self) -> None:
        """Starts the writer process now (else the first request does)."""
        await self._answers()

    def check_address(self, recipient: str) -> Outcome | None:
        """A refusal of a ``recipient`` that names no account, or None (no store read)."""
        try:
            split_recipient(recipient, self.options.recipient_delimiter)
        except BaseException as e:  # noqa: BLE001 - every failure is a reply
            return classify(e)
        return None

    async def check_recipient(self, recipient: str) -> Outcome | None:
        """The store's answer for a recipient at RCPT: a refusal, or None."""
        [answer] = await self._request("rcpt", recipient, 1)
        return answer  # type: ignore[no-any-return]

    async def deliver(self, items: Sequence[dict[str, Any]]) -> list[Outcome]:
        """Each delivery's outcome (``Writer.deliver``'s items; a handed-off lda's client
        socket under ``WATCH``), appended with whatever else is waiting."""
        watches = [item[WATCH] for item in items if WATCH in item]
        sent = [{k: (True if k == WATCH else v) for k, v in item.items()} for item in items]
        return await self._request("deliver", sent, len(items), watches)

    async def close(self, timeout: float) -> None:
        """Closes the store (the writer process finishes what it holds first) and waits
        for the process; killed if it takes longer than ``timeout``."""
        child, self._child = self._child, None
        if child is None:
            return
        loop = asyncio.get_running_loop()
        if not child.gone:
            with contextlib.suppress(OSError, TimeoutError):
                await asyncio.wait_for(asyncio.gather(
                    *child.request("close", None, 1, self._ids)), timeout)
            if child.transport is not None:
                child.transport.close()
            await child.closed
        try:
            await asyncio.wait_for(loop.run_in_executor(None, child.proc.wait), timeout)
        except TimeoutError:
            child.proc.kill()
            await loop.run_in_executor(None, child.proc.wait)


# -- the writer process ----------------------------------------------------------------------

class _Requests:
    """The writer process's end of the requests. Each is read exactly, its messages'
    bytes straight into one bytes object each (no buffer ahead of them, no second copy)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.ended = False

    def _exactly(self, size: int) -> bytes | None:
        """``size`` bytes, or None at the end of the input."""
        data = self.sock.recv(size, socket.MSG_WAITALL) if size else b""
        if len(data) == size:
            return data
        parts, got = [data], len(data)
        while got < size:  # a signal or the end: MSG_WAITALL may return less
            more = self.sock.recv(size - got, socket.MSG_WAITALL)
            if not more:
                return None
            parts.append(more)
            got += len(more)
        return b"".join(parts)

    def one(self, head: bytes | None = None) -> tuple[str, list[int], Any] | None:
        """The next request (blocking until it is here; ``head``: its header, already
        read), or None at the end of the input."""
        head = head or self._exactly(_REQUEST.size)
        if head is None:
            return None
        size, blobs_size = _REQUEST.unpack(head)
        small = blobs_size <= SMALL
        whole = self._exactly(size + blobs_size if small else size)
        if whole is None:
            return None
        view = memoryview(whole)
        kind, rids, payload, sizes = pickle.loads(view[:size])
        blobs, at = [], size
        for n in sizes:
            blob = bytes(view[at:at + n]) if small else self._exactly(n)
            if blob is None:
                return None
            blobs.append(blob)
            at += n
        if kind == "deliver":
            for item in payload:
                item["raw"] = blobs[item["raw"]]
        return kind, rids, payload

    def waiting(self) -> list[tuple[str, list[int], Any]] | None:
        """At least one request (blocking until there is one) and every other one already
        arriving; None when the server has gone (end of input)."""
        first = None if self.ended else self.one()
        if first is None:
            return None
        got = [first]
        while True:
            try:
                head = self.sock.recv(_REQUEST.size, socket.MSG_DONTWAIT)
            except BlockingIOError:
                return got  # nothing more yet
            if not head:
                self.ended = True  # said by the next call
                return got
            if len(head) < _REQUEST.size:  # the rest of the header is on its way
                rest = self._exactly(_REQUEST.size - len(head))
                if rest is None:
                    return got
                head += rest
            more = self.one(head)
            if more is None:
                return got
            got.append(more)


def _die_with(server: int) -> None:
    """This process is killed when the server's process ends, whichever way: a killed
    server's lda clients then see their connection end (they hold their message: exit 75),
    as they did when the append ran in the server's own process."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")
    if os.getppid() != server:  # it ended before the line above
        os._exit(0)


def serve(fd: int, watches_fd: int, server: int) -> int:
    """The writer process: appends what the server hands it until it is told to close or
    the server is gone."""
    from adapters.mta.writer import Writer  # the store's code: in this process only

    _die_with(server)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the server's to act on: it closes us
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a whole service group's SIGTERM too
    sock = socket.socket(fileno=fd)
    watches = socket.socket(fileno=watches_fd)
    requests = _Requests(sock)
    first = requests.waiting()
    if first is None:
        return 0
    _, _, (data, options) = first.pop(0)
    writer = Writer(Path(data), options)
    closing: list[int] = []
    pending = first
    try:
        while not closing:
            if not pending:
                pending = requests.waiting() or []
                if not pending:
                    break
            answers: list[tuple[int, Any]] = []
            rids, items, lda = [], [], []
            for kind, ids, payload in pending:
                if kind == "close":
                    closing = ids
                elif kind == "rcpt":
                    answers.append((ids[0], writer.check_recipient(payload)))
                else:
                    for rid, item in zip(ids, payload, strict=True):
                        if item.get(WATCH):
                            _, [received], _, _ = socket.recv_fds(watches, 1, 1)
                            item[WATCH] = socket.socket(fileno=received)
                            lda.append(item[WATCH])
                        rids.append(rid)
                        items.append(item)
            pending = []
            if items:
                try:
                    answers.extend(zip(rids, writer.deliver(items), strict=True))
                finally:
                    for watch in lda:
                        watch.close()
            with contextlib.suppress(OSError):  # the server gone: it answers its MTA itself
                sock.sendall(b"".join(_frame(a) for a in answers))
    finally:
        writer.close()
    with contextlib.suppress(OSError):
        sock.sendall(b"".join(_frame((rid, None)) for rid in closing))
    return 0
