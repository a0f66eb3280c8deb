"""HBase calls: the Thrift1 connection pool, Thrift2 clients, retries and errors.

Errors
    Transport failures between this process and the Thrift gateway (``TTransportException``,
    ``OSError`` -- refused, reset, broken pipe, timeouts) are retried with exponential
    backoff (tenacity) on a fresh connection; that is safe because every write is
    idempotent, until ``retry_deadline_s`` has passed; then ``TableStoreUnavailable`` (a
    ``TableStoreError``) names the Thrift host and port. Each call waits at most
    ``timeout_ms`` for an answer (``LETTERLOG_HBASE_TIMEOUT``). Region-level trouble (region
    moving, server busy) is retried by the HBase client inside the gateway
    (``hbase.client.retries.number``); what still fails comes back as a ``TableStoreError``
    with HBase's message, ``TableNotFound`` or ``UnknownFamily``.
"""

from __future__ import annotations

import contextlib
import importlib
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from queue import Empty, SimpleQueue
from typing import TYPE_CHECKING, Any, TypeVar

import happybase
from tenacity import (
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    stop_after_delay,
    wait_exponential,
)
from thriftpy2.transport import TTransportException

from adapters.tables.hbase_thrift2 import thrift2_client
from projections.tablestore import (
    StoreClosed,
    TableNotFound,
    TableStoreError,
    TableStoreUnavailable,
    UnknownFamily,
)

# happybase registers its Thrift1 IDL (thriftpy2) as the module ``Hbase_thrift`` on import.
thrift1: Any = importlib.import_module("Hbase_thrift")

R = TypeVar("R")

TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (TTransportException, OSError, EOFError)


class Thrift2Clients:
    """Thrift2 clients for any number of threads: an idle stack of at most ``keep`` clients;
    a thread takes one (or opens a new one), gives it back when the call got an answer,
    and discards it after a transport failure."""

    def __init__(self, host: str, port: int, keep: int, timeout_ms: int) -> None:
        self._address = (host, port, timeout_ms)
        self._idle: SimpleQueue[Any] = SimpleQueue()
        self._keep = keep
        self._lock = threading.Lock()
        self._closed = False

    def take(self) -> Any:
        try:
            return self._idle.get_nowait()
        except Empty:
            host, port, timeout_ms = self._address
            return thrift2_client(host, port, timeout_ms=timeout_ms)

    def give(self, client: Any) -> None:
        with self._lock:
            if not self._closed and self._idle.qsize() < self._keep:
                self._idle.put(client)
                return
        client.close()

    @staticmethod
    def discard(client: Any) -> None:
        with contextlib.suppress(Exception):  # it is broken already
            client.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
        while True:
            try:
                self.discard(self._idle.get_nowait())
            except Empty:
                return


def error_message(error: BaseException) -> str:
    raw = getattr(error, "message", None)
    if isinstance(raw, bytes):
        return raw.decode("utf-8", "replace")
    return str(raw if raw is not None else error)


def first_line(text: str) -> str:
    return text.strip().splitlines()[0][:300] if text.strip() else "(no message)"


@dataclass(frozen=True, slots=True)
class TableInfo:
    """A logical table as HBase holds it: its name, its physical name, its families."""

    name: str
    physical: bytes
    families: frozenset[bytes]


class HBaseParts:
    """What every part of ``HBaseTableStore`` (``store.py``) works on: the store sets these
    attributes; the parts (calls, schema, reads, writes) are mixed into it and use each
    other's steps (named here for the type checker only)."""

    host: str
    port: int
    thrift2_port: int | None
    table_prefix: str
    _physical_prefix: bytes
    _timeout_ms: int
    _retries: int
    _retry_deadline: float
    _write_concurrency: int
    _acquire_timeout: float
    _thrift2_batch_cells: int
    _lock: threading.Lock
    _tables: dict[str, TableInfo]
    _executor: ThreadPoolExecutor | None
    _closed: bool
    _pool: happybase.ConnectionPool | None
    _t2: Any
    _clients2: Thrift2Clients | None

    if TYPE_CHECKING:
        def _where(self, *, thrift2: bool = False) -> str: ...

        def _call(self, op: str, fn: Callable[[Any], R], table: str | None = None) -> R: ...

        def _call2(self, op: str, fn: Callable[[Any], R], table: str) -> R: ...

        def _forget(self, name: str) -> None: ...

        def _table(self, name: str) -> TableInfo: ...

        def table_exists(self, name: str) -> bool: ...


