"""``import mbox`` pipelined (ADR 0098): a second process reads and checks, this one appends.

An import's main process used to read each message of the mbox, parse its ``From `` line,
hash it for its idempotency key, check (parse) it and then append the batch; a follower
process projects the read models (ADR 0027). Now a process forked for the import reads the
mbox, cuts it, reads each ``From `` line's date and ``Status:`` flags and checks each message
(``Store.check``: the parse, the facts, the command), ``batch`` at a time, and hands the
checked batches through a pipe; this process only looks up what already landed and appends.
Both work at once, the pipe holding at most about a batch between them. The reading process
also writes (and fsyncs) each batch's large payloads, through a payload store it opens
after the fork, and sends each such message with its payload's address: the append only
touches it (ADR 0104).

The idempotency key is the one every earlier import gave (``importer.mbox_key``), byte for
byte: ``mbox:{first}:{index}:{sha256[:32]}``, made in the reading process before the check.
(Taking the SHA-256 the check computes instead, and setting the key on the checked command
after it, was measured: the command's copy cost ~10 µs a message, the hash ~4.5 µs for the
bench's mail, off the critical path in either case.)

Resuming: what landed is a prefix of the file (batches land in order), so before the second
process starts this one hashes and looks up messages from the first while they are found
landed; the reading starts at the first that is not. Ctrl-C reaches the whole process group:
the reading process ignores it and ends when this one stops reading (its pipe closes); it is
a daemon, so it ends with this process in any case. With fewer than two usable cores, a
file of a single batch, or no ``fork``, the same steps run in this process.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import mmap
import multiprocessing
import os
import queue
import signal
import threading
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adapters.bootstrap.payloads import payload_store
from adapters.cli.import_mbox import check_mbox, from_line_date, mbox_flags, mbox_spans
from adapters.cli.import_source import header_date, mbox_key, target_key
from adapters.cli.importer import CheckedBatch, reject
from adapters.payloads import ClosingPayloads
from domain.errors import InvalidCommand, LetterlogError

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    from adapters.face import Store
    from domain.ports import PayloadStore

Entry = tuple[str, str, Any, str | None]
"""A message as the reader hands it: its name (``box.mbox#12``), its idempotency key (for the
target mailbox), its ``CheckedDelivery`` (None if refused) and why it was refused."""
Ahead = tuple[list[Entry], list[str]]
"""A batch of entries and the warnings to say before them (a doubtful ``From `` line)."""


AHEAD = 8
"""Checked batches the importing process holds ahead of its appends at most (about 0.7 MB
a batch of 100 messages of the bench's mail)."""


def _take(receiving: Connection, got: queue.Queue[Ahead | str | None | EOFError]) -> None:
    """The taker thread: each batch off the pipe into ``got``; at the end, the end (None),
    the reader's failure (its text) or an ``EOFError`` (the reader ended without either)."""
    while True:
        try:
            item = receiving.recv()
        except (EOFError, OSError):
            got.put(EOFError())
            return
        got.put(item)
        if not isinstance(item, tuple):
            return


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class MboxAhead:
    """An mbox file as a ``CheckingSource`` of ``importer.run_import``. ``warn``: told once
    (the first such line) when a ``From `` line's date is doubtful or unreadable."""

    def __init__(self, path: Path, warn: Callable[[str], None] | None = None) -> None:
        check_mbox(path)
        self.path = path
        self.warn = warn
        # whether the batches' large payloads are written (and fsynced) before they are
        # handed over (``importer.run_import`` then writes none ahead itself)
        self.payloads_written = False
        with open(path, "rb") as fh:
            self.data = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        self.spans = mbox_spans(self.data)
        self.total = len(self.spans)

    def close(self) -> None:
        with contextlib.suppress(BufferError):  # a view still held: the mapping goes with it
            self.data.close()

    def raw(self, index: int) -> bytes:
        start, stop = self.spans[index]
        return self.data[start:stop].partition(b"\n")[2]

    def checked_batches(self, store: Store, account: str, mailbox: str, batch: int,
                        rejected: list[dict[str, str]],
                        on_reject: Callable[[str, str], None] | None
                        ) -> Iterator[CheckedBatch]:
        batch = max(1, batch)
        first = hashlib.sha256(self.raw(0)).hexdigest()[:32] if self.total else ""
        landed = self._landed(store, account, mailbox, first)
        if landed:
            yield [], False, landed, landed
        if landed == self.total:
            return
        read = Reader(self, store, account, mailbox, first, landed, batch)
        forks = "fork" in multiprocessing.get_all_start_methods()
        forked = self.total - landed > batch and _usable_cores() >= 2 and forks
        self.payloads_written = forked  # the reading process writes them (ADR 0104)
        ahead = read.in_a_process() if forked else read.batches()
        try:
            for entries, warnings in ahead:
                for text in warnings:
                    if self.warn is not None:
                        self.warn(text)
                checked = []
                for name, _key, item, problem in entries:
                    if item is None:
                        reject(rejected, on_reject, name, problem or "refused")
                    else:
                        checked.append(item)
                yield checked, True, len(entries), 0
        finally:
            close = getattr(ahead, "close", None)
            if close is not None:
                close()

    def _landed(self, store: Store, account: str, mailbox: str, first: str) -> int:
        """How many messages from the first were found delivered (hashed and looked up, not
        parsed), up to the first that was not."""
        n = 0
        while n < self.total:
            key = target_key(mbox_key(first, n, self.raw(n)), mailbox)
            if key is None or not store.already_delivered(account, key):
                break
            n += 1
        return n


class Reader:
    """Reads and checks the messages of an ``MboxAhead`` from ``start`` on, a batch at a
    time: here (``batches``) or in a forked process (``in_a_process``)."""

    def __init__(self, source: MboxAhead, store: Store, account: str, mailbox: str,
                 first: str, start: int, batch: int) -> None:
        self.source = source
        self.store = store
        self.account = account
        self.mailbox = mailbox
        self.first = first
        self.start = start
        self.batch = batch

    def batches(self) -> Iterator[Ahead]:
        spans, data, path = self.source.spans, self.source.data, self.source.path
        warned = self.source.warn is None
        for at in range(self.start, len(spans), self.batch):
            entries: list[Entry] = []
            warnings: list[str] = []
            for n in range(at, min(at + self.batch, len(spans))):
                start, stop = spans[n]
                from_line, _, raw = data[start:stop].partition(b"\n")
                line = from_line.decode("latin-1").rstrip("\r")
                date, doubt = from_line_date(line)
                if doubt is not None and not warned:
                    warnings.append(f"{path}#{n + 1}: From line {line!r}: {doubt} (said for "
                                    f"the first such line only)")
                    warned = True
                entries.append(self._checked(f"{path}#{n + 1}", n, raw,
                                             date or header_date(raw)))
            yield entries, warnings

    def _checked(self, name: str, index: int, raw: bytes, date: Any) -> Entry:
        """The message checked, with its idempotency key (``importer.mbox_key``)."""
        key = target_key(mbox_key(self.first, index, raw), self.mailbox) or ""
        try:
            return name, key, self.store.check(
                account=self.account, mailbox=self.mailbox, raw=raw,
                flags=list(mbox_flags(raw)), internal_date=date, idempotency_key=key), None
        except LetterlogError as e:
            return name, key, None, str(e)

    def in_a_process(self) -> Iterator[Ahead]:
        """``batches`` from a forked process, through a pipe. A thread of this process
        takes them off the pipe as they come, up to ``AHEAD`` batches ahead, so the reader
        runs on while this process appends (a pipe alone holds less than a batch: the
        reader would wait for each of this process's appends, and fall behind whenever
        it shares its core with the follower)."""
        context = multiprocessing.get_context("fork")
        receiving, sending = context.Pipe(duplex=False)
        process = context.Process(target=self._send, args=(sending, receiving), daemon=True,
                                  name="letterlog-mbox-reader")
        process.start()
        sending.close()
        got: queue.Queue[Ahead | str | None | EOFError] = queue.Queue(AHEAD)
        taker = threading.Thread(target=_take, args=(receiving, got), daemon=True,
                                 name="letterlog-mbox-taker")
        taker.start()
        try:
            while True:
                item = got.get()
                if item is None:
                    break
                if isinstance(item, EOFError):
                    process.join(5)
                    raise InvalidCommand(
                        f"{self.source.path}: the process reading it ended early (exit code "
                        f"{process.exitcode}); run the same command again "
                        "to import the rest") from None
                if isinstance(item, str):  # the reader's own failure, as text
                    raise RuntimeError(f"reading {self.source.path} failed:\n{item}")
                yield item
        finally:
            if process.is_alive():
                process.terminate()  # its end of the pipe closes: the taker sees the end
            process.join()
            while taker.is_alive():  # a taker waiting for room is given it
                with contextlib.suppress(queue.Empty):
                    got.get(timeout=0.05)
            receiving.close()

    def _send(self, sending: Connection, receiving: Connection) -> None:
        """The reading process: Ctrl-C is this process's parent's to handle; a closed pipe
        (the parent stopped reading, or was killed) ends it quietly. Its copy of the
        reading end is closed first, or a killed parent would leave it waiting forever."""
        receiving.close()
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        gc.freeze()  # what the fork inherited is never collected here
        payloads: PayloadStore | None = None
        with contextlib.suppress(Exception):  # none: the appends write the payloads
            payloads = payload_store(self.store.settings)  # its own: opened after the fork
        try:
            for entries, warnings in self.batches():
                sending.send((self._written(entries, payloads), warnings))
            sending.send(None)
        except (BrokenPipeError, ConnectionResetError):
            return
        except BaseException:
            with contextlib.suppress(OSError):
                sending.send(traceback.format_exc())
        finally:
            sending.close()
            if isinstance(payloads, ClosingPayloads):
                payloads.close()

    def _written(self, entries: list[Entry], payloads: PayloadStore | None) -> list[Entry]:
        """``entries`` with the large messages' payloads written and fsynced (ADR 0104):
        each such ``CheckedDelivery`` carries its payload's address, which the importing
        process's append only touches. If the writes fail (a full disk for a moment), the
        entries go as they are: the append writes the payloads, or says why it cannot. A
        payload written here whose append never commits (a kill) is an orphan, which the
        unreferenced-payload purge collects."""
        checked = [item for _, _, item, _ in entries if item is not None]
        if payloads is None or not checked:
            return entries
        try:
            written = iter(self.store.store_payloads(checked, into=payloads))
        except Exception:
            return entries
        return [(name, key, item if item is None else next(written), problem)
                for name, key, item, problem in entries]
