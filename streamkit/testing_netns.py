"""Network partitions for tests: each "host" is a Linux network namespace on one bridge.

::

    from streamkit.testing_netns import Network

    with Network(["b0", "b1", "b2"]) as net:           # needs root and iproute2's ip
        b1 = net["b1"]                                  # a Host: b1.address is 10.213.N.11
        server = b1.popen(["python", "-m", "http.server", "--bind", b1.address, "8000"])
        b1.cut()                                        # nobody reaches b1, b1 reaches nobody
        b1.restore()                                    # the link is back

Each host has its own namespace with one address; a veth pair joins it to a bridge in the
caller's namespace, which has the address ``net.gateway``. So the test process (its
clients, or a ZooKeeperServer bound to ``net.gateway``) talks to every host over the bridge,
and hosts talk to each other. ``Host.prefix`` (``ip netns exec NS``) runs a command on a
host: pass it as ``command_prefix`` to ``BrokerProcess``, ``ZooKeeperServer`` or
``BrokerCluster(hosts=...)``.

``cut()`` sets the bridge end of the host's veth down: its packets are dropped silently, as
on a real partition (connections hang and time out, they are not reset), while processes
on the host keep running and keep talking over the host's own loopback. No iptables.

Names start with ``sk``, this process's pid and a counter, so concurrent test runs never
share one; ``destroy()`` (the context exit) removes every namespace, link and bridge, and
SIGKILLs processes still inside the namespaces (all of them started by the test). The
namespaces and links of a test process that was itself killed are swept at the next
``create()``.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import itertools
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

__all__ = ["Host", "NetnsError", "Network", "netns_available"]

_SUBNET_BASE = "10.213"  # candidate /24s 10.213.0.0 .. 10.213.255.0; one not in use is taken
_FIRST_HOST = 10
_NAME = re.compile(r"^sk([0-9a-f]{6})[0-9a-f]{2}")
_LOCK = Path(tempfile.gettempdir()) / "streamkit-netns.lock"
_counter = itertools.count()


class NetnsError(RuntimeError):
    """An ``ip`` command failed."""


def _ip(*args: str, check: bool = True) -> str:
    result = subprocess.run(["ip", *args], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if check and result.returncode != 0:
        raise NetnsError(f"ip {' '.join(args)}: {result.stderr.strip() or f'exit {result.returncode}'}")
    return result.stdout


@functools.cache
def netns_available() -> bool:
    """Whether this process may make network namespaces, veth pairs and bridges (root and
    iproute2's ``ip``); checked once by making and removing a namespace."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        return False
    probe = f"sk{os.getpid():06x}ff-probe"
    try:
        _ip("netns", "add", probe)
    except NetnsError:
        return False
    _ip("netns", "del", probe, check=False)
    return True


class Host:
    """One network namespace with one address, reached through its veth on the bridge."""

    def __init__(self, name: str, namespace: str, address: str, link: str, bridge: str = "") -> None:
        self.name = name
        self.namespace = namespace
        self.address = address
        self.link = link  # the bridge end of the veth pair, in the caller's namespace
        self.bridge = bridge
        self.is_cut = False
        self.processes: list[subprocess.Popen[Any]] = []

    @property
    def prefix(self) -> list[str]:
        """``ip netns exec NAMESPACE``: put it before a command to run it on this host."""
        return ["ip", "netns", "exec", self.namespace]

    def command(self, argv: Sequence[str]) -> list[str]:
        return [*self.prefix, *argv]

    def run(self, argv: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess[Any]:
        """``subprocess.run`` on this host."""
        return subprocess.run(self.command(argv), **kwargs)

    def popen(self, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
        """``subprocess.Popen`` on this host (``ip netns exec`` execs the command: the
        Popen's pid is the command's own, so signals reach it)."""
        process = subprocess.Popen(self.command(argv), **kwargs)
        self.processes.append(process)
        return process

    def cut(self) -> None:
        """Partition this host from every other one and from the caller."""
        _ip("link", "set", self.link, "down")
        self.is_cut = True

    def restore(self, timeout_s: float = 10) -> None:
        """Heal the partition made by ``cut``: return once both ends of the link are up
        and neither remembers the cut. Neighbour (ARP) entries that failed or were still
        resolving while the link was down would fail the first connections after it with
        "no route to host" (EHOSTUNREACH); they are forgotten, so the next packet resolves
        its neighbour again over the working link."""
        _ip("link", "set", self.link, "up")
        deadline = time.monotonic() + timeout_s
        while not (_link_up(self.link) and _link_up("eth0", self.namespace)):
            if time.monotonic() > deadline:
                raise NetnsError(f"the link of {self.name} is not up {timeout_s} s after restoring it")
            time.sleep(0.01)
        _ip("-n", self.namespace, "neigh", "flush", "dev", "eth0")
        if self.bridge:
            _ip("neigh", "flush", "to", self.address, "dev", self.bridge)
        self.is_cut = False

    def __repr__(self) -> str:
        return f"Host({self.name!r}, {self.address}, namespace={self.namespace!r})"


class Network:
    """A bridge and one namespace per host name; see the module docstring."""

    def __init__(self, hosts: Iterable[str]) -> None:
        self.names = list(hosts)
        if len(set(self.names)) != len(self.names) or not self.names:
            raise ValueError(f"host names must be distinct and at least one, got {self.names}")
        if len(self.names) > 250 - _FIRST_HOST:
            raise ValueError(f"at most {250 - _FIRST_HOST} hosts on one network")
        self.tag = f"sk{os.getpid():06x}{next(_counter) % 256:02x}"
        self.bridge = f"{self.tag}br"
        self.gateway = ""
        self.hosts: dict[str, Host] = {}

    def __getitem__(self, name: str) -> Host:
        return self.hosts[name]

    def __iter__(self) -> Iterator[Host]:
        return iter(self.hosts.values())

    def create(self) -> Network:
        try:
            with _locked():
                _sweep_leftovers()
                subnet = _free_subnet()
                _ip("link", "add", self.bridge, "type", "bridge")
                self.gateway = f"{subnet}.1"
                _ip("addr", "add", f"{self.gateway}/24", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
            for index, name in enumerate(self.names):
                self._add_host(index, name, f"{subnet}.{_FIRST_HOST + index}")
        except BaseException:
            self.destroy()
            raise
        return self

    def _add_host(self, index: int, name: str, address: str) -> None:
        namespace, link = f"{self.tag}-{name}", f"{self.tag}v{index}"
        _ip("netns", "add", namespace)
        self.hosts[name] = Host(name, namespace, address, link, self.bridge)
        _ip("link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", namespace)
        _ip("link", "set", link, "master", self.bridge)
        _ip("link", "set", link, "up")
        _ip("-n", namespace, "addr", "add", f"{address}/24", "dev", "eth0")
        _ip("-n", namespace, "link", "set", "eth0", "up")
        _ip("-n", namespace, "link", "set", "lo", "up")

    def destroy(self) -> None:
        """Remove the namespaces (SIGKILLing what still runs in them), links and bridge."""
        for host in self.hosts.values():
            # A process started a moment ago may not have entered the namespace yet, so
            # `ip netns pids` would miss it: the ones started here are killed by pid too.
            for process in host.processes:
                if process.poll() is None:
                    process.kill()
            _remove_namespace(host.namespace, kill=True)
            _ip("link", "del", host.link, check=False)  # normally gone with its peer
        self.hosts.clear()
        _ip("link", "del", self.bridge, check=False)

    def __enter__(self) -> Network:
        return self.create()

    def __exit__(self, *exc: object) -> None:
        self.destroy()


def _link_up(link: str, namespace: str = "") -> bool:
    """The kernel shows ``link`` operationally up (carrier on both ends of a veth)."""
    shown = _ip(*(("-n", namespace) if namespace else ()), "-o", "link", "show", link, check=False)
    return " state UP " in shown


def _remove_namespace(namespace: str, kill: bool) -> None:
    # A namespace lives on while a process is inside it, and with it its veth pair.
    if kill:
        for pid in _ip("netns", "pids", namespace, check=False).split():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
    _ip("netns", "del", namespace, check=False)


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    """Serialise subnet choice between concurrent test runs on this machine."""
    with open(_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _free_subnet() -> str:
    in_use = _ip("-4", "-o", "addr", "show") + _ip("-4", "route", "show")
    for third in range(256):
        subnet = f"{_SUBNET_BASE}.{third}"
        if not re.search(rf"\b{re.escape(subnet)}\.", in_use):
            return subnet
    raise NetnsError(f"no free /24 left in {_SUBNET_BASE}.0.0/16")


def _sweep_leftovers() -> None:
    """Remove namespaces and bridges of test processes that no longer exist."""
    def orphaned(name: str) -> bool:
        match = _NAME.match(name)
        return match is not None and not Path(f"/proc/{int(match.group(1), 16)}").exists()

    for line in _ip("netns", "list").splitlines():
        name = line.split(" ", 1)[0]
        if orphaned(name):  # what may still run in it is not ours to kill
            _remove_namespace(name, kill=False)
    for line in _ip("-o", "link", "show").splitlines():
        name = line.split(":", 2)[1].strip().split("@", 1)[0]
        if orphaned(name):
            _ip("link", "del", name, check=False)
