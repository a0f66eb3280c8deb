"""The store acting as a user: ``Letterlog.as_user(user)`` / ``Letterlog.open(..., user=)``.

A ``CallerView`` offers the store's commands and queries; each first checks, on the command
side's aggregates, that the caller has the rights ``domain.rights.COMMAND_RIGHTS`` names,
then runs the store's own method. A refusal is ``PermissionDenied`` naming the missing
right, raised before anything is written. A mailbox the caller may not look up (no ``l``),
one outside its virtual root, and one that does not exist are refused alike
(``MailboxNotFound``, the same words), and so are messages in them (``MessageNotFound``).
What the table does not name is the administrator's only: the view implements the user's
``adapters.face.Face`` and nothing else (no fallback to the store behind it), so a caller
holding it cannot name an administrator's method without a type error, and at run time
such a name is an ``AttributeError``.

Names: the caller's root is ``account[/path]`` (``set_root``; default: its own account, when
its name is an address). Mailboxes of the root's account are named by the caller at or below
the path (``Letterlog``'s (account, mailbox) arguments, or ``resolve(path)`` from a path
relative to the root); mailboxes of other accounts the caller may look up are
``shared/<account>/<mailbox>`` in its listing (``mailboxes()``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from adapters.caller.listing import CallerListing
from adapters.caller.mailboxes import CallerMailboxes
from adapters.caller.messages import CallerMessages
from adapters.caller.queries import CallerQueries

if TYPE_CHECKING:
    from adapters.face import Face

    _Face = Face  # the face it implements, checked by mypy (not a base at run time: ADR 0077)
else:
    _Face = object


class CallerView(CallerMessages, CallerMailboxes, CallerQueries, CallerListing, _Face):
    """``store`` as ``caller``: the user's face of the store, each call checked first."""


if TYPE_CHECKING:
    _IMPLEMENTS: type[Face] = CallerView  # mypy: every member of the face, none abstract
