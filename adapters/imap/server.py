"""The IMAP server: listening (plain with STARTTLS, and implicit TLS), logging users in
against the user directory, and watching the log for changes.

One store (the administrator's, opened by the entry point) serves every session; each
session acts through ``store.as_user(user)``. Every call on the store runs on one thread
(``call``): the store's connections stay on the thread that opened them, and the sessions'
protocol work stays on the event loop. A watcher reads the log's last position every
``WATCH_SECONDS``; when it moves (a delivery by lmtp, a command of another process or host)
the read models catch up once and every IDLE session is woken, so a change anywhere reaches
an idling client within about a second, at one cheap query per server, not per session.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import ssl
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from adapters.caller import CallerView
from adapters.face import Store
from adapters.imap.recent import RecentClaims
from adapters.imap.session import SETTLE_SECONDS, Session
from adapters.imap.urlauth import UrlKeys
from domain.errors import AccountNotFound, InvalidCommand
from domain.values import normalise_address

T = TypeVar("T")

log = logging.getLogger("letterlog.imap")

WATCH_SECONDS = 0.25



@dataclass(frozen=True)
class Options:
    listen: tuple[str, int] | None
    listen_tls: tuple[str, int] | None = None
    tls_context: ssl.SSLContext | None = None
    plaintext_auth: bool = False
    failure_delay: float = 2.0
    max_command: int = 64 << 20


class Server:
    def __init__(self, store: Store, directory: Any, options: Options) -> None:
        self.store = store
        self.directory = directory
        self.options = options
        self.tls_context = options.tls_context
        self.plaintext_auth = options.plaintext_auth
        self.max_command = options.max_command
        self.executor = ThreadPoolExecutor(1, thread_name_prefix="letterlog-imap-store")
        self.auth_executor = ThreadPoolExecutor(4, thread_name_prefix="letterlog-imap-auth")
        self.changed = asyncio.Event()
        self._caught_up = -1
        self.lagging = store.settings.table_store == "hbase"
        self.changed_at = 0.0  # when (time.monotonic) the watcher saw the log change
        self.sessions: set[asyncio.Task[Any]] = set()
        self.recent = RecentClaims(store.settings.data)
        self.url_keys = UrlKeys(store.settings.data)
        self.ports: list[int] = []

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, partial(fn, *args, **kwargs))

    def catch_up(self) -> int:
        """On the store's thread: the log's last position, the read models caught up to it."""
        head = int(self.store.max_position())
        if head != self._caught_up:
            self.store.catch_up()
            self._caught_up = head
        return head

    @staticmethod
    def _mailbox_key(account: str, name: str, uidvalidity: int) -> str:
        return f"{account}\0{name}\0{uidvalidity}"

    def recent_from(self, sel: Any) -> int:
        return self.recent.first(self._mailbox_key(sel.account, sel.name, sel.uidvalidity))

    def recent_first(self, account: str, name: str, uidvalidity: int) -> int:
        return self.recent.first(self._mailbox_key(account, name, uidvalidity))

    def claim_recent(self, sel: Any, uids: list[int], *, claim: bool) -> set[int]:
        """\\Recent: of ``uids``, those recent to ``sel``'s session (``recent``)."""
        return self.recent.claim(self._mailbox_key(sel.account, sel.name, sel.uidvalidity),
                                 uids, claim=claim)

    async def authenticate(self, user: str, password: str, peer: str) -> CallerView | None:
        """The store acting as ``user`` if the directory accepts the password, else None
        after ``failure_delay`` seconds (logged with the user name and the peer, never the
        password)."""
        loop = asyncio.get_running_loop()
        try:
            found = await loop.run_in_executor(self.auth_executor, self.directory.authenticate,
                                               user, password)
        except Exception as error:  # noqa: BLE001 - a directory down: a failed login, logged
            log.warning("imap: login of %r from %s: the directory failed: %s", user, peer,
                        error)
            found = None
        if found is None:
            log.warning("imap: login failed for %r from %s", user, peer)
            await asyncio.sleep(self.options.failure_delay)
            return None
        log.info("imap: %s logged in from %s", found.name, peer)
        return await self.call(self._session_store, found.name, found.groups)

    def _session_store(self, user: str, groups: frozenset[str]) -> CallerView:
        """The store as ``user``; a user named by an address gets its account and INBOX on
        its first login (as Dovecot makes INBOX; subscribed), as a delivery would open them."""
        try:
            address = normalise_address(user)
        except InvalidCommand:
            address = None
        if address is not None:
            try:
                self.store.mailbox_list(address)
            except AccountNotFound:  # opened, with INBOX subscribed
                self.store.subscribe(address, "INBOX", create_account=True)
        view = self.store.as_user(user, groups)
        if not isinstance(view, CallerView):
            raise TypeError(f"as_user gave {type(view).__name__}, not the caller's view")
        return view

    def face_of(self, user: str) -> CallerView:
        """On the store's thread: the store acting as ``user`` (the owner of a URLAUTH URL:
        its rights apply to what the URL reads), its groups asked of the directory."""
        view = self.store.as_user(user)
        if not isinstance(view, CallerView):
            raise TypeError(f"as_user gave {type(view).__name__}, not the caller's view")
        return view

    async def watch(self) -> None:
        last = await self.call(self.catch_up)
        while True:
            await asyncio.sleep(WATCH_SECONDS)
            try:
                head = await self.call(self.catch_up)
            except Exception as error:  # noqa: BLE001 - keep watching through an outage
                log.warning("imap: reading the log's position failed: %s", error)
                continue
            now = time.monotonic()
            if head != last:
                last, self.changed_at = head, now
            elif not (self.lagging and now - self.changed_at < SETTLE_SECONDS):
                continue
            self.changed.set()  # wakes IDLE sessions; in scale-out, for a while after
            self.changed = asyncio.Event()

    def settling(self, read_at: float) -> bool:
        """Whether a listing read at ``read_at`` may miss what the workers are projecting."""
        return self.lagging and read_at - self.changed_at < SETTLE_SECONDS

    async def _session(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                       tls: bool) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.sessions.add(task)
        try:
            await Session(self, reader, writer, tls=tls).run()
        except asyncio.CancelledError:
            pass  # the server is stopping: the connection closes below
        except Exception:
            log.exception("imap: a session failed")
        finally:
            self.sessions.discard(task)
            with contextlib.suppress(Exception):
                writer.close()

    async def serve(self, ready: Callable[[list[int]], None] | None = None,
                    sockets: tuple[socket.socket | None, socket.socket | None] = (None, None)
                    ) -> None:
        """Serves until SIGTERM or SIGINT; ``sockets``: listening sockets made (and shared
        with other processes) by the caller, else this server binds its own."""
        servers = []
        limit = 1 << 20
        plain, tls = sockets
        if plain is not None or self.options.listen is not None:
            where = {"sock": plain} if plain is not None else dict(
                zip(("host", "port"), self.options.listen, strict=True))  # type: ignore[arg-type]
            servers.append(await asyncio.start_server(
                lambda r, w: self._session(r, w, False), limit=limit, **where))
        if tls is not None or self.options.listen_tls is not None:
            where = {"sock": tls} if tls is not None else dict(
                zip(("host", "port"), self.options.listen_tls, strict=True))  # type: ignore[arg-type]
            servers.append(await asyncio.start_server(
                lambda r, w: self._session(r, w, True), ssl=self.tls_context, limit=limit,
                **where))
        self.ports = [s.sockets[0].getsockname()[1] for s in servers]
        watcher = asyncio.ensure_future(self.watch())
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        log.warning("imap: listening on %s", ", ".join(
            f"{s.sockets[0].getsockname()[0]}:{p}" for s, p in zip(servers, self.ports,
                                                                     strict=True)))
        if ready is not None:
            ready(self.ports)
        try:
            await stop.wait()
        finally:
            for s in servers:
                s.close()
            watcher.cancel()
            for task in list(self.sessions):
                task.cancel()
            await asyncio.gather(*self.sessions, return_exceptions=True)
            self.executor.shutdown(wait=True)
            self.recent.close()
            self.url_keys.close()
            self.auth_executor.shutdown(wait=False, cancel_futures=True)
