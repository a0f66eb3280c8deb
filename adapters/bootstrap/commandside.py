"""The command side ``Settings`` shape: ``Mailstore`` on the log and the payloads, with the
settings' limits and the rule matcher, and its quota rule (the default limits, and a ledger
of an account's usage: the embedded ``counters``, then the log after them; ADR 0050)."""

from __future__ import annotations

from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

from adapters.config.settings import Settings
from adapters.eventlog.store import MailLog
from adapters.facade.quota import LogUsage, TablesSnapshot, counters_snapshot
from adapters.files import datadir
from adapters.rules.matching import RegexMatcher
from domain.ports import PayloadStore
from domain.quota import Quotas, UsageLedger
from domain.service import Mailstore


def mailstore(settings: Settings, log: MailLog, payloads: PayloadStore) -> Mailstore:
    """The command side on ``log`` and ``payloads``, with the settings' limits."""
    mail = Mailstore(
        log,
        payloads,
        limits=settings.message_limits(),
        inline_limit=settings.inline_limit,
        deleted_retention=timedelta(days=settings.deleted_retention_days),
        log_head=log.head,
        reservation_ttl=timedelta(seconds=settings.extraction_reservation_seconds),
    )
    mail.rule_matcher = RegexMatcher()
    mail.rule_search_seconds = settings.rule_search_seconds
    mail.rule_budget_seconds = settings.rule_budget_seconds
    return mail


def quotas(settings: Settings, mail: Mailstore, log: MailLog, host: Any) -> None:
    """The quota rule of ``mail``: the default limits, and a ledger that takes an account's
    usage from the embedded ``counters`` (``host``'s, else ``tables.sqlite`` read only, else
    none) and folds the log after it (ADR 0050)."""
    snapshot: Any = None
    if host is not None:
        snapshot = partial(counters_snapshot, host)
    elif settings.table_store == "embedded" and settings.event_store == "sqlite":
        snapshot = TablesSnapshot(Path(settings.data) / datadir.READ_MODELS)
    ledger = UsageLedger(LogUsage(log, snapshot), mail.uow.head)
    mail.quotas = Quotas(settings.quota_limits(), ledger)
    mail.uow.after_save = mail.quotas.saved
