"""The connection under every command: the session's state, its reading of commands and
their dispatch by state, its replies, and its calls on the store (refusals become NO).

The command families (``login``, ``selecting``, ``mailboxes``, ...) are mixed into
``Session`` over ``SessionCore``; what one family uses of another is declared here for the
type checker."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from adapters.imap import mime
from adapters.imap.mailbox import Entry, Selected
from adapters.imap.search import Query
from adapters.imap.session.words import ANSWERED, AUTOLOGOUT, AUTOLOGOUT_UNAUTHENTICATED, log
from adapters.imap.wire import LITERAL_AT_END, Atom, BadCommand, No, Token, tokens
from domain.errors import (
    InvalidCommand,
    InvalidState,
    LetterlogError,
    MailboxExists,
    MailboxNotFound,
    MessageNotFound,
    NotFound,
    PermissionDenied,
    QuotaExceeded,
)

if TYPE_CHECKING:
    import ssl

    from adapters.caller import CallerView
    from adapters.imap.urlauth import UrlKeys


class Server(Protocol):
    """What a session asks of its server (``adapters.imap.server.Server``): the options, the
    store's calls and catching up, the recent-flag claims, logging in."""

    tls_context: ssl.SSLContext | None
    plaintext_auth: bool
    max_command: int
    changed: asyncio.Event
    lagging: bool
    url_keys: UrlKeys

    async def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any: ...

    def catch_up(self) -> int: ...

    def recent_from(self, sel: Any) -> int: ...

    def recent_first(self, account: str, name: str, uidvalidity: int) -> int: ...

    def claim_recent(self, sel: Any, uids: list[int], *, claim: bool) -> set[int]: ...

    async def authenticate(self, user: str, password: str, peer: str) -> CallerView | None: ...

    def face_of(self, user: str) -> CallerView: ...

    def settling(self, read_at: float) -> bool: ...


@dataclass
class Context:
    """A search kept with RETURN (UPDATE) (RFC 5267): its result (UIDs) as last reported."""

    tag: str
    query: Query
    by_uid: bool
    result: set[int]
    sort: Any = None  # SORT's criteria, for a sorted result


