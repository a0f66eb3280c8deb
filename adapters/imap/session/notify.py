"""NOTIFY (RFC 5465): changes of the mailboxes a session watches, other than the selected
one, as STATUS and LIST responses."""

from __future__ import annotations

from adapters.imap.session.core import SessionCore
from adapters.imap.session.words import _listed_name, _mailbox_name, _text
from adapters.imap.wire import Atom, BadCommand, Token, astring_out
from domain.errors import LetterlogError


class NotifyCommands(SessionCore):
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
