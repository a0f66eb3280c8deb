"""One IMAP connection (RFC 3501 and the extensions in ``CAPABILITIES``): its states
(not authenticated, authenticated, selected), its commands, and its selected mailbox.

After LOGIN / AUTHENTICATE the session holds the store acting as the user (a
``CallerView``, ``Letterlog.as_user``): every command goes through it, so every right and
the user's virtual root apply as they do to ``letterlog --as USER``. Store calls run on the
server's store thread (``Server.call``); the protocol runs on the event loop.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import re
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any

from adapters.imap import mime
from adapters.imap.mailbox import Entry, Selected, entry
from adapters.imap.search import (
    Query,
    Searcher,
    SearchError,
    parse_search,
    partial_of,
    return_options,
)
from adapters.imap.wire import (
    LITERAL_AT_END,
    MONTHS,
    Atom,
    BadCommand,
    No,
    String,
    Token,
    astring_out,
    in_set,
    sequence_set,
    tokens,
)
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
    from adapters.caller import CallerView
    from adapters.imap.server import Server

log = logging.getLogger("letterlog.imap")

SYSTEM_FLAGS = ("\\Answered", "\\Flagged", "\\Deleted", "\\Seen", "\\Draft")
MAX_LINE = 64 * 1024
SETTLE_SECONDS = 5.0
"""With read models kept by stream workers (scale-out), how long after a change of the log
sessions read their mailboxes again on every look, for the workers to project it."""
PARSED_BYTES = 8 << 20
"""At most this many bytes of messages kept parsed per session (FETCH of their parts)."""
AUTOLOGOUT = 30 * 60.0
AUTOLOGOUT_UNAUTHENTICATED = 120.0
ROLES = {"sent": "\\Sent", "drafts": "\\Drafts", "trash": "\\Trash", "junk": "\\Junk",
         "archive": "\\Archive"}


GONE = ("NONEXISTENT", "EXPUNGEISSUED")
"""The codes of a message another session expunged while this one still shows it."""
STATUS_ITEMS = ("MESSAGES", "RECENT", "UIDNEXT", "UIDVALIDITY", "UNSEEN", "HIGHESTMODSEQ",
                "DELETED", "DELETED-STORAGE")
"""DELETED and DELETED-STORAGE: RFC 9208 asks for them with QUOTA=RES-MESSAGE and
QUOTA=RES-STORAGE (the messages marked \\Deleted, and their size in KiB)."""
ANSWERED = "answered"
"""A handler's result when it has sent its tagged reply itself (STARTTLS)."""


_DATE_TIME = re.compile(r"^\s?(\d{1,2})-([A-Za-z]{3})-(\d{4}) (\d\d):(\d\d):(\d\d) "
                        r"([+-])(\d\d)(\d\d)$")


def parse_date_time(text: str) -> datetime:
    from datetime import timedelta, timezone

    m = _DATE_TIME.match(text)
    if not m or m.group(2).title() not in MONTHS:
        raise BadCommand(f"invalid date-time {text!r}")
    off = (int(m.group(8)) * 60 + int(m.group(9))) * (-1 if m.group(7) == "-" else 1)
    return datetime(int(m.group(3)), MONTHS.index(m.group(2).title()) + 1, int(m.group(1)),
                    int(m.group(4)), int(m.group(5)), int(m.group(6)),
                    tzinfo=timezone(timedelta(minutes=off)))


def _pattern_name(token: Token) -> str:
    """A LIST pattern, decoded from modified UTF-7 where it is that."""
    from adapters.imap.utf7 import decode

    try:
        return decode(_text(token))
    except ValueError:
        return _text(token)


def _text(token: Token) -> str:
    if isinstance(token, Atom):
        return token.value
    if isinstance(token, String):
        return token.text()
    raise BadCommand("expected a string")


def _mailbox_name(token: Token) -> str:
    name = _text(token)
    if name.upper() == "INBOX":
        return "INBOX"
    from adapters.imap.utf7 import decode

    try:
        return decode(name)
    except ValueError:  # not modified UTF-7: a name of its own (that no mailbox has)
        return name


