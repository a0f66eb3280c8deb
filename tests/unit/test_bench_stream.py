"""``bench stream``'s balance figures, from per-partition record counts and the group's
assignment as the coordinator describes it (no servers: the benchmark itself runs them)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment

from devtools.bench.stream import _cpu_seconds, _machine_cpu, group_assignment, worker_balance

pytestmark = pytest.mark.bench  # the benchmark harness: `make test-fast` leaves it out


def _assignment(*topics: tuple[str, list[int]]) -> bytes:
    return ConsumerProtocolMemberAssignment(0, list(topics), b'{"faust": 1}').encode()


def test_group_assignment_decodes_each_members_partitions_of_the_topic() -> None:
    described = {"group": "g", "state": "Stable", "members": [
        {"member_id": "w-a", "client_id": "a", "member_assignment":
         _assignment(("bench", [3, 0]), ("other", [1]))},
        {"member_id": "w-b", "client_id": "b", "member_assignment":
         _assignment(("bench", [2, 1]))},
        {"member_id": "w-c", "client_id": "c", "member_assignment": b""},  # not assigned yet
    ]}
    assert group_assignment(described, "bench") == {"w-a": [0, 3], "w-b": [1, 2], "w-c": []}


def test_worker_balance_sums_each_workers_partitions() -> None:
    # the 100k-event log's shape: one partition holds most accounts' records
    records = {0: 61_000, 1: 16_000, 2: 14_000, 3: 9_002}
    got = worker_balance(records, {"w-a": [0, 3], "w-b": [1, 2]})
    assert got["records_per_worker"] == [70_002, 30_000]
    assert got["partitions_per_worker"] == [[0, 3], [1, 2]]
    assert got["busiest_worker_share"] == 0.7
    assert got["unassigned_records"] == 0


def test_worker_balance_of_an_even_split_and_of_one_worker_doing_everything() -> None:
    even = worker_balance({0: 25, 1: 25, 2: 25, 3: 25}, {"a": [0, 1], "b": [2, 3]})
    assert even["busiest_worker_share"] == 0.5
    alone = worker_balance({0: 10, 1: 30}, {"a": [0, 1], "b": []})
    assert alone["records_per_worker"] == [40, 0] and alone["busiest_worker_share"] == 1.0


def test_worker_balance_counts_partitions_nobody_was_assigned() -> None:
    got = worker_balance({0: 10, 1: 30, 2: 60}, {"a": [0], "b": [1]})
    assert got["records_per_worker"] == [30, 10]
    assert got["unassigned_records"] == 60
    assert got["busiest_worker_share"] == 0.3
    assert worker_balance({}, {"a": []})["busiest_worker_share"] is None


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_cpu_seconds_of_a_process_is_what_it_used() -> None:
    deadline = time.process_time() + 0.3
    while time.process_time() < deadline:  # burn some CPU of our own
        pass
    ours, told = time.process_time(), _cpu_seconds(os.getpid())
    assert told is not None and abs(told - ours) < 0.1
    busy, idle = _machine_cpu() or (0.0, 0.0)
    assert busy >= told and idle > 0
    assert _cpu_seconds(2**22 + 1) is None  # above Linux's pid_max: no such process


def test_a_group_that_cannot_be_described_counts_as_empty(monkeypatch) -> None:
    import devtools.bench.stream as bench

    def refuse(bootstrap: str, group: str) -> None:
        raise TimeoutError("coordinator not available")

    monkeypatch.setattr(bench, "_describe_group", refuse)
    described = bench._described("localhost:1", "g")
    assert described == {"members": [], "state": None}
    assert group_assignment(described, "bench") == {}


_DECODE_ALL = """
import sys
from pathlib import Path
from adapters.bootstrap import scaleout as bootstrap
from adapters.eventlog.records import decode_record
from adapters.config.settings import load_settings
keys = bootstrap.key_store(load_settings(data=sys.argv[1]))
failed = 0
for path in sys.argv[2:]:
    try:
        decode_record(Path(path).read_bytes())
    except Exception as error:
        failed += 1
        print(type(error).__name__, error)
print("failed", failed)
"""


def test_the_workers_data_holds_the_logs_keys_so_sealed_records_decode(
        tmp_path: Path, monkeypatch) -> None:
    """A move seals its message's ``personal`` (ADR 0081): a worker whose data directory
    holds none of the log's keys dead-lettered those records (bench stream's verify found
    ``counters``, ``messages``, ``threads`` and ``mailboxes`` short of the move). The records
    are decoded in a fresh process: this one has the log's key store open already."""
    import subprocess
    import sys

    import msgpack

    from adapters.eventlog.records import record_from_notification
    from devtools.bench.benchlog import bench_log, open_reader
    from devtools.bench.stream import ROOT, worker_data

    monkeypatch.setenv("LETTERLOG_BENCH_CACHE", str(tmp_path / "cache"))
    path, _ = bench_log(600)
    reader = open_reader(path)
    try:
        notes = reader.log.recorder.select_notifications(start=1, limit=10_000)
    finally:
        reader.close()
    sealed = []
    for n in notes:
        personal = msgpack.unpackb(bytes(n.state), raw=False, strict_map_key=False).get(
            "personal")
        if isinstance(personal, msgpack.ExtType) and personal.code == 7:  # sealed
            out = tmp_path / f"record-{n.id}"
            out.write_bytes(record_from_notification(n).encode())
            sealed.append(str(out))
    assert sealed, "the bench log holds no sealed event: the test attacks nothing"

    def failures(data: Path) -> int:
        done = subprocess.run([sys.executable, "-c", _DECODE_ALL, str(data), *sealed],
                              cwd=ROOT, capture_output=True, text=True, check=True)
        return int(done.stdout.split()[-1])

    fresh = tmp_path / "fresh"
    fresh.mkdir(mode=0o700)
    assert failures(fresh) == len(sealed)  # what the workers had before
    assert failures(worker_data(path, tmp_path / "worker")) == 0
