"""The store's files on disk: the data directory's names and checks (``datadir``) and private
files and directories (``filemodes``).

May import: ``domain``; nothing of ``adapters``. Kept free of imports here: the fast read path
(``adapters.startup.current``) imports ``datadir``.
"""