class Session:
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

    # -- any state --------------------------------------------------------------------------
    async def cmd_capability(self, tag: str, args: list[Token]) -> str:
        await self.untagged(f"CAPABILITY {self.capabilities()}")
        return "CAPABILITY completed"

    async def cmd_noop(self, tag: str, args: list[Token]) -> str:
        await self.report()
        return "NOOP completed"

    async def cmd_check(self, tag: str, args: list[Token]) -> str:
        await self.report()
        return "CHECK completed"

    async def cmd_logout(self, tag: str, args: list[Token]) -> bool:
        await self.untagged("BYE logging out")
        await self.send(f"{tag} OK LOGOUT completed\r\n".encode())
        return False

    async def cmd_id(self, tag: str, args: list[Token]) -> str:
        await self.untagged('ID ("name" "letterlog")')
        return "ID completed"

    # -- not authenticated ------------------------------------------------------------------
    async def cmd_starttls(self, tag: str, args: list[Token]) -> str:
        if self.tls or self.server.tls_context is None:
            raise BadCommand("STARTTLS is not available")
        # what the client sent after STARTTLS in the clear is dropped, never read as
        # commands of the protected session (the STARTTLS command injection)
        self.reader._buffer.clear()  # type: ignore[attr-defined]  # noqa: SLF001
        await self.send(f"{tag} OK begin TLS negotiation now\r\n".encode())
        await self.writer.start_tls(self.server.tls_context)
        self.tls = True
        return ANSWERED

    async def cmd_login(self, tag: str, args: list[Token]) -> str:
        if len(args) != 2:
            raise BadCommand("LOGIN takes a user name and a password")
        return await self.login(_text(args[0]), _text(args[1]))

    async def cmd_authenticate(self, tag: str, args: list[Token]) -> str:
        if not args or not isinstance(args[0], Atom):
            raise BadCommand("AUTHENTICATE needs a mechanism")
        if args[0].upper() != "PLAIN":
            raise No("unsupported authentication mechanism", "CANNOT")
        if len(args) > 1:
            answer = _text(args[1]).encode()
        else:
            await self.send(b"+ \r\n")
            answer = (await self.reader.readline()).strip()
        if answer == b"*":
            raise BadCommand("authentication cancelled")
        try:
            decoded = base64.b64decode(answer, validate=True) if answer != b"=" else b""
            _authz, user, password = decoded.split(b"\0")
        except ValueError:
            raise BadCommand("invalid SASL PLAIN response") from None
        return await self.login(user.decode("utf-8", "replace"),
                                password.decode("utf-8", "replace"))

    async def login(self, user: str, password: str) -> str:
        if not (self.tls or self.server.plaintext_auth):
            raise No("plaintext authentication is disabled until STARTTLS", "PRIVACYREQUIRED")
        caller = await self.server.authenticate(user, password, self.peer)
        if caller is None:
            raise No("authentication failed", "AUTHENTICATIONFAILED")
        self.caller, self.user = caller, caller.user
        return f"[CAPABILITY {self.capabilities()}] logged in"

    # -- authenticated ----------------------------------------------------------------------
    async def cmd_namespace(self, tag: str, args: list[Token]) -> str:
        await self.untagged('NAMESPACE (("" "/")) NIL (("shared/" "/"))')
        return "NAMESPACE completed"

    async def cmd_enable(self, tag: str, args: list[Token]) -> str:
        enabled = [a.upper() for a in args if isinstance(a, Atom)
                   and a.upper() in ("CONDSTORE", "QRESYNC")]
        if enabled:
            self.condstore = True
        if "QRESYNC" in enabled:
            self.qresync = True
        await self.untagged("ENABLED" + "".join(" " + e for e in enabled))
        return "ENABLE completed"

    def resolve(self, name: str) -> tuple[str, str]:
        try:
            return self.face.resolve(name)
        except MailboxNotFound as e:
            raise No(str(e), "NONEXISTENT") from None

    async def cmd_select(self, tag: str, args: list[Token], readonly: bool = False) -> str:
        if self.selected is not None:
            self.selected = None
            await self.untagged("OK [CLOSED] previous mailbox closed")
        params = args[1] if len(args) > 1 and isinstance(args[1], list) else []
        if any(isinstance(p, Atom) and p.upper() == "CONDSTORE" for p in params):
            self.condstore = True
        resync = _qresync_parameters(params)
        if resync is not None and not self.qresync:
            raise BadCommand("QRESYNC needs ENABLE QRESYNC first")
        path = _mailbox_name(args[0]) if args else ""
        if not path:
            raise BadCommand("SELECT needs a mailbox")
        account, name = self.resolve(path)
        status, rights = await self.call(self._open, account, name)
        writable = not readonly and bool(set(rights) & set("swtedi"))
        sel = Selected(account, name, path, not writable, status["uidvalidity"],
                       rights=rights)
        await self.call(self._sync, sel)
        sel.recent = self.server.claim_recent(sel, sel.uids, claim=writable)
        sel.new_keywords()
        self.selected = sel
        self.parsed.clear()
        self.contexts.clear()
        await self.untagged(f"FLAGS ({self._flag_names(sel)})")
        await self.untagged(f"{sel.exists()} EXISTS")
        await self.untagged(f"{len(sel.recent)} RECENT")
        unseen = next((i + 1 for i, uid in enumerate(sel.uids)
                       if "\\Seen" not in sel.entries[uid].flags), 0)
        if unseen:
            await self.untagged(f"OK [UNSEEN {unseen}] first unseen")
        permanent = self._permanent(sel, sel.keywords)
        await self.untagged(f"OK [PERMANENTFLAGS ({permanent})] flags the user may keep")
        await self.untagged(f"OK [UIDVALIDITY {sel.uidvalidity}] UIDs valid")
        await self.untagged(f"OK [UIDNEXT {sel.uidnext}] predicted next UID")
        await self.untagged(f"OK [HIGHESTMODSEQ {max(sel.highestmodseq, 1)}] highest")
        if resync is not None and resync[0] == sel.uidvalidity:
            await self._resync(sel, resync[1], resync[2])
        return f"[{'READ-ONLY' if sel.readonly else 'READ-WRITE'}] selected"

    async def _resync(self, sel: Selected, modseq: int, known: str | None) -> None:
        """QRESYNC (RFC 7162 3.2.5): what the client knew that is gone, as VANISHED
        (EARLIER): every UID of its known set (or below UIDNEXT) the mailbox no longer
        holds, which may include UIDs it never saw; then the messages changed since
        ``modseq``, with their flags."""
        top = max(sel.uidnext - 1, 1)
        ranges = sequence_set(known, top) if known else [(1, top)]
        present = set(sel.uids)
        gone = [u for low, high in ranges for u in range(low, min(high, top) + 1)
                if u not in present]
        if gone:
            await self.untagged(f"VANISHED (EARLIER) {_compact(sorted(set(gone)))}")
        for seq, uid in enumerate(sel.uids, start=1):
            e = sel.entries[uid]
            if e.modseq > modseq:
                await self.untagged(self._flags_line(sel, seq, e, uid=True))

    @staticmethod
    def _flag_names(sel: Selected) -> str:
        return " ".join([*SYSTEM_FLAGS, *sorted(sel.keywords)])

    @staticmethod
    def _permanent(sel: Selected, keywords: set[str]) -> str:
        if sel.readonly:
            return ""
        out = []
        if "s" in sel.rights:
            out.append("\\Seen")
        if "t" in sel.rights:
            out.append("\\Deleted")
        if "w" in sel.rights:
            out += ["\\Answered", "\\Flagged", "\\Draft", *sorted(keywords), "\\*"]
        return " ".join(out)

    async def cmd_examine(self, tag: str, args: list[Token]) -> str:
        return await self.cmd_select(tag, args, readonly=True)

    def _open(self, account: str, name: str) -> tuple[dict[str, Any], str]:
        self.server.catch_up()
        status = self.face.mailbox_status(account, name)
        return status, self.face.my_rights(account, name)

    def _sync(self, sel: Selected) -> None:
        """Reads the mailbox's listing into ``sel`` when the log has moved since."""
        head = self.server.catch_up()
        if head == sel.head and not self.server.settling(sel.read_at):
            return
        sel.read_at = time.monotonic()
        listing = self.face.messages(sel.account, sel.name, limit=1 << 31)
        listing.reverse()
        if sel.head < 0:
            sel.uids = [m.uid for m in listing]
            sel.entries = {m.uid: entry(m) for m in listing}
        else:
            sel.pending = sel.update(listing)
        status = self.face.mailbox_status(sel.account, sel.name)
        sel.uidnext, sel.highestmodseq = status["uidnext"], status["highestmodseq"]
        sel.head = head

    async def report(self, *, expunges: bool = True) -> None:
        """Untagged updates of the selected mailbox: what changed since the last look. Not
        during FETCH, STORE and SEARCH (``expunges`` False): sequence numbers may not
        change under them (RFC 3501 7.4.1), so their changes wait for the next command."""
        if self.notify and expunges:
            await self.notify_changes()
        sel = self.selected
        if sel is None or not expunges:
            return
        old_uids = list(sel.uids)
        await self.call(self._sync, sel)
        expunged, exists, changed = sel.pending or ([], 0, [])
        vanished = sel.vanished
        sel.pending, sel.vanished = None, []
        removes, adds = await self.context_changes(old_uids) \
            if expunged or exists or changed else ([], [])
        for line in removes:
            await self.untagged(line)
        if self.qresync and vanished:
            await self.untagged(f"VANISHED {_compact(sorted(vanished))}")
        else:
            for seq in expunged:
                await self.untagged(f"{seq} EXPUNGE")
        sel.recent &= set(sel.entries)
        if sel.new_keywords():
            await self.untagged(f"FLAGS ({self._flag_names(sel)})")
            await self.untagged(f"OK [PERMANENTFLAGS ({self._permanent(sel, sel.keywords)})]"
                                " flags the user may keep")
        if exists:
            new = [u for u in sel.uids if u not in sel.recent and u >= self.server.recent_from(sel)]
            sel.recent |= self.server.claim_recent(sel, new, claim=not sel.readonly)
            await self.untagged(f"{exists} EXISTS")
            await self.untagged(f"{len(sel.recent)} RECENT")
        for uid in changed:
            seq = sel.seq_of(uid)
            if seq:
                await self.untagged(self._flags_line(sel, seq, sel.entries[uid], uid=True))
        for line in adds:
            await self.untagged(line)

    async def settle(self, done: Callable[[Selected], bool]) -> None:
        """With read models kept by stream workers: report updates until this session's
        own command shows in them (``done``), for at most ``SETTLE_SECONDS``; at once in the
        embedded store, which projects a command before it returns."""
        sel = self.selected
        deadline = time.monotonic() + SETTLE_SECONDS
        while (self.server.lagging and sel is not None and sel is self.selected
               and not done(sel) and time.monotonic() < deadline):
            await asyncio.sleep(0.1)  # the workers' pace: what a command waits for here
            await self.report()

    async def enable_condstore(self) -> None:
        """A CONDSTORE-enabling command (RFC 7162 3.1): the first one in a selected mailbox
        is answered with the mailbox's HIGHESTMODSEQ too."""
        if self.condstore:
            return
        self.condstore = True
        if self.selected is not None:
            await self.untagged(f"OK [HIGHESTMODSEQ {max(self.selected.highestmodseq, 1)}]"
                                " CONDSTORE enabled")

    async def announce_keywords(self, sel: Selected) -> None:
        if sel.new_keywords():
            await self.untagged(f"FLAGS ({self._flag_names(sel)})")
            await self.untagged(f"OK [PERMANENTFLAGS ({self._permanent(sel, sel.keywords)})]"
                                " flags the user may keep")

    def _flags_line(self, sel: Selected, seq: int, e: Entry, *, uid: bool) -> str:
        items = [f"FLAGS ({' '.join(sel.flags_of(e))})"]
        if uid:
            items.append(f"UID {e.uid}")
        if self.condstore:
            items.append(f"MODSEQ ({e.modseq})")
        return f"{seq} FETCH ({' '.join(items)})"

    async def cmd_create(self, tag: str, args: list[Token]) -> str:
        path = _mailbox_name(args[0]).rstrip("/") if args else ""
        if not path:
            raise BadCommand("CREATE needs a mailbox name")
        if path == "INBOX":
            raise No("INBOX exists", "ALREADYEXISTS")
        account, name = self.resolve(path)
        await self.call(self._create, account, name)
        return "CREATE completed"

    def _create(self, account: str, name: str) -> None:
        """CREATE makes the missing mailboxes above the new one too (RFC 3501 6.3.3)."""
        parts = name.split("/")
        for i in range(1, len(parts)):
            parent = "/".join(parts[:i])
            try:
                self.face.mailbox_status(account, parent)
            except MailboxNotFound:
                self.face.create_mailbox(account, parent)
        self.face.create_mailbox(account, name)

    async def cmd_delete(self, tag: str, args: list[Token]) -> str:
        path = _mailbox_name(args[0]) if args else ""
        if path == "INBOX":
            raise No("INBOX cannot be deleted", "CANNOT")
        account, name = self.resolve(path)
        if self.selected is not None and (self.selected.account, self.selected.name) == (
                account, name):
            self.selected = None
        await self.call(self.face.delete_mailbox, account, name)
        return "DELETE completed"

    async def cmd_rename(self, tag: str, args: list[Token]) -> str:
        if len(args) != 2:
            raise BadCommand("RENAME takes two mailbox names")
        old, new = _mailbox_name(args[0]), _mailbox_name(args[1]).rstrip("/")
        account, name = self.resolve(old)
        new_account, new_name = self.resolve(new)
        if new_account != account:
            raise No("a mailbox cannot be renamed into another account", "CANNOT")
        if new == "INBOX" or (name == "INBOX" and new_name == "INBOX"):
            raise No("INBOX exists", "ALREADYEXISTS")
        if name == "INBOX":
            moved = await self.call(self._rename_inbox, account, new_name)
            await self.report()
            return f"RENAME completed ({moved} messages moved out of INBOX)"
        await self.call(self.face.rename_mailbox, account, name, new_name)
        return "RENAME completed"

    def _rename_inbox(self, account: str, new_name: str) -> int:
        """RENAME INBOX (RFC 3501 6.3.5): a new mailbox takes INBOX's messages (with their
        flags) and INBOX stays, empty; mailboxes below INBOX stay where they are. A message
        delivered meanwhile stays in INBOX."""
        self.server.catch_up()
        self._create(account, new_name)
        listing = self.face.messages(account, "INBOX", limit=1 << 31)
        for m in sorted(listing, key=lambda m: m.uid):
            self.face.move(m.message_id, new_name)
        return len(listing)

    async def cmd_subscribe(self, tag: str, args: list[Token]) -> str:
        account, name = self.resolve(_mailbox_name(args[0]) if args else "")
        await self.call(self.face.subscribe, account, name)
        return "SUBSCRIBE completed"

    async def cmd_unsubscribe(self, tag: str, args: list[Token]) -> str:
        account, name = self.resolve(_mailbox_name(args[0]) if args else "")
        await self.call(self.face.unsubscribe, account, name)
        return "UNSUBSCRIBE completed"

    async def cmd_list(self, tag: str, args: list[Token], lsub: bool = False) -> str:
        """LIST and LSUB, with LIST-EXTENDED (RFC 5258: selection and return options,
        several patterns), LIST-STATUS (RFC 5819) and SPECIAL-USE (RFC 6154)."""
        word = "LSUB" if lsub else "LIST"
        select: list[str] = []
        extended = False
        if not lsub and args and isinstance(args[0], list):
            select, args, extended = [_text(a).upper() for a in args[0]], args[1:], True
        if len(args) < 2:
            raise BadCommand(f"{word} takes a reference and a pattern")
        ref = _text(args[0])
        extended |= isinstance(args[1], list)
        patterns = [_pattern_name(p) for p in
                    (args[1] if isinstance(args[1], list) else [args[1]])]
        returns, status_items = _list_returns(args[2:]) if not lsub else ([], [])
        extended |= bool(args[2:])
        if set(select) - {"SUBSCRIBED", "REMOTE", "RECURSIVEMATCH", "SPECIAL-USE"}:
            raise BadCommand(f"unknown LIST selection option in {select}")
        if "RECURSIVEMATCH" in select and not set(select) - {"RECURSIVEMATCH", "REMOTE"}:
            raise BadCommand("RECURSIVEMATCH needs another selection option")
        if not extended and patterns == [""]:
            await self.untagged(f'{word} (\\Noselect) "/" ""')
            return f"{word} completed"
        rows, subscribed = await self.call(self._list_rows)
        existing = {r["path"]: r for r in rows}
        by_subscription = lsub or "SUBSCRIBED" in select
        candidates = sorted(subscribed) if by_subscription else list(existing)
        show_subscribed = "SUBSCRIBED" in select or "SUBSCRIBED" in returns
        out: list[tuple[str, list[str], str]] = []
        seen: set[str] = set()
        regexes = [_pattern(ref + p if not p.upper().startswith("INBOX") else p)
                   for p in patterns]
        for pattern, regex in zip(patterns, regexes, strict=True):
            for path in candidates:
                row = existing.get(path)
                if path in seen or not regex.match(path):
                    continue
                if "SPECIAL-USE" in select and (row is None or row.get("role") not in ROLES):
                    continue
                seen.add(path)
                attrs = []
                if row is None:
                    attrs.append("\\NonExistent" if extended else "\\Noselect")
                elif row.get("noselect"):
                    attrs.append("\\Noselect")
                if not lsub and row is not None:
                    children = any(n.startswith(path + "/") for n in existing)
                    attrs.append("\\HasChildren" if children else "\\HasNoChildren")
                    if row.get("role") in ROLES:
                        attrs.append(ROLES[row["role"]])
                if show_subscribed and path in subscribed:
                    attrs.append("\\Subscribed")
                out.append((path, attrs, ""))
            parents: set[str] = set()
            for path in (subscribed if by_subscription else existing):
                parts = path.split("/")
                parents |= {"/".join(parts[:i]) for i in range(1, len(parts))}
            for parent in sorted(parents - seen):
                if not regex.match(parent):
                    continue
                if "RECURSIVEMATCH" in select and by_subscription:
                    if all(any(r.match(c) for r in regexes) for c in subscribed
                           if c.startswith(parent + "/")):
                        continue  # every subscribed child is listed itself
                    seen.add(parent)
                    row = existing.get(parent)
                    attrs = [] if row is not None else ["\\NonExistent"]
                    if row is not None and "CHILDREN" in returns:
                        attrs.append("\\HasChildren")
                    out.append((parent, attrs, ' ("CHILDINFO" ("SUBSCRIBED"))'))
                elif (lsub or "%" in pattern) and parent not in existing \
                        and not by_subscription:
                    seen.add(parent)
                    out.append((parent, ["\\Noselect"] if not extended
                                else ["\\NonExistent"], ""))
                elif lsub and "%" in pattern:
                    seen.add(parent)
                    out.append((parent, ["\\Noselect"], ""))
        for path, attrs, extra in out:
            await self.untagged(f"{word} ({' '.join(attrs)}) \"/\" ".encode()
                                + astring_out(_listed_name(path)) + extra.encode())
            row = existing.get(path)
            if status_items and row is not None and not row.get("noselect"):
                await self._status_line(path, status_items, quiet=True)
        return f"{word} completed"

    def _list_rows(self) -> tuple[list[dict[str, Any]], set[str]]:
        """The mailboxes the user may look up, and the paths of its subscriptions (its own
        account's: subscriptions are the owner's)."""
        self.server.catch_up()
        rows = self.face.mailboxes()
        account, _ = self.face.root()
        subscribed: set[str] = set()
        if account:
            try:
                names = self.face.subscriptions(account)
            except (PermissionDenied, NotFound):
                names = []
            subscribed = {self.face.path_of(account, n) for n in names}
        return rows, subscribed

    async def cmd_lsub(self, tag: str, args: list[Token]) -> str:
        return await self.cmd_list(tag, args, lsub=True)

    async def cmd_status(self, tag: str, args: list[Token]) -> str:
        if len(args) != 2 or not isinstance(args[1], list):
            raise BadCommand("STATUS takes a mailbox and a list of items")
        items = [_text(i).upper() for i in args[1]]
        await self._status_line(_mailbox_name(args[0]), items)
        return "STATUS completed"

    async def _status_line(self, path: str, items: list[str], *, quiet: bool = False) -> None:
        """``* STATUS`` of the mailbox ``path``; ``quiet`` (LIST-STATUS): nothing when the
        user may not read it."""
        if any(i not in STATUS_ITEMS for i in items):
            raise BadCommand(f"unknown STATUS item in {items}")
        account, name = self.resolve(path)
        try:
            status, _ = await self.call(self._open, account, name)
        except No:
            if quiet:
                return
            raise
        recent = 0
        if "RECENT" in items:
            recent = await self.call(self._recent_count, account, name, status)
        deleted = (0, 0)
        if {"DELETED", "DELETED-STORAGE"} & set(items):
            deleted = await self.call(self._deleted, account, name)
        values = {"DELETED": deleted[0], "DELETED-STORAGE": (deleted[1] + 1023) // 1024,
                  "MESSAGES": status["messages"], "RECENT": recent,
                  "UIDNEXT": status["uidnext"], "UIDVALIDITY": status["uidvalidity"],
                  "UNSEEN": status["unseen"], "HIGHESTMODSEQ": max(status["highestmodseq"], 1)}
        shown = " ".join(f"{key} {values[key]}" for key in items)
        await self.untagged(b"STATUS " + astring_out(_listed_name(path))
                            + f" ({shown})".encode())

    def _deleted(self, account: str, name: str) -> tuple[int, int]:
        """How many messages of the mailbox are marked \\Deleted, and their bytes."""
        listing = self.face.messages(account, name, limit=1 << 31)
        marked = [m for m in listing if "\\Deleted" in m.flags]
        return len(marked), sum(m.size for m in marked)

    def _recent_count(self, account: str, name: str, status: dict[str, Any]) -> int:
        start = self.server.recent_first(account, name, status["uidvalidity"])
        if start >= status["uidnext"]:
            return 0
        listing = self.face.messages(account, name, limit=1 << 31)
        return sum(1 for m in listing if m.uid >= start)

    # -- ACL (RFC 4314) ----------------------------------------------------------------------
    def _acl_target(self, args: list[Token], count: int) -> tuple[str, str, str, list[str]]:
        if len(args) != count:
            raise BadCommand(f"expected {count} arguments")
        path = _mailbox_name(args[0])
        account, name = self.resolve(path)
        return path, account, name, [_text(a) for a in args[1:]]

    async def cmd_setacl(self, tag: str, args: list[Token]) -> str:
        _, account, name, (identifier, rights) = self._acl_target(args, 3)
        await self.call(self.face.acl_set, account, name, identifier, rights)
        return "SETACL completed"

    async def cmd_deleteacl(self, tag: str, args: list[Token]) -> str:
        _, account, name, (identifier,) = self._acl_target(args, 2)
        await self.call(self.face.acl_delete, account, name, identifier)
        return "DELETEACL completed"

    async def cmd_getacl(self, tag: str, args: list[Token]) -> str:
        path, account, name, _ = self._acl_target(args, 1)
        acl = await self.call(self.face.acl_get, account, name)
        line = b"ACL " + astring_out(_listed_name(path))
        for identifier, rights in acl.items():
            line += b" " + astring_out(identifier) + b" " + astring_out(rights)
        await self.untagged(line)
        return "GETACL completed"

    async def cmd_listrights(self, tag: str, args: list[Token]) -> str:
        path, account, name, (identifier,) = self._acl_target(args, 2)
        await self.call(self.face.acl_get, account, name)  # 'a' needed, as for GETACL
        await self.untagged(b"LISTRIGHTS " + astring_out(_listed_name(path)) + b" "
                            + astring_out(identifier) + b' "" l r s w i p k x t e a')
        return "LISTRIGHTS completed"

    async def cmd_myrights(self, tag: str, args: list[Token]) -> str:
        path, account, name, _ = self._acl_target(args, 1)
        rights = await self.call(self.face.my_rights, account, name)
        await self.untagged(b"MYRIGHTS " + astring_out(_listed_name(path)) + b" "
                            + astring_out(rights))
        return "MYRIGHTS completed"

    # -- QUOTA (RFC 9208) ---------------------------------------------------------------------
    async def cmd_getquotaroot(self, tag: str, args: list[Token]) -> str:
        """GETQUOTAROOT mailbox: its quota root (one per account, named by the account's
        address) and, for the user's own account, the root's usage and limits."""
        if len(args) != 1:
            raise BadCommand("GETQUOTAROOT takes a mailbox")
        path = _mailbox_name(args[0])
        account, name = self.resolve(path)
        await self.call(self._open, account, name)  # NONEXISTENT / NOPERM as for STATUS
        await self.untagged(b"QUOTAROOT " + astring_out(_listed_name(path)) + b" "
                            + astring_out(account))
        try:
            quota = await self.call(self.face.quota, account)
        except No as no:
            if no.code != "NOPERM":
                raise
            return "GETQUOTAROOT completed (the root's usage is its owner's to read)"
        await self.untagged(_quota_line(account, quota))
        return "GETQUOTAROOT completed"

    async def cmd_getquota(self, tag: str, args: list[Token]) -> str:
        if len(args) != 1:
            raise BadCommand("GETQUOTA takes a quota root")
        root = _text(args[0])
        own, _ = self.face.root()
        if root in ("", own):
            root = own
        try:
            quota = await self.call(self.face.quota, root)
        except No as no:
            raise No(f"no quota root {root!r} of this user", "NONEXISTENT") from no
        await self.untagged(_quota_line(root, quota))
        return "GETQUOTA completed"

    async def cmd_setquota(self, tag: str, args: list[Token]) -> str:
        """SETQUOTA: quotas are the administrator's (``letterlog quota set``), so a user's
        is refused (QUOTASET is not announced)."""
        if len(args) != 2 or not isinstance(args[1], list):
            raise BadCommand("SETQUOTA takes a quota root and a list of limits")
        raise No("quotas are set by the administrator (letterlog quota set)", "NOPERM")

    # -- NOTIFY (RFC 5465) --------------------------------------------------------------------
    async def cmd_notify(self, tag: str, args: list[Token]) -> str:
        """NOTIFY NONE, or NOTIFY SET [STATUS] (filter [mailboxes] (events)) ...: changes
        of the mailboxes the filters name (other than the selected one, reported as ever)
        come as STATUS (MessageNew, MessageExpunge, FlagChange) and LIST (MailboxName,
        SubscriptionChange) responses, read again each time the log moves."""
        if len(args) == 1 and isinstance(args[0], Atom) and args[0].upper() == "NONE":
            self.notify, self.watched = None, {}
            return "NOTIFY completed"
        if not args or not isinstance(args[0], Atom) or args[0].upper() != "SET":
            raise BadCommand("NOTIFY takes SET or NONE")
        rest = args[1:]
        status = bool(rest) and isinstance(rest[0], Atom) and rest[0].upper() == "STATUS"
        if status:
            rest = rest[1:]
        if not rest:
            raise BadCommand("NOTIFY SET needs at least one (filter (events))")
        filters = [_notify_filter(group) for group in rest]
        self.notify = filters
        self.watched_at, self.watched = await self.call(self._watched_status)
        if status:
            for path, values in sorted(self.watched.items()):
                items = _notify_items(self._events_of(path))
                if values and items:
                    await self._status_values(path, values, items)
        return "NOTIFY completed"

    def _events_of(self, path: str) -> set[str]:
        """The events the NOTIFY filters ask for on the mailbox ``path`` (not selected)."""
        sel = self.selected
        if sel is not None and path == sel.path:
            return set()
        events: set[str] = set()
        own = not path.startswith("shared/")
        for kind, names, wanted in self.notify or []:
            if kind == "PERSONAL" and own or kind == "INBOXES" and path == "INBOX" or (
                    kind == "MAILBOXES" and path in names) or (
                    kind == "SUBTREE" and any(path == n or path.startswith(n + "/")
                                              for n in names)) or (
                    kind == "SUBSCRIBED" and path in self._subscribed):
                events |= wanted
        return events

    def _watched_status(self) -> tuple[int, dict[str, dict[str, int]]]:
        """On the store's thread: the log's position, and the STATUS values of every
        mailbox a NOTIFY filter names (empty for one the user may look up but not read)."""
        head = self.server.catch_up()
        rows, self._subscribed = self._list_rows()
        out: dict[str, dict[str, int]] = {}
        for row in rows:
            path = row["path"]
            if row.get("noselect") or not self._events_of(path):
                continue
            try:
                account, name = self.face.resolve(path)
                st = self.face.mailbox_status(account, name)
            except LetterlogError:
                out[path] = {}
                continue
            out[path] = {"MESSAGES": st["messages"], "UIDNEXT": st["uidnext"],
                         "UIDVALIDITY": st["uidvalidity"],
                         "HIGHESTMODSEQ": max(st["highestmodseq"], 1)}
        return head, out

    async def notify_changes(self) -> None:
        """NOTIFY: what changed in the watched mailboxes since the last look."""
        head = await self.call(self.server.catch_up)
        if head == self.watched_at:
            return
        self.watched_at = head
        before, subscribed_before = self.watched, set(self._subscribed)
        self.watched_at, now = await self.call(self._watched_status)
        self.watched = now
        for path in sorted(set(now) | set(before)):
            events = self._events_of(path)
            if "MAILBOXNAME" in events and (path in now) != (path in before):
                attrs = "" if path in now else "\\NonExistent"
                await self.untagged(f"LIST ({attrs}) \"/\" ".encode()
                                    + astring_out(_listed_name(path)))
            old, new = before.get(path), now.get(path)
            if not old or not new:
                continue
            counted = old["MESSAGES"] != new["MESSAGES"] or old["UIDNEXT"] != new["UIDNEXT"]
            flagged = old["HIGHESTMODSEQ"] != new["HIGHESTMODSEQ"]
            if ({"MESSAGENEW", "MESSAGEEXPUNGE"} & events and counted) or (
                    "FLAGCHANGE" in events and flagged):
                await self._status_values(path, new, _notify_items(events))
        if "SUBSCRIPTIONCHANGE" in _all_events(self.notify):
            for path in sorted(self._subscribed ^ subscribed_before):
                attrs = "\\Subscribed" if path in self._subscribed else ""
                await self.untagged(f"LIST ({attrs}) \"/\" ".encode()
                                    + astring_out(_listed_name(path)))

    async def _status_values(self, path: str, values: dict[str, int], items: list[str]
                             ) -> None:
        shown = " ".join(f"{key} {values[key]}" for key in items)
        await self.untagged(b"STATUS " + astring_out(_listed_name(path))
                            + f" ({shown})".encode())

    # -- URLAUTH (RFC 4467, RFC 5524) --------------------------------------------------------
    async def cmd_genurlauth(self, tag: str, args: list[Token]) -> str:
        """GENURLAUTH url INTERNAL ...: each URL (of the user's, naming a message it may
        read) signed with its mailbox's key (adapters/imap/urlauth.py)."""
        from adapters.imap import urlauth

        if not args or len(args) % 2:
            raise BadCommand("GENURLAUTH takes pairs of a URL and a mechanism")
        signed: list[bytes] = []
        for i in range(0, len(args), 2):
            text, mechanism = _text(args[i]), _text(args[i + 1]).upper()
            if mechanism != urlauth.MECHANISM:
                raise No(f"unknown URLAUTH mechanism {mechanism}", "CANNOT")
            try:
                url = urlauth.parse(text)
            except urlauth.BadUrl as e:
                raise No(str(e), "BADURL " + _quoted_code(text)) from None
            if url.token is not None or not url.owned_by(self.face.user):
                raise No(f"cannot authorize the URL {text!r}", "BADURL " + _quoted_code(text))
            account, name = self.resolve(url.mailbox_name)
            status, rights = await self.call(self._open, account, name)
            if "r" not in rights or url.uidvalidity not in (None, status["uidvalidity"]):
                raise No(f"cannot authorize the URL {text!r}", "BADURL " + _quoted_code(text))
            key = (self.face.user, account, name, int(status["uidvalidity"]))
            signed.append(astring_out(await self.call(self.server.url_keys.sign, key, url)))
        await self.untagged(b"GENURLAUTH " + b" ".join(signed))
        return "GENURLAUTH completed"

    async def cmd_resetkey(self, tag: str, args: list[Token]) -> str:
        """RESETKEY [mailbox [mechanism ...]]: the user's URLs of the mailbox (of every
        mailbox without one) stop working."""
        from adapters.imap import urlauth

        if any(_text(a).upper() != urlauth.MECHANISM for a in args[1:]):
            raise No("unknown URLAUTH mechanism", "CANNOT")
        mailbox = None
        if args:
            account, name = self.resolve(_mailbox_name(args[0]))
            await self.call(self._open, account, name)  # NONEXISTENT unless it is there
            mailbox = (account, name)
        await self.call(self.server.url_keys.reset, self.face.user, mailbox)
        return "RESETKEY completed"

    async def cmd_urlfetch(self, tag: str, args: list[Token]) -> str:
        """URLFETCH url ... (RFC 4467), or (url [BODY] [BINARY] [BODYPARTSTRUCTURE]) ...
        (RFC 5524): each URL's data read as its owner, NIL where the URL is not valid,
        not the user's to fetch, or its message gone."""
        from adapters.imap.wire import literal

        if not args:
            raise BadCommand("URLFETCH needs a URL")
        out = b"URLFETCH"
        for arg in args:
            modifiers: list[str] = []
            if isinstance(arg, list):
                if not arg or isinstance(arg[0], list):
                    raise BadCommand("URLFETCH: expected (url modifiers...)")
                text = _text(arg[0])
                modifiers = [_text(m).upper() for m in arg[1:]]
                if set(modifiers) - {"BODY", "BINARY", "BODYPARTSTRUCTURE"} or \
                        {"BODY", "BINARY"} <= set(modifiers):
                    raise BadCommand(f"unknown URLFETCH modifiers {modifiers}")
            else:
                text = _text(arg)
            found = await self.call(self._url_fetch, text, modifiers)
            out += b" " + astring_out(text) + b" "
            if found is None:
                out += b"NIL"
            elif not isinstance(arg, list):
                out += literal(found[0])
            else:
                data, structure = found
                items = []
                if "BODYPARTSTRUCTURE" in modifiers:
                    items.append(b"BODYPARTSTRUCTURE " + structure)
                for kind in ("BODY", "BINARY"):
                    if kind in modifiers:
                        eight = b"~" if kind == "BINARY" and b"\0" in data else b""
                        items.append(kind.encode() + b" " + eight + literal(data))
                out += b"(" + b" ".join(items) + b")"
        await self.send(b"* " + out + b"\r\n")
        return "URLFETCH completed"

    def _url_fetch(self, text: str, modifiers: list[str]) -> tuple[bytes, bytes] | None:
        """On the store's thread: the URL's data (its section, decoded for BINARY) and its
        part's BODYSTRUCTURE, read by the URL's owner; None when it may not be fetched."""
        from adapters.imap import urlauth

        try:
            url = urlauth.parse(text)
        except urlauth.BadUrl:
            return None
        if url.token is None or not url.may_fetch(self.face.user):
            return None
        self.server.catch_up()
        raw = None
        for user in url.owners():
            try:
                owner = self.server.face_of(user)
                account, name = owner.resolve(url.mailbox_name)
                status = owner.mailbox_status(account, name)
                uidvalidity = int(status["uidvalidity"])
                if url.uidvalidity in (None, uidvalidity) and self.server.url_keys.verify(
                        (owner.user, account, name, uidvalidity), url):
                    raw = b"".join(owner.body(account, name, url.uid))
                    break
            except LetterlogError:
                continue
        if raw is None:
            return None
        message = mime.parse(raw)
        part = mime.part_at(message, url.section) if url.section else message
        if part is None:
            return None
        binary = "BINARY" in modifiers
        data: bytes | None
        try:
            if binary:  # leaves decoded, as Dovecot gives a message/rfc822 part
                if not url.section:
                    data = mime.binary_form(part)
                elif not part.children and part.message is None:
                    data = mime.decode_body(part)
                else:
                    data = mime.binary_body(part)
            else:
                data = mime.section(message, url.section) if url.section else raw
        except (mime.SectionError, mime.UnknownEncoding):
            return None
        if data is None:
            return None
        if url.partial is not None:
            start, length = url.partial
            data = data[start:start + length] if length is not None else data[start:]
        # with BINARY, the structure of the data sent (sizes and lines decoded)
        return data, mime.bodystructure(part, measure=mime.binary_measure if binary else None)

    async def cmd_append(self, tag: str, args: list[Token]) -> str:
        """APPEND, and MULTIAPPEND (RFC 3502: several messages, each with its flags and
        date; all of them or none: ``_append_all``)."""
        if len(args) < 2:
            raise BadCommand("APPEND takes a mailbox and a message")
        path = _mailbox_name(args[0])
        rest = args[1:]
        messages: list[dict[str, Any]] = []
        while rest:
            flags: list[str] = []
            fields: dict[str, Any] = {}
            if isinstance(rest[0], list):
                flags = [_text(f) for f in rest[0]]
                rest = rest[1:]
            if len(rest) > 1 and isinstance(rest[0], String) and not rest[0].literal:
                fields["internal_date"] = parse_date_time(rest[0].text())
                rest = rest[1:]
            if any(f.lower() == "\\recent" for f in flags):
                raise BadCommand("\\Recent cannot be set")
            if len(rest) > 1 and isinstance(rest[0], Atom) and rest[0].upper() == "CATENATE" \
                    and isinstance(rest[1], list):
                pieces: Any = rest[1]  # CATENATE (RFC 4469): read once the command is whole
                rest = rest[2:]
            elif rest and isinstance(rest[0], String):
                pieces = rest[0]
                rest = rest[1:]
            else:
                raise BadCommand("APPEND needs each message as a literal")
            messages.append({**fields, "raw": pieces, "flags": [_flag_name(f) for f in flags]})
        account, name = self.resolve(path)
        try:  # a missing target is TRYCREATE before any CATENATE part is read
            await self.call(self.face.my_rights, account, name)
        except No as no:
            if no.code == "NONEXISTENT":
                no.code = "TRYCREATE"
            raise
        for fields in messages:
            fields["raw"] = await self._catenated(fields["raw"])
        delivered = await self._append_all(account, name, messages)
        await self.report()
        uids = {d.uid for d in delivered}
        sel = self.selected
        if sel is not None and (sel.account, sel.name) == (account, name):
            await self.settle(lambda s: uids <= set(s.entries))
        return (f"[APPENDUID {delivered[0].uidvalidity} "
                f"{_compact(sorted(uids))}] APPEND completed")

    async def _append_all(self, account: str, name: str, messages: list[dict[str, Any]]
                          ) -> list[Any]:
        """Delivers ``messages`` into the mailbox, all or none (RFC 3502): every message's
        fields are checked and the account's quota is checked for all of them together
        before the first is delivered; a delivery that still fails (a quota another
        session used up meanwhile, an outage) takes the ones before it out again (\\Deleted
        and expunged, as the user: it needs 't' and 'e' where the target is shared, and
        without them the answer says what was left)."""
        def check() -> None:
            for fields in messages:
                self.face.check_delivery(account=account, mailbox=name,
                                         **{k: v for k, v in fields.items() if k != "raw"})
            if len(messages) < 2:
                return
            try:
                quota = self.face.quota(account)
            except PermissionDenied:
                return  # another account's quota: each delivery checks it
            size = sum(len(f["raw"]) for f in messages)
            for resource, adding in (("bytes", size), ("messages", len(messages))):
                limit, used = quota[resource]["limit"], quota[resource]["used"]
                if limit > 0 and used + adding > limit:
                    raise QuotaExceeded(account, resource, limit, used, adding)

        try:
            await self.call(check)
        except No as no:
            if no.code == "NONEXISTENT":
                no.code = "TRYCREATE"
            raise
        delivered: list[Any] = []
        for fields in messages:
            try:
                delivered.append(await self.call(self.face.deliver, account=account,
                                                 mailbox=name, **fields))
            except No as no:
                if no.code == "NONEXISTENT":
                    no.code = "TRYCREATE"
                if delivered:
                    await self._take_back(delivered, no)
                raise
        return delivered

    async def _take_back(self, delivered: list[Any], failure: No) -> None:
        """A MULTIAPPEND that failed part way: the messages it delivered are expunged."""
        ids = [d.message_id for d in delivered]
        try:
            for message_id in ids:
                await self.call(self.face.flag, message_id, ["\\Deleted"], "add")
            await self.call(self.face.expunge, ids)
        except No as no:
            log.error("imap: MULTIAPPEND of %s failed after %d messages and they could not "
                      "be taken back: %s", self.user, len(ids), no)
            failure.args = (f"{failure}; the first {len(ids)} messages were delivered and "
                            f"could not be taken back ({no})",)

    async def _catenated(self, pieces: String | list[Token]) -> bytes:
        """A message given as a literal, or as CATENATE's TEXT literals and URLs of parts
        of messages the user may read (RFC 4469 with RFC 5092 URLs of this server)."""
        if isinstance(pieces, String):
            raw = pieces.value
            # literal8: binary parts are kept as base64 (RFC 3516 4.2)
            return mime.binary_parts_as_base64(raw) if pieces.binary else raw
        out = b""
        i = 0
        while i < len(pieces):
            kind = _text(pieces[i]).upper() if isinstance(pieces[i], Atom) else ""
            value = pieces[i + 1] if i + 1 < len(pieces) else None
            if kind not in ("TEXT", "URL") or not isinstance(value, String):
                raise BadCommand("CATENATE takes TEXT literal and URL \"url\" parts")
            if kind == "TEXT":
                if not value.literal:
                    raise BadCommand("CATENATE's TEXT is a literal")
                out += value.value
            else:
                out += await self._url_part(value.text())
            i += 2
        return out

    async def _url_part(self, url: str) -> bytes:
        """``/mailbox[;UIDVALIDITY=n]/;UID=n[/;SECTION=s][/;PARTIAL=o[.l]]``, read as the
        user reads it (rights and policy as FETCH)."""
        from urllib.parse import unquote

        m = re.match(r"^/([^;/][^;]*?|[^;]*?)(?:;UIDVALIDITY=(\d+))?/;UID=(\d+)"
                     r"(?:/;SECTION=([^/]*))?(?:/;PARTIAL=(\d+)(?:\.(\d+))?)?$", url, re.I)
        if not m:
            raise No(f"cannot use the URL {url!r}", "BADURL " + _quoted_code(url))
        account, name = self.resolve(_pattern_name(Atom(unquote(m.group(1)))))
        try:
            status, _ = await self.call(self._open, account, name)
            if m.group(2) and int(m.group(2)) != status["uidvalidity"]:
                raise No("UIDVALIDITY differs", "")
            raw = b"".join(await self.call(
                lambda: list(self.face.body(account, name, int(m.group(3))))))
        except No:
            raise No(f"cannot use the URL {url!r}", "BADURL " + _quoted_code(url)) from None
        part = mime.parse(raw)
        data = mime.section(part, m.group(4) or "") if m.group(4) else raw
        if data is None:
            raise No(f"no such section in {url!r}", "BADURL " + _quoted_code(url))
        if m.group(5) is not None:
            start = int(m.group(5))
            data = data[start:start + int(m.group(6))] if m.group(6) else data[start:]
        return data

    async def cmd_idle(self, tag: str, args: list[Token]) -> str:
        await self.send(b"+ idling\r\n")
        await self.report()
        line_task = asyncio.ensure_future(self.reader.readline())
        try:
            while True:
                changed = asyncio.ensure_future(self.server.changed.wait())
                done, _ = await asyncio.wait({line_task, changed}, timeout=30,
                                             return_when=asyncio.FIRST_COMPLETED)
                if changed not in done:
                    changed.cancel()
                if line_task in done:
                    line = line_task.result()
                    if not line:
                        raise ConnectionError("client gone")
                    if line.strip().upper() != b"DONE":
                        raise BadCommand("expected DONE")
                    return "IDLE terminated"
                await self.report()
        finally:
            if not line_task.done():
                line_task.cancel()

    # -- selected -------------------------------------------------------------------------
    async def cmd_close(self, tag: str, args: list[Token]) -> str:
        sel = self.selected
        assert sel is not None
        if not sel.readonly and "e" in sel.rights:
            ids = [e.message_id for e in sel.entries.values() if "\\Deleted" in e.flags]
            if ids:
                await self.call(self.face.expunge, ids)
        self.selected = None
        self.contexts.clear()
        return "CLOSE completed"

    async def cmd_unselect(self, tag: str, args: list[Token]) -> str:
        self.selected = None
        self.contexts.clear()
        return "UNSELECT completed"

    async def cmd_expunge(self, tag: str, args: list[Token], uids: str | None = None) -> str:
        sel = self.selected
        assert sel is not None
        if sel.readonly:
            raise No("the mailbox is read-only", "READ-ONLY")
        ranges = sequence_set(uids, sel.uids[-1] if sel.uids else 0) if uids else None
        for attempt in range(3):
            await self.report()
            ids = [e.message_id for e in sel.entries.values() if "\\Deleted" in e.flags
                   and (ranges is None or in_set(e.uid, ranges))]
            if not ids:
                break
            try:
                await self.call(self.face.expunge, ids)
                await self.settle(partial(_none_of, frozenset(ids)))
                break
            except No as no:
                # another session took \Deleted off (or expunged) one of them since this one
                # looked: look again, and expunge what is marked now
                if attempt == 2 or no.code not in ("CANNOT", *GONE):
                    raise
        await self.report()
        return "EXPUNGE completed"

    async def cmd_uid_expunge(self, tag: str, args: list[Token]) -> str:
        if not args:
            raise BadCommand("UID EXPUNGE needs a UID set")
        return await self.cmd_expunge(tag, [], uids=_text(args[0]))

    def _targets(self, spec: str, by_uid: bool) -> list[tuple[int, int]]:
        """(seq, uid) of the messages a set names, in order."""
        sel = self.selected
        assert sel is not None
        if spec == "$":
            raise BadCommand("no saved search result")
        if by_uid:
            ranges = sequence_set(spec, sel.uids[-1] if sel.uids else 0)
            return [(i + 1, uid) for i, uid in enumerate(sel.uids) if in_set(uid, ranges)]
        if not sel.uids:
            raise BadCommand("no messages")
        ranges = sequence_set(spec, len(sel.uids))
        if any(high > len(sel.uids) for _, high in ranges):
            raise BadCommand("invalid message sequence number")
        return [(i + 1, uid) for i, uid in enumerate(sel.uids) if in_set(i + 1, ranges)]

    async def cmd_search(self, tag: str, args: list[Token], by_uid: bool = False) -> str:
        sel = self.selected
        assert sel is not None
        if not by_uid:
            await self.report(expunges=False)
        try:
            query = parse_search(args, sel)
        except SearchError as e:
            raise BadCommand(str(e)) from None
        searcher = Searcher(sel, lambda uid: self.call(self.message, uid))
        found = await searcher.run(query)
        numbers = [uid if by_uid else sel.seq_of(uid) for uid in found]
        if query.uses_modseq:
            await self.enable_condstore()
        returned = found
        if query.returns and not {"ALL", "COUNT"} & set(query.returns) and found:
            returned = [u for u in found if ("MIN" in query.returns and u == found[0])
                        or ("MAX" in query.returns and u == found[-1])]
            if query.partial is not None:
                returned += partial_of(found, query.partial)
        modseq = max(sel.entries[u].modseq for u in returned) \
            if query.uses_modseq and returned else None
        if query.returns is None:
            line = "SEARCH" + "".join(f" {n}" for n in numbers)
            if modseq is not None:
                line += f" (MODSEQ {modseq})"
        else:  # ESEARCH (RFC 4731), CONTEXT=SEARCH (RFC 5267)
            line = f'ESEARCH (TAG "{tag}")' + (" UID" if by_uid else "")
            line += _esearch_results(numbers, query.returns, query.partial, _compact)
            if modseq is not None:
                line += f" MODSEQ {modseq}"
            if "UPDATE" in query.returns:
                self.contexts[tag] = Context(tag, query, by_uid, set(found))
        await self.untagged(line)
        if by_uid:
            await self.report()
        return "SEARCH completed"

    async def cmd_cancelupdate(self, tag: str, args: list[Token]) -> str:
        """CANCELUPDATE (RFC 5267 4.3): the named searches are no longer updated."""
        if not args:
            raise BadCommand("CANCELUPDATE needs the tags of searches")
        for t in args:
            if not isinstance(t, String):
                raise BadCommand("CANCELUPDATE takes quoted tags")
            self.contexts.pop(t.text(), None)
        return "CANCELUPDATE completed"

    async def context_changes(self, old_uids: list[int]
                              ) -> tuple[list[str], list[str]]:
        """The updates of the searches kept with RETURN (UPDATE) since their last report:
        REMOVEFROM lines (positions before this report's expunges: sent before them) and
        ADDTO lines (sent after EXISTS)."""
        sel = self.selected
        if sel is None or not self.contexts:
            return [], []
        from bisect import bisect_left

        removes: list[str] = []
        adds: list[str] = []
        searcher = Searcher(sel, lambda uid: self.call(self.message, uid))
        for ctx in list(self.contexts.values()):
            now = await searcher.run(ctx.query)
            if ctx.sort is not None:
                now = [uid for _, uid in await self._sorted(ctx.sort, now)]
            gone = sorted(ctx.result - set(now))
            new = [u for u in now if u not in ctx.result]
            ctx.result = set(now)
            head = f'ESEARCH (TAG "{ctx.tag}")' + (" UID" if ctx.by_uid else "")
            if gone:
                old = [u if ctx.by_uid else bisect_left(old_uids, u) + 1 for u in gone]
                removes.append(f"{head} REMOVEFROM (0 {_compact(sorted(old))})")
            if new and ctx.sort is None:
                numbers = [u if ctx.by_uid else sel.seq_of(u) for u in new]
                adds.append(f"{head} ADDTO (0 {_compact(sorted(numbers))})")
            elif new:  # sorted: each at its position in the new order
                for u in new:
                    adds.append(f"{head} ADDTO ({now.index(u) + 1} "
                                f"{u if ctx.by_uid else sel.seq_of(u)})")
        return removes, adds

    async def cmd_uid_search(self, tag: str, args: list[Token]) -> str:
        return await self.cmd_search(tag, args, by_uid=True)

    async def cmd_sort(self, tag: str, args: list[Token], by_uid: bool = False) -> str:
        """SORT (RFC 5256, SORT=DISPLAY: RFC 5957), and ESORT's RETURN (RFC 5267)."""
        from adapters.imap import sort

        sel = self.selected
        assert sel is not None
        returns: list[str] | None = None
        partial_range = None
        if args and isinstance(args[0], Atom) and args[0].upper() == "RETURN":
            if len(args) < 2 or not isinstance(args[1], list):
                raise BadCommand("RETURN needs a list of options")
            try:
                returns, partial_range = return_options(args[1])
            except SearchError as e:
                raise BadCommand(str(e)) from None
            args = args[2:]
        if len(args) < 3 or not isinstance(args[0], list):
            raise BadCommand("SORT takes (criteria) charset search-keys")
        try:
            criteria = sort.parse_criteria([_text(t) for t in args[0]])
            query = parse_search([Atom("CHARSET"), args[1], *args[2:]], sel)
        except (sort.SortError, SearchError) as e:
            raise BadCommand(str(e)) from None
        found = await Searcher(sel, lambda uid: self.call(self.message, uid)).run(query)
        keyed = await self._sorted(criteria, found)
        numbers = [uid if by_uid else sel.seq_of(uid) for _, uid in keyed]
        if returns is None:
            await self.untagged("SORT" + "".join(f" {n}" for n in numbers))
        else:
            line = f'ESEARCH (TAG "{tag}")' + (" UID" if by_uid else "")
            line += _esearch_results(numbers, returns, partial_range, _in_order)
            await self.untagged(line)
            if "UPDATE" in returns:
                self.contexts[tag] = Context(tag, query, by_uid, {u for _, u in keyed},
                                             criteria)
        if by_uid:
            await self.report()
        return "SORT completed"

    async def _sorted(self, criteria: Any, found: list[int]) -> list[tuple[Any, int]]:
        """``found`` in the order of the SORT ``criteria``, each with its sort key."""
        from adapters.imap import sort

        sel = self.selected
        assert sel is not None
        keyed = []
        for uid in found:
            msg = None
            if sort.needs_message(criteria):
                try:
                    msg = await self.call(self.message, uid)
                except No as no:
                    if no.code not in GONE:
                        raise
            keyed.append((sort.sort_key(criteria, sel.seq_of(uid), sel.entries[uid], msg),
                          uid))
        keyed.sort(key=lambda pair: pair[0])
        return keyed

    async def cmd_uid_sort(self, tag: str, args: list[Token]) -> str:
        return await self.cmd_sort(tag, args, by_uid=True)

    async def cmd_thread(self, tag: str, args: list[Token], by_uid: bool = False) -> str:
        """THREAD (RFC 5256): ORDEREDSUBJECT and REFERENCES."""
        from adapters.imap import sort, thread

        sel = self.selected
        assert sel is not None
        if len(args) < 3 or not isinstance(args[0], Atom):
            raise BadCommand("THREAD takes an algorithm, a charset and search keys")
        algorithm = args[0].upper()
        if algorithm not in ("ORDEREDSUBJECT", "REFERENCES"):
            raise BadCommand(f"unknown threading algorithm {algorithm}")
        try:
            query = parse_search([Atom("CHARSET"), args[1], *args[2:]], sel)
        except SearchError as err:
            raise BadCommand(str(err)) from None
        found = await Searcher(sel, lambda uid: self.call(self.message, uid)).run(query)
        messages = []
        for uid in found:
            seq, e = sel.seq_of(uid), sel.entries[uid]
            try:
                msg = await self.call(self.message, uid)
            except No as no:
                if no.code not in GONE:
                    raise
                continue
            messages.append(thread.Message(
                uid if by_uid else seq, (sort.key_of("DATE", seq, e, msg), seq),
                msg.get("subject"), msg.get("message-id"), msg.get("references"),
                msg.get("in-reply-to")))
        if algorithm == "ORDEREDSUBJECT":
            threads = thread.ordered_subject(messages)
        else:
            threads = thread.references(messages)
        await self.untagged("THREAD" + (" " + threads if threads else ""))
        if by_uid:
            await self.report()
        return "THREAD completed"

    async def cmd_uid_thread(self, tag: str, args: list[Token]) -> str:
        return await self.cmd_thread(tag, args, by_uid=True)

    def message(self, uid: int) -> mime.Part:
        """The message's structure, from its bytes (``body``: a preview read, checked and
        refused as ``extract`` refuses). The last few are kept while the log stands still
        (any change may be a right taken away), at most ``PARSED_BYTES`` of them."""
        sel = self.selected
        assert sel is not None
        head = self.server.catch_up()
        if head != self.parsed_at:
            self.parsed.clear()
            self.parsed_at = head
        key = (sel.account, sel.name, sel.uidvalidity, uid)
        if key in self.parsed:
            self.parsed.move_to_end(key)
            return self.parsed[key]
        raw = b"".join(self.face.body(sel.account, sel.name, uid))
        part = mime.parse(raw)
        self.parsed[key] = part
        while len(self.parsed) > 16 or sum(len(p.raw) for p in self.parsed.values()) \
                > PARSED_BYTES:
            self.parsed.popitem(last=False)
        return part

    async def cmd_fetch(self, tag: str, args: list[Token], by_uid: bool = False) -> str:
        from adapters.imap.fetch import FetchItems

        sel = self.selected
        assert sel is not None
        if len(args) < 2:
            raise BadCommand("FETCH takes a set and items")
        if not by_uid:
            await self.report(expunges=False)
        items = FetchItems.parse(args[1], by_uid)
        changedsince = None
        mods: list[Token] = args[2] if len(args) > 2 and isinstance(args[2], list) else []
        for i, m in enumerate(mods):
            if isinstance(m, Atom) and m.upper() == "CHANGEDSINCE" and i + 1 < len(mods):
                changedsince = int(_text(mods[i + 1]))
                items.modseq = True
        if items.modseq:
            await self.enable_condstore()
        targets = self._targets(_text(args[0]), by_uid)
        if by_uid and self.qresync and changedsince is not None and any(
                isinstance(m, Atom) and m.upper() == "VANISHED" for m in mods):
            top = sel.uids[-1] if sel.uids else 0
            present = set(sel.uids)
            asked = sequence_set(_text(args[0]), max(top, 1))
            gone_uids = sorted({u for low, high in asked
                                for u in range(low, min(high, max(sel.uidnext - 1, 0)) + 1)
                                if u not in present})
            if gone_uids:
                await self.untagged(f"VANISHED (EARLIER) {_compact(gone_uids)}")
        gone = 0
        for seq, uid in targets:
            e = sel.entries.get(uid)
            if e is None or (changedsince is not None and e.modseq <= changedsince):
                continue
            try:
                line = await items.render(self, sel, seq, e)
            except No as no:
                if no.code not in GONE:
                    raise
                gone += 1  # expunged by another session: its EXPUNGE is still to come
                continue
            await self.send(line)
        if self.contexts:  # a FETCH of a body may have set \Seen
            removes, adds = await self.context_changes(list(sel.uids))
            for update in removes + adds:
                await self.untagged(update)
        if by_uid:
            await self.report()
        if gone:
            raise No("Some of the requested messages no longer exist", "EXPUNGEISSUED")
        return "FETCH completed"

    async def cmd_uid_fetch(self, tag: str, args: list[Token]) -> str:
        return await self.cmd_fetch(tag, args, by_uid=True)

    async def set_seen(self, sel: Selected, e: Entry) -> bool:
        """FETCH BODY[...] (not PEEK) marks the message \\Seen where the user may."""
        if sel.readonly or "\\Seen" in e.flags or "s" not in sel.rights:
            return False
        change = await self.call(self.face.flag, e.message_id, ["\\Seen"], "add")
        e.flags = e.flags | {"\\Seen"}
        if change.modseq:
            e.modseq = change.modseq
        return True

    async def cmd_store(self, tag: str, args: list[Token], by_uid: bool = False) -> str:
        sel = self.selected
        assert sel is not None
        if len(args) < 3:
            raise BadCommand("STORE takes a set, an item and flags")
        if sel.readonly:
            raise No("the mailbox is read-only", "READ-ONLY")
        rest = args[1:]
        unchangedsince = None
        if isinstance(rest[0], list):
            mods = rest[0]
            if len(mods) == 2 and _text(mods[0]).upper() == "UNCHANGEDSINCE":
                unchangedsince = int(_text(mods[1]))
                await self.enable_condstore()
            rest = rest[1:]
        item = _text(rest[0]).upper()
        m = re.match(r"^([+-]?)FLAGS(\.SILENT)?$", item)
        if not m:
            raise BadCommand(f"unknown STORE item {item}")
        values = rest[1] if isinstance(rest[1], list) else rest[1:]
        flags = [_flag_name(_text(f)) for f in values]
        if any(f.lower() == "\\recent" for f in flags):
            raise BadCommand("\\Recent cannot be stored")
        mode = {"+": "add", "-": "remove", "": "replace"}[m.group(1)]
        silent = bool(m.group(2))
        if not by_uid:
            await self.report(expunges=False)
        failed: list[int] = []
        for seq, uid in self._targets(_text(args[0]), by_uid):
            e = sel.entries[uid]
            if unchangedsince is not None and e.modseq > unchangedsince:
                failed.append(uid if by_uid else seq)
                continue
            new = _apply(e.flags, frozenset(flags), mode)
            if new != e.flags:
                try:
                    change = await self.call(self.face.flag, e.message_id, flags, mode)
                except No as no:
                    if no.code in GONE:  # expunged meanwhile: left alone, as Dovecot does
                        continue
                    raise
                e.flags = new
                if getattr(change, "modseq", 0):
                    e.modseq = change.modseq
                await self.announce_keywords(sel)
            if not silent or (self.condstore and unchangedsince is not None):
                await self.untagged(self._flags_line(sel, seq, e, uid=by_uid))
        removes, adds = await self.context_changes(list(sel.uids))  # this STORE's own
        for line in removes + adds:
            await self.untagged(line)
        if by_uid:
            await self.report()
        if failed:
            return f"[MODIFIED {','.join(map(str, failed))}] conditional STORE failed"
        return "STORE completed"

    async def cmd_uid_store(self, tag: str, args: list[Token]) -> str:
        return await self.cmd_store(tag, args, by_uid=True)

    async def cmd_copy(self, tag: str, args: list[Token], by_uid: bool = False,
                       move: bool = False) -> str:
        sel = self.selected
        assert sel is not None
        if len(args) != 2:
            raise BadCommand("COPY takes a set and a mailbox")
        targets = self._targets(_text(args[0]), by_uid)
        account, name = self.resolve(_mailbox_name(args[1]))
        if account != sel.account:
            raise No("copying into another account's mailbox is not supported yet", "CANNOT")
        try:
            await self.call(self.face.mailbox_status, account, name)
        except No as no:
            if no.code == "NONEXISTENT":
                no.code = "TRYCREATE"
            raise
        source, dest = [], []
        uidvalidity = 0
        gone = 0
        for _seq, uid in targets:
            e = sel.entries[uid]
            try:
                if move:
                    change = await self.call(self.face.move, e.message_id, name)
                    extra = getattr(change, "extra", {}) or {}
                    new_uid = extra.get("uid")
                    uidvalidity = extra.get("uidvalidity", uidvalidity)
                else:
                    d = await self.call(self.face.copy, e.message_id, name)
                    new_uid, uidvalidity = d.uid, d.uidvalidity
            except No as no:
                if no.code not in GONE:
                    raise
                gone += 1  # expunged by another session meanwhile
                continue
            if new_uid:
                source.append(uid)
                dest.append(int(new_uid))
        if gone:
            await self.report()
            raise No("Some of the requested messages no longer exist", "EXPUNGEISSUED")
        code = ""
        if source:
            code = f"[COPYUID {uidvalidity} {_compact(source)} {_compact(dest)}] "
        if move:
            if code:
                await self.untagged(f"OK {code.strip()} moved")
            await self.report()
            moved = set(source)
            await self.settle(lambda s: not moved & set(s.entries))
            return "MOVE completed"
        if by_uid:
            await self.report()
        return f"{code}COPY completed"

    async def cmd_uid_copy(self, tag: str, args: list[Token]) -> str:
        return await self.cmd_copy(tag, args, by_uid=True)

    async def cmd_move(self, tag: str, args: list[Token]) -> str:
        return await self.cmd_copy(tag, args, move=True)

    async def cmd_uid_move(self, tag: str, args: list[Token]) -> str:
        return await self.cmd_copy(tag, args, by_uid=True, move=True)


