"""A dev server whose free port another process takes before the server binds it is started
again with other ports (seen in a fresh-clone CI: HBase's ZooKeeper on a machine running
four test workers, and every test of that module failed its set-up)."""

from __future__ import annotations

import socket

import pytest

from devtools.devservers import hbase
from devtools.devservers.hbase import HBaseServer

pytestmark = pytest.mark.services


def test_hbase_whose_zookeeper_port_was_taken_starts_again_with_other_ports(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    taken = holder.getsockname()[1]
    real, handed = hbase.free_ports, []

    def racing(count: int) -> list[int]:  # the first ports handed out: ZooKeeper's is held
        ports = real(count)
        handed.append(ports)
        return [taken, *ports[1:]] if len(handed) == 1 else ports

    monkeypatch.setattr(hbase, "free_ports", racing)
    try:
        with HBaseServer(master_heap="512m") as server:
            assert len(handed) == 2, "the first start did not fail on the held port"
            assert server.zookeeper_port not in (taken, 0)
            connection = server.connection()  # a real round trip on the new ports
            try:
                assert isinstance(connection.tables(), list)
            finally:
                connection.close()
    finally:
        holder.close()
    assert "a port was taken before it bound it" in capsys.readouterr().err
