"""The IMAP server (``letterlog imap``): IMAP4rev1 and the extensions clients use, each
session acting as its logged-in user through the store's caller's face (``as_user``).

``wire`` reads commands and writes strings; ``mime`` reads a message's structure from its
stored bytes; ``fetch`` answers FETCH, ``search`` reads SEARCH's keys and ``searcher``
matches them; ``mailbox`` is a selected mailbox's state; ``session`` is one connection (a
package: one module per family of commands); ``server`` listens, logs users in and watches
the log; ``processes`` runs it, in one process or several. It imports the domain's errors
and nothing of the composition root: the entry point (``adapters.cli.imap``) hands it the
store and the user directory.
"""