def _esearch_results(numbers: list[int], returns: list[str],
                     partial: tuple[int, int] | None, listed: Callable[[list[int]], str]
                     ) -> str:
    """ESEARCH's result items for RETURN ``returns`` (``numbers`` in the result's order:
    ascending for SEARCH, sorted for SORT; ``listed`` writes a set of them)."""
    wanted = [r for r in returns if r != "UPDATE"] or ["ALL"]
    out = ""
    if numbers and "MIN" in wanted:
        out += f" MIN {min(numbers) if listed is _compact else numbers[0]}"
    if numbers and "MAX" in wanted:
        out += f" MAX {max(numbers) if listed is _compact else numbers[-1]}"
    if "COUNT" in wanted:
        out += f" COUNT {len(numbers)}"
    if numbers and "ALL" in wanted:
        out += f" ALL {listed(sorted(numbers) if listed is _compact else numbers)}"
    if partial is not None:
        part = partial_of(numbers, partial)
        shown = listed(sorted(part) if listed is _compact else part) if part else "NIL"
        out += f" PARTIAL ({partial[0]}:{partial[1]} {shown})"
    return out


@dataclass
class Context:
    """A search kept with RETURN (UPDATE) (RFC 5267): its result (UIDs) as last reported."""

    tag: str
    query: Query
    by_uid: bool
    result: set[int]
    sort: Any = None  # SORT's criteria, for a sorted result


