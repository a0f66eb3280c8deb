"""One IMAP connection (RFC 3501 and the extensions in ``SessionCore.capabilities``): its
states (not authenticated, authenticated, selected), its commands, and its selected mailbox.

After LOGIN / AUTHENTICATE the session holds the store acting as the user (a
``CallerView``, ``Letterlog.as_user``): every command goes through it, so every right and
the user's virtual root apply as they do to ``letterlog --as USER``. Store calls run on the
server's store thread (``Server.call``); the protocol runs on the event loop.

``Session`` is made of one part per family of commands, each a module here, over ``core``
(the connection: reading, dispatch by state, replies, store calls); ``words`` holds what
they share (constants, the readers and writers of the protocol's words).

May import: the rest of ``adapters.imap`` (wire, mime, search, fetch, sort, thread, urlauth,
utf7, mailbox) and ``domain.errors``; the server (``adapters.imap.server``) and the user's
face only for annotations. A family imports ``core`` and ``words``, never another family
but ``searching`` (SORT's ESEARCH answers); ``core`` imports no family.
"""

from __future__ import annotations

from adapters.imap.session.append import AppendCommands
from adapters.imap.session.fetching import FetchCommands
from adapters.imap.session.listing import ListCommands
from adapters.imap.session.login import LoginCommands
from adapters.imap.session.mailboxes import MailboxCommands
from adapters.imap.session.notify import NotifyCommands
from adapters.imap.session.rights import RightsCommands
from adapters.imap.session.searching import SearchCommands
from adapters.imap.session.selecting import SelectCommands
from adapters.imap.session.sorting import SortCommands
from adapters.imap.session.storing import StoreCommands
from adapters.imap.session.updates import Updates
from adapters.imap.session.urls import UrlCommands
from adapters.imap.session.words import SETTLE_SECONDS

__all__ = ["SETTLE_SECONDS", "Session"]


class Session(LoginCommands, SelectCommands, Updates, MailboxCommands, ListCommands,
              RightsCommands, NotifyCommands, UrlCommands, AppendCommands, SearchCommands,
              SortCommands, FetchCommands, StoreCommands):
    """One client's connection: its commands are its parts' ``cmd_*`` methods, found by
    ``SessionCore.handler``."""
