"""The read side: projection host, catalog, rebuild and verify.

May import: ``domain``, ``projections``, ``tables``; never ``streaming``, ``cli``
or ``devtools``.
"""