class SessionCore:
    def __init__(self, server: Server, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter, *, tls: bool) -> None:
        self.server = server
        self.reader = reader
        self.writer = writer
        self.tls = tls
        self.peer = str((writer.get_extra_info("peername") or ("?",))[0])
        self.user: str | None = None
        self.caller: CallerView | None = None  # the user's face, once logged in
        self.selected: Selected | None = None
        self.condstore = False
        self.qresync = False  # RFC 7162: expunges are VANISHED; SELECT (QRESYNC ...)
        self.parsed: OrderedDict[tuple[str, str, int, int], mime.Part] = OrderedDict()
        self.parsed_at = -1  # the log position the kept messages were read at
        self.contexts: dict[str, Context] = {}  # searches kept updated (RFC 5267), by tag
        self.notify: list[tuple[str, list[str], set[str]]] | None = None  # NOTIFY's filters
        self.watched: dict[str, dict[str, int]] = {}  # NOTIFY: the mailboxes' last STATUS
        self.watched_at = -1  # the log position ``watched`` was read at
        self._subscribed: set[str] = set()  # NOTIFY's SUBSCRIBED filter, as last read

    # -- the connection ---------------------------------------------------------------------
    def capabilities(self) -> str:
        caps = ["IMAP4rev1", "LITERAL+", "SASL-IR", "ID", "ENABLE", "IDLE", "NAMESPACE",
                "UIDPLUS", "MOVE", "UNSELECT", "CHILDREN", "SPECIAL-USE", "CONDSTORE", "ACL",
                "ESEARCH", "MULTIAPPEND", "LIST-EXTENDED", "LIST-STATUS", "SORT",
                "SORT=DISPLAY", "ESORT", "THREAD=ORDEREDSUBJECT", "THREAD=REFERENCES",
                "BINARY", "QRESYNC", "CATENATE", "CONTEXT=SEARCH", "CONTEXT=SORT",
                "URLAUTH", "URLAUTH=BINARY", "NOTIFY",
                "QUOTA", "QUOTA=RES-STORAGE", "QUOTA=RES-MESSAGE",
                "RIGHTS=texk"]
        if self.user is None:
            if not self.tls and self.server.tls_context is not None:
                caps.append("STARTTLS")
            if self.tls or self.server.plaintext_auth:
                caps += ["AUTH=PLAIN"]
            else:
                caps.append("LOGINDISABLED")
        return " ".join(caps)

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def untagged(self, line: str | bytes) -> None:
        await self.send(b"* " + (line.encode() if isinstance(line, str) else line) + b"\r\n")

    async def run(self) -> None:
        await self.untagged(f"OK [CAPABILITY {self.capabilities()}] letterlog ready")
        try:
            while True:
                try:
                    segments = await self.read_command()
                except BadCommand as bad:
                    await self.untagged(f"BAD {bad}")
                    continue
                if segments is None:
                    return
                if not await self.dispatch(segments):
                    return
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            return
        finally:
            self.writer.close()

    async def read_command(self) -> list[bytes] | None:
        """The next command's lines and literals; None when the client has gone or has said
        nothing for the autologout time (RFC 3501 5.4: 30 minutes once logged in, 2 before)."""
        segments: list[bytes] = []
        total = 0
        while True:
            wait = AUTOLOGOUT if self.user is not None else AUTOLOGOUT_UNAUTHENTICATED
            try:
                line = await asyncio.wait_for(self.reader.readline(), wait)
            except TimeoutError:
                await self.untagged("BYE autologout: idle for too long")
                return None
            if not line:
                return None
            if not line.endswith(b"\n"):
                raise BadCommand("line too long")
            segments.append(line)
            m = LITERAL_AT_END.search(line)
            if not m:
                return segments
            size = int(m.group(1))
            total += size
            if total > self.server.max_command:
                if m.group(2):  # LITERAL+: its bytes are on their way; nothing else is safe
                    await self.untagged("BYE literal too large")
                    return None
                raise BadCommand("literal too large")
            if not m.group(2):
                await self.send(b"+ OK\r\n")
            segments.append(await self.reader.readexactly(size))

    async def dispatch(self, segments: list[bytes]) -> bool:
        tag = "*"
        try:
            toks = tokens(segments)
            if not toks or not isinstance(toks[0], Atom):
                raise BadCommand("no tag")
            tag = toks[0].value
            if len(toks) < 2 or not isinstance(toks[1], Atom):
                raise BadCommand("no command")
            name, args = toks[1].upper(), toks[2:]
            if name == "UID" and args and isinstance(args[0], Atom):
                name, args = "UID " + args[0].upper(), args[1:]
            handler = self.handler(name)
            if handler is None:
                raise BadCommand(f"unknown command or not in this state: {name}")
            result = await handler(tag, args)
            if result is False:
                return False
            if result is ANSWERED:
                return True
            await self.send(f"{tag} OK {result or name + ' completed'}\r\n".encode())
        except BadCommand as bad:
            await self.send(f"{tag} BAD {bad}\r\n".encode())
        except No as no:
            code = f"[{no.code}] " if no.code else ""
            await self.send(f"{tag} NO {code}{_one_line(str(no))}\r\n".encode())
        except (ConnectionError, asyncio.IncompleteReadError):
            raise
        except Exception:
            log.exception("imap: %s failed for %s", tag, self.user)
            await self.send(f"{tag} NO [SERVERBUG] internal error; see the server's log\r\n"
                            .encode())
        return True

    def handler(self, name: str) -> Callable[[str, list[Token]], Awaitable[Any]] | None:
        anywhere = {"CAPABILITY", "NOOP", "LOGOUT", "ID"}
        unauth = {"LOGIN", "AUTHENTICATE", "STARTTLS"}
        auth = {"SELECT", "EXAMINE", "CREATE", "DELETE", "RENAME", "SUBSCRIBE", "UNSUBSCRIBE",
                "LIST", "LSUB", "STATUS", "APPEND", "NAMESPACE", "ENABLE", "IDLE", "SETACL",
                "DELETEACL", "GETACL", "LISTRIGHTS", "MYRIGHTS", "GENURLAUTH", "URLFETCH",
                "RESETKEY", "NOTIFY", "GETQUOTA", "GETQUOTAROOT", "SETQUOTA"}
        selected = {"CHECK", "CLOSE", "UNSELECT", "EXPUNGE", "SEARCH", "FETCH", "STORE", "COPY",
                    "CANCELUPDATE",
                    "SORT", "UID SORT", "THREAD", "UID THREAD",
                    "MOVE", "UID FETCH", "UID STORE", "UID SEARCH", "UID COPY", "UID MOVE",
                    "UID EXPUNGE"}
        allowed = anywhere | (unauth if self.user is None else auth)
        if self.selected is not None:
            allowed |= selected
        if name not in allowed:
            return None
        return getattr(self, "cmd_" + name.replace(" ", "_").lower(), None)

    @property
    def face(self) -> CallerView:
        """The logged-in user's face (an authenticated command's: ``handler`` runs none
        before LOGIN)."""
        if self.caller is None:
            raise BadCommand("log in first")
        return self.caller

    async def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn`` on the store's thread; the store's refusals become NO."""
        try:
            return await self.server.call(fn, *args, **kwargs)
        except PermissionDenied as e:
            raise No(str(e), "NOPERM") from None
        except (MailboxNotFound, MessageNotFound) as e:
            raise No(str(e), "NONEXISTENT") from None
        except MailboxExists as e:
            raise No(str(e), "ALREADYEXISTS") from None
        except QuotaExceeded as e:
            raise No(str(e), "OVERQUOTA") from None
        except InvalidState as e:  # most often: expunged by another session meanwhile
            raise No(str(e), "EXPUNGEISSUED" if "expunged" in str(e) else "CANNOT") from None
        except (InvalidCommand, NotFound) as e:
            raise No(str(e), "CANNOT") from None
        except LetterlogError as e:
            raise No(str(e)) from None

    def resolve(self, name: str) -> tuple[str, str]:
        try:
            return self.face.resolve(name)
        except MailboxNotFound as e:
            raise No(str(e), "NONEXISTENT") from None


    def _open(self, account: str, name: str) -> tuple[dict[str, Any], str]:
        self.server.catch_up()
        status = self.face.mailbox_status(account, name)
        return status, self.face.my_rights(account, name)

    if TYPE_CHECKING:  # what one part uses of another (``Session`` mixes them all)
        async def report(self, *, expunges: bool = True) -> None: ...

        async def settle(self, done: Callable[[Selected], bool]) -> None: ...

        async def enable_condstore(self) -> None: ...

        async def announce_keywords(self, sel: Selected) -> None: ...

        def _flags_line(self, sel: Selected, seq: int, e: Entry, *, uid: bool) -> str: ...

        @staticmethod
        def _flag_names(sel: Selected) -> str: ...

        @staticmethod
        def _permanent(sel: Selected, keywords: set[str]) -> str: ...

        def _sync(self, sel: Selected) -> None: ...

        async def notify_changes(self) -> None: ...

        async def context_changes(self, old_uids: list[int]
                                  ) -> tuple[list[str], list[str]]: ...

        async def _sorted(self, criteria: Any, found: list[int]
                          ) -> list[tuple[Any, int]]: ...

        def message(self, uid: int) -> mime.Part: ...

        async def set_seen(self, sel: Selected, e: Entry) -> bool: ...

        def _targets(self, spec: str, by_uid: bool) -> list[tuple[int, int]]: ...

        async def _status_line(self, path: str, items: list[str], *,
                               quiet: bool = False) -> None: ...

        def _list_rows(self) -> tuple[list[dict[str, Any]], set[str]]: ...


def _one_line(text: str) -> str:
    return " ".join(text.split())
