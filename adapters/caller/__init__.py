"""The store acting as a user (``Letterlog.as_user``): ``CallerView`` (``view``), a user's
face of the store made of its parts: the session and its names (``session``), the checks
(``checks``), message and mailbox commands (``messages``, ``mailboxes``), queries
(``queries``) and the listing (``listing``); each member's rule in ``rules.FACE_RULES``.

May import: ``domain``, ``projections`` (for annotations) and ``adapters.face`` (for
annotations); never ``bootstrap``, ``embedded``, the CLI, the processes or the tools.
"""

from adapters.caller.rules import FACE_RULES, OWNER, PRESENT, RIGHTS_RULE, SESSION, VISIBLE
from adapters.caller.view import CallerView

__all__ = ["FACE_RULES", "OWNER", "PRESENT", "RIGHTS_RULE", "SESSION", "VISIBLE", "CallerView"]
