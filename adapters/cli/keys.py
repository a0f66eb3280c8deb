"""``letterlog keys migrate``: the key-encryption keys of a scale-out store's vault file
moved into the key cluster (``LETTERLOG_KEY_STORE_DSN``; ADR 0073)."""

from __future__ import annotations

from typing import Annotated

import typer

from adapters.cli.common import group, out, state

app = group("The key-encryption keys' store.")
SECTION = (85, 'Keys')  # the root help's section (adapters.cli.table)
keys_app = group("The key-encryption keys' store (scale-out: the key cluster, ADR 0073).")
app.add_typer(keys_app, name="keys")


@keys_app.command("migrate")
def migrate(keep_file: Annotated[bool, typer.Option(
        "--keep-file", help="keep the vault file once its keys are in the key cluster "
                            "(it then still holds them: remove it soon)")] = False) -> None:
    """Copy every key-encryption key of the vault file (LETTERLOG_KEY_VAULT, default
    DATA/vault.sqlite) into the key cluster, read them back, check that every data key's
    KEK is there, then remove the file. Idempotent; nothing is removed unless every check
    passed (exit 2 then, naming what is missing)."""
    result = state.admin_reader().migrate_keys(remove_file=not keep_file)
    out(result, f"{result['keks_copied']} key-encryption keys copied from "
                f"{result['vault_file']} ({result['keks_in_file']} in it) into "
                f"{result['key_store']} ({result['keks_in_key_store']} there); every one of "
                f"the {result['referenced']} the data keys use is there"
                + ("; the file is removed" if result["file_removed"] else ""))
