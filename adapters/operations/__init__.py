"""Running the processes: long-running processes under supervisord (``supervision``), readiness
probes run in a thread (``probing``), waiting out a server's outage (``outages``) and the named
fault points of erasure and purge a test kills the process at (``faults``).

May import: ``domain``, ``projections`` and ``adapters.files``; never ``bootstrap``, ``cli`` or
``devtools``.
"""
