"""Payload stores: content-addressed files on disk and an in-memory fake."""