def _quota_line(root: str, quota: dict[str, Any]) -> bytes:
    """``* QUOTA root (...)``: STORAGE in KiB (RFC 9208), MESSAGE; an unlimited one is
    left out."""
    items = []
    storage, messages = quota["bytes"], quota["messages"]
    if storage["limit"] > 0:
        items.append(f"STORAGE {(storage['used'] + 1023) // 1024} {storage['limit'] // 1024}")
    if messages["limit"] > 0:
        items.append(f"MESSAGE {messages['used']} {messages['limit']}")
    return b"QUOTA " + astring_out(root) + f" ({' '.join(items)})".encode()


NOTIFY_FILTERS = ("SELECTED", "SELECTED-DELAYED", "INBOXES", "PERSONAL", "SUBSCRIBED",
                  "SUBTREE", "MAILBOXES")
NOTIFY_EVENTS = ("MESSAGENEW", "MESSAGEEXPUNGE", "FLAGCHANGE", "ANNOTATIONCHANGE",
                 "MAILBOXNAME", "SUBSCRIPTIONCHANGE", "MAILBOXMETADATACHANGE",
                 "SERVERMETADATACHANGE")


def _notify_filter(group: Token) -> tuple[str, list[str], set[str]]:
    """One ``(filter [mailboxes] (events))`` of NOTIFY SET: the filter, its mailboxes (for
    SUBTREE and MAILBOXES) and its events (upper case; MessageNew's fetch items are not
    sent: a client fetches what EXISTS announces)."""
    if not isinstance(group, list) or len(group) < 2 or not isinstance(group[0], Atom):
        raise BadCommand("NOTIFY: expected (filter (events))")
    kind = group[0].upper()
    if kind not in NOTIFY_FILTERS:
        raise BadCommand(f"NOTIFY: unknown filter {kind}")
    names: list[str] = []
    rest = group[1:]
    if kind in ("SUBTREE", "MAILBOXES"):
        given = rest[0]
        names = [_mailbox_name(t) for t in (given if isinstance(given, list) else [given])]
        rest = rest[1:]
    if len(rest) != 1 or not isinstance(rest[0], list):
        raise BadCommand("NOTIFY: expected a list of events")
    events: set[str] = set()
    for t in rest[0]:
        if isinstance(t, list):  # MessageNew's fetch attributes
            continue
        event = _text(t).upper()
        if event == "NONE":
            continue
        if event not in NOTIFY_EVENTS:
            raise BadCommand(f"NOTIFY: unknown event {event}")
        events.add(event)
    if {"MESSAGENEW", "MESSAGEEXPUNGE"} & events and not \
            {"MESSAGENEW", "MESSAGEEXPUNGE"} <= events and kind.startswith("SELECTED"):
        raise BadCommand("NOTIFY: MessageNew and MessageExpunge go together")
    return kind, names, events


