"""What exists only for start-up speed: the pieces a ``letterlog`` process runs before (or
instead of) importing the application. README.md says why each exists and what a process
costs without it. Imports nothing: every module here is loaded on its own.

May import: the standard library (each module says which parts); never the rest of
``adapters`` at import time.
"""
