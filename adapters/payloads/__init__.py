"""Payload stores: content-addressed files on disk and an in-memory fake.

May import: ``domain`` (the ``PayloadStore`` port); never ``streaming``, ``cli``, ``bench``
or ``devservers``.
"""