def _notify_items(events: set[str]) -> list[str]:
    """The STATUS items NOTIFY reports for ``events`` (as Dovecot 2.3 chooses them)."""
    items = []
    if {"MESSAGENEW", "MESSAGEEXPUNGE"} & events:
        items.append("MESSAGES")
    if "MESSAGENEW" in events:
        items += ["UIDNEXT", "UIDVALIDITY"]
    if "FLAGCHANGE" in events:
        if "UIDVALIDITY" not in items:
            items.append("UIDVALIDITY")
        items.append("HIGHESTMODSEQ")
    return items


def _all_events(filters: list[tuple[str, list[str], set[str]]] | None) -> set[str]:
    return set().union(*(events for _, _, events in filters or []))


def _qresync_parameters(params: list[Token]) -> tuple[int, int, str | None] | None:
    """SELECT's ``(QRESYNC (uidvalidity modseq [known-uids [seq-match]]))``."""
    for i, p in enumerate(params):
        if isinstance(p, Atom) and p.upper() == "QRESYNC":
            values = params[i + 1] if i + 1 < len(params) else None
            if not isinstance(values, list):
                raise BadCommand("QRESYNC needs (uidvalidity modseq [known-uids])")
            if len(values) < 2 or not all(isinstance(v, Atom) for v in values[:3]):
                raise BadCommand("QRESYNC needs (uidvalidity modseq [known-uids])")
            try:
                uidvalidity, modseq = int(_text(values[0])), int(_text(values[1]))
            except ValueError:
                raise BadCommand("QRESYNC: uidvalidity and modseq are numbers") from None
            known = _text(values[2]) if len(values) > 2 and isinstance(values[2], Atom) \
                else None
            return uidvalidity, modseq, known
    return None


