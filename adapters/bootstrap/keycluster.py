"""The key cluster's parts a scale-out store's backup and restore take, built from
``Settings`` (ADR 0073): the KEKs' cluster itself, the KEK ids it holds, and which KEKs the
PostgreSQL log's live data keys are wrapped under. Imports the PostgreSQL client at its top:
only the backup commands load it."""

from __future__ import annotations

from typing import Any

from adapters.config.settings import Settings, postgres_env_from_dsn
from adapters.eventlog.keycluster import PostgresVault, kek_ids
from adapters.eventlog.keypostgres import kek_use_of


def key_cluster(settings: Settings) -> PostgresVault | None:
    """The key cluster's KEKs (``PostgresVault``), or None when the KEKs are in a vault file
    (ADR 0073)."""
    if not settings.key_store_dsn:
        return None
    return PostgresVault(settings.key_store_dsn, timeout=settings.postgres_timeout,
                         standbys=settings.key_store_standbys.split())


def key_cluster_ids(settings: Settings) -> set[Any]:
    """The KEK ids in the key cluster, read only (none configured: the empty set)."""
    if not settings.key_store_dsn:
        return set()
    return kek_ids(settings.key_store_dsn, timeout=settings.postgres_timeout)


def kek_use(settings: Settings) -> dict[Any, int]:
    """Each KEK the PostgreSQL log's live data keys are wrapped under, and how many."""
    return kek_use_of(postgres_env_from_dsn(settings.postgres_dsn or ""))