class HBaseCalls(HBaseParts):
    """Runs Thrift calls with retries and maps HBase's answers to the port's errors
    (used by the other parts of ``HBaseTableStore``)."""

    def _where(self, *, thrift2: bool = False) -> str:
        if thrift2:
            return f"HBase Thrift2 server at {self.host}:{self.thrift2_port}"
        return f"HBase Thrift server at {self.host}:{self.port}"

    def _with_retries(self, op: str, fn: Callable[[], R], where: str | None = None) -> R:
        retrying = Retrying(
            retry=retry_if_exception_type(TRANSPORT_ERRORS),
            stop=stop_after_attempt(self._retries + 1) | stop_after_delay(self._retry_deadline),
            wait=wait_exponential(multiplier=0.05, min=0.05, max=2.0),
            reraise=True,
        )
        started = time.monotonic()
        try:
            for attempt in retrying:
                with attempt:
                    return fn()
        except TRANSPORT_ERRORS as error:
            attempts = retrying.statistics.get("attempt_number", "?")
            raise TableStoreUnavailable(
                f"{where or self._where()} is unreachable or not answering ({op}: {attempts} "
                f"attempts in "
                f"{time.monotonic() - started:.1f} s, LETTERLOG_HBASE_TIMEOUT "
                f"{self._timeout_ms / 1000:g} s): "
                f"{type(error).__name__}: {first_line(error_message(error))}"
            ) from error
        raise AssertionError("unreachable")  # pragma: no cover

    def _call(self, op: str, fn: Callable[[Any], R], table: str | None = None) -> R:
        """Run ``fn(thrift_client)`` on a pooled connection, with retries and error mapping."""
        if self._closed or self._pool is None:
            raise StoreClosed(f"table store {self!r} is closed")
        pool = self._pool

        def once() -> R:
            with pool.connection(timeout=self._acquire_timeout) as conn:
                try:
                    return fn(conn.client)
                except (thrift1.IOError, thrift1.IllegalArgument) as error:
                    # an answer from HBase: the connection is fine, keep it in the pool
                    failure: BaseException = error
            raise self._translate(failure, table) from failure

        try:
            return self._with_retries(op, once)
        except happybase.NoConnectionsAvailable as error:
            raise TableStoreUnavailable(
                f"{self._where()}: no pooled connection free within {self._acquire_timeout} s"
            ) from error

    def _call2(self, op: str, fn: Callable[[Any], R], table: str) -> R:
        """Run ``fn(thrift2_client)`` with retries and error mapping (as ``_call``)."""
        clients = self._clients2
        if self._closed or clients is None:
            raise StoreClosed(f"table store {self!r} is closed")
        answers = (self._t2.TIOError, self._t2.TIllegalArgument)

        def once() -> R:
            client = clients.take()
            try:
                result = fn(client)
            except answers as error:
                # an answer from HBase: the connection is fine, keep it
                clients.give(client)
                failure: BaseException = error
            except BaseException:
                clients.discard(client)
                raise
            else:
                clients.give(client)
                return result
            raise self._translate(failure, table, thrift2=True) from failure

        return self._with_retries(op, once, self._where(thrift2=True))

    def _translate(
        self, error: BaseException, table: str | None, *, thrift2: bool = False
    ) -> TableStoreError:
        text = error_message(error)
        if "TableNotFoundException" in text or "TableNotEnabledException" in text:
            if table is not None:
                self._forget(table)
            return TableNotFound(f"table {table!r} does not exist")
        if "NoSuchColumnFamilyException" in text:
            if table is not None:
                self._forget(table)
            return UnknownFamily(f"table {table!r}: {first_line(text)}")
        return TableStoreError(
            f"{self._where(thrift2=thrift2)}: {type(error).__name__}: {first_line(text)}"
        )