def _list_returns(rest: list[Token]) -> tuple[list[str], list[str]]:
    """LIST's ``RETURN (...)``: its options, and the STATUS items it asks for."""
    if not rest:
        return [], []
    if len(rest) != 2 or not isinstance(rest[0], Atom) or rest[0].upper() != "RETURN" \
            or not isinstance(rest[1], list):
        raise BadCommand("LIST: expected RETURN (options) after the patterns")
    options: list[str] = []
    status: list[str] = []
    tokens_ = rest[1]
    i = 0
    while i < len(tokens_):
        option = _text(tokens_[i]).upper()
        if option == "STATUS":
            items = tokens_[i + 1] if i + 1 < len(tokens_) else None
            if not isinstance(items, list):
                raise BadCommand("RETURN (STATUS ...) needs a list of items")
            status = [_text(t).upper() for t in items]
            i += 1
        elif option not in ("SUBSCRIBED", "CHILDREN", "SPECIAL-USE"):
            raise BadCommand(f"unknown LIST return option {option}")
        options.append(option)
        i += 1
    return options, status


def _none_of(ids: frozenset[Any], sel: Selected) -> bool:
    """Whether none of the messages ``ids`` is in the selected mailbox any more."""
    return not any(e.message_id in ids for e in sel.entries.values())


