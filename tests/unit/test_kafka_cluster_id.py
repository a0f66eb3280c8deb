"""The dev Kafka's KRaft cluster id is passed to the storage tool as an argument: one that
started with "-" was taken for an option and the server did not start (1 in 64)."""

from __future__ import annotations

import base64

from devtools.devservers.kafka import new_cluster_id


def test_cluster_ids_are_16_bytes_and_never_look_like_an_option() -> None:
    ids = {new_cluster_id() for _ in range(3000)}
    assert len(ids) == 3000
    assert not any(i.startswith("-") for i in ids)
    assert all(len(base64.urlsafe_b64decode(i + "==")) == 16 for i in ids)
