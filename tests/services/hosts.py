"""Application hosts in network namespaces, joined to the servers by a bridge.

    root namespace                          namespace ``llhost-a-XXXX``   (host A, 10.232.N.2)
    bridge llbrXXXX  10.232.N.1/24  <-veth->  eth0
      PostgreSQL, Kafka, HBase's Thrift     namespace ``llhost-b-XXXX``   (host B, 10.232.N.3)
      gateways listen here only     <-veth->  eth0

Each application host sees two addresses: its own loopback and the bridge's. It reaches
the servers only over its veth pair, as a second machine on the same network would; a
server that listened on 127.0.0.1 would be out of its reach, and so would anything another
host listens on, except through that host's address on the bridge.

``ApplicationHosts.start()`` makes the bridge and one namespace per host; ``stop()`` kills
every process left in the namespaces and deletes them and the bridge, also after a failed
start. Needs root (``ip netns``); the addresses are private and leave no machine.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


@dataclass(frozen=True)
class Host:
    name: str
    netns: str
    ip: str
    veth: str  # its pair's end in the root namespace, on the bridge

    def argv(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside this host's network namespace."""
        return ["ip", "netns", "exec", self.netns, *argv]

    def run(self, argv: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess[Any]:
        return subprocess.run(self.argv(argv), **kwargs)  # noqa: PLW1510 - callers check

    def popen(self, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
        return subprocess.Popen(self.argv(argv), **kwargs)


class ApplicationHosts:
    def __init__(self, names: Sequence[str] = ("a", "b")) -> None:
        tag = secrets.token_hex(3)
        octet = int(tag[:2], 16)
        self.bridge = f"llbr{tag}"
        self.server_ip = f"10.232.{octet}.1"
        self.hosts = {name: Host(name, f"llhost-{name}-{tag}", f"10.232.{octet}.{i + 2}",
                                 f"llv{name}{tag}") for i, name in enumerate(names)}
        self._made: list[tuple[str, ...]] = []

    def __getitem__(self, name: str) -> Host:
        return self.hosts[name]

    def start(self) -> None:
        try:
            _ip("link", "add", self.bridge, "type", "bridge")
            self._made.append(("link", "del", self.bridge))
            _ip("addr", "add", f"{self.server_ip}/24", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
            for host in self.hosts.values():
                self._join(host)
        except BaseException:
            self.stop()
            raise

    def _join(self, host: Host) -> None:
        _ip("netns", "add", host.netns)
        self._made.append(("netns", "del", host.netns))
        _ip("link", "add", host.veth, "type", "veth", "peer", "name", f"{host.veth}p")
        _ip("link", "set", f"{host.veth}p", "netns", host.netns)
        _ip("link", "set", host.veth, "master", self.bridge)
        _ip("link", "set", host.veth, "up")
        inside = ("netns", "exec", host.netns, "ip")
        _ip(*inside, "link", "set", f"{host.veth}p", "name", "eth0")
        _ip(*inside, "addr", "add", f"{host.ip}/24", "dev", "eth0")
        _ip(*inside, "link", "set", "eth0", "up")
        _ip(*inside, "link", "set", "lo", "up")

    def kill_processes(self, name: str) -> int:
        """SIGKILL to every process in host ``name``'s namespace (a host that died)."""
        netns = self.hosts[name].netns
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            pids = subprocess.run(["ip", "netns", "pids", netns], capture_output=True,
                                  text=True, timeout=30, check=False).stdout.split()
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)
            return len(pids)
        return 0

    def stop(self) -> None:
        for name in self.hosts:
            self.kill_processes(name)
        for args in reversed(self._made):
            with contextlib.suppress(subprocess.SubprocessError):
                _ip(*args)
        self._made.clear()