def _quoted_code(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _listed_name(path: str) -> str:
    from adapters.imap.utf7 import encode

    return path if path == "INBOX" else encode(path)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _flag_name(flag: str) -> str:
    """A system flag in its usual spelling (``\\seen`` -> ``\\Seen``); keywords as given."""
    if flag.startswith("\\"):
        for f in SYSTEM_FLAGS:
            if f.lower() == flag.lower():
                return f
        if flag.lower() == "\\recent":
            return "\\Recent"
        raise BadCommand(f"unknown system flag {flag}")
    return flag


def _apply(current: frozenset[str], change: frozenset[str], mode: str) -> frozenset[str]:
    if mode == "add":
        return current | change
    if mode == "remove":
        return current - change
    return change


def _in_order(numbers: list[int]) -> str:
    """Numbers in the order given, ascending runs as ranges (ESORT's ALL)."""
    out: list[str] = []
    start = prev = numbers[0]
    for n in numbers[1:] + [-1]:
        if n == prev + 1:
            prev = n
            continue
        out.append(f"{start}:{prev}" if prev != start else str(start))
        start = prev = n
    return ",".join(out)


def _compact(numbers: list[int]) -> str:
    out: list[str] = []
    start = prev = numbers[0]
    for n in numbers[1:] + [0]:
        if n == prev + 1:
            prev = n
            continue
        out.append(f"{start}:{prev}" if prev != start else str(start))
        start = prev = n
    return ",".join(out)


def _pattern(pattern: str) -> re.Pattern[str]:
    regex = "".join(".*" if c == "*" else "[^/]*" if c == "%" else re.escape(c)
                    for c in pattern)
    if pattern.upper().startswith("INBOX"):
        regex = "(?i:INBOX)" + regex[5:] if len(pattern) >= 5 else regex
    return re.compile(f"^{regex}$")
