"""The user purge as ``letterlog purger`` runs it (``ScheduledUserPurge``): after each purge
run, when ``user_purge_interval_days`` have passed since the last accepted run."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from adapters.lifecycle.purgememory import MEMORY_FILE, PurgeMemory, due
from adapters.lifecycle.userpurge import purge_users
from adapters.lifecycle.userpurgereport import UserPurgeReport
from domain.directory import Directory


class ScheduledUserPurge:
    """The user purge as ``letterlog purger`` runs it (``run_purger(user_purge=...)``):
    called after each purge run with the open store, it runs the job when
    ``user_purge_interval_days`` have passed since the last accepted run, and returns the
    report (None when not due). ``make_directory`` builds the directory from the store's
    settings (the entry point hands over ``bootstrap.directory``)."""

    def __init__(self, make_directory: Callable[[Any], Directory]) -> None:
        self.make_directory = make_directory

    def __call__(self, store: Any, now: datetime) -> UserPurgeReport | None:
        settings = store.settings
        memory = PurgeMemory(Path(settings.data) / MEMORY_FILE)
        if not due(memory, timedelta(days=settings.user_purge_interval_days), now):
            return None
        return purge_users(self.make_directory(settings), store, memory,
                           min_ratio=settings.user_purge_min_ratio, now=now)
