"""ZooKeeperServer: a real ZooKeeper on a free port that the cluster tests start, stop,
kill, pause and restart, with sessions short enough to expire within a test."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

import streamkit.testing
from streamkit.testing import ZooKeeperServer

pytestmark = pytest.mark.integration


@pytest.fixture
def kazoo_client(zookeeper: ZooKeeperServer, request: pytest.FixtureRequest) -> Iterator[KazooClient]:
    with zookeeper.client(f"/{request.node.name}") as client:
        assert client.get_children("/") == []  # a new chroot, made by client()
        yield client


def test_serves_and_answers_four_letter_words(zookeeper: ZooKeeperServer, kazoo_client: KazooClient) -> None:
    assert zookeeper.alive
    assert "Mode: standalone" in zookeeper.four_letter("srvr")
    assert zookeeper.four_letter("ruok") == "imok"
    conf = zookeeper.four_letter("conf")
    assert "tickTime=500\n" in conf and "minSessionTimeout=1000\n" in conf
    kazoo_client.ensure_path("/brokers/ids")
    kazoo_client.create("/brokers/ids/1", b"{}", ephemeral=True)
    assert kazoo_client.get_children("/brokers/ids") == ["1"]


def test_sessions_as_short_as_one_second_are_granted(zookeeper: ZooKeeperServer) -> None:
    with zookeeper.client(timeout_s=1.0) as client:
        session = f"sid=0x{client.client_id[0]:x}"
        connection = next(line for line in zookeeper.four_letter("cons").splitlines() if session in line)
        assert re.search(r"\bto=1000\b", connection), connection


HOLDER = """
import sys, time
from kazoo.client import KazooClient
client = KazooClient(hosts=sys.argv[1], timeout=1.0)
client.start(timeout=30)
client.create("/holder", b"", ephemeral=True, makepath=True)
print("created", flush=True)
time.sleep(600)
"""


def test_the_ephemeral_node_of_a_killed_client_goes_when_its_session_expires(
        zookeeper: ZooKeeperServer, kazoo_client: KazooClient) -> None:
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, zookeeper.connect_string(kazoo_client.chroot)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "created"
        gone = threading.Event()
        assert kazoo_client.exists("/holder", watch=lambda event: gone.set()) is not None
        holder.kill()
        assert gone.wait(30), "the ephemeral node outlived its session"
        assert kazoo_client.exists("/holder") is None
    finally:
        holder.kill()
        holder.communicate()


def test_kill_and_start_keep_the_port_and_the_data(tmp_path: Path, need_zookeeper: None) -> None:
    with ZooKeeperServer(tmp_path / "zk") as zk, zk.client("/app") as client:
        port = zk.port
        client.create("/kept", b"value")
        zk.kill()
        assert not zk.alive
        zk.start()
        assert zk.port == port
        # The client reconnects by itself. kazoo's retry also rides out a new session:
        # ZooKeeper 3.8.0 (Debian's) can leave a connection made while it starts open and
        # unanswered (NIOServerCnxn.close fails on a server without its database yet), so
        # a client that connects in that window waits out its session timeout and gets
        # its session expired, as seen on a loaded machine.
        assert client.retry(client.get, "/kept")[0] == b"value"
        assert zk.restart().port == port
        assert client.retry(client.get, "/kept")[0] == b"value"
        process = zk.process
    assert process is not None and process.poll() is not None  # the context exit killed it
    assert "binding to port" in zk.log_tail(1000)


def test_pause_stops_answers_until_resume(tmp_path: Path, need_zookeeper: None) -> None:
    with ZooKeeperServer(tmp_path / "zk") as zk:
        zk.pause()
        with pytest.raises(TimeoutError):
            zk.four_letter("ruok", timeout_s=1)
        zk.resume()
        assert zk.four_letter("ruok") == "imok"


def test_a_port_taken_before_zookeeper_binds_it_is_replaced(tmp_path: Path, need_zookeeper: None,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.create_server(("127.0.0.1", 0)) as squatter:
        taken = squatter.getsockname()[1]
        picks = iter([taken])
        real_free_port = streamkit.testing.free_port
        # The first pick is the port another process took between the pick and the bind.
        monkeypatch.setattr(streamkit.testing, "free_port", lambda host: next(picks, None) or real_free_port(host))
        with ZooKeeperServer(tmp_path / "zk") as zk:
            assert zk.port != taken
            assert "Mode: standalone" in zk.four_letter("srvr")
        assert "Address already in use" in zk.log_tail(1000)


def test_a_taken_port_on_restart_is_one_clear_error(tmp_path: Path, need_zookeeper: None) -> None:
    zk = ZooKeeperServer(tmp_path / "zk").start()
    try:
        zk.kill()
        with socket.create_server(("127.0.0.1", zk.port)), \
                pytest.raises(RuntimeError, match=rf"could not bind 127.0.0.1:{zk.port}: address in use"):
            zk.start()
    finally:
        zk.kill()


def test_start_time(tmp_path: Path, need_zookeeper: None) -> None:
    """Not an assertion on time (the machine may be loaded): the figure goes to the output."""
    began = time.monotonic()
    with ZooKeeperServer(tmp_path / "zk") as zk:
        took = time.monotonic() - began
        assert zk.alive
    print(f"ZooKeeper served after {took:.2f}s")


def test_zookeeper_on_its_own_host_is_cut_off_and_back(tmp_path: Path, need_zookeeper: None,
                                                       need_netns: None) -> None:
    from streamkit.testing_netns import Network

    with Network(["zk"]) as net:
        host = net["zk"]
        with ZooKeeperServer(tmp_path / "zk", host=host.address, command_prefix=host.prefix) as zk:
            assert zk.address.startswith(host.address + ":")
            assert zk.four_letter("ruok") == "imok"
            host.cut()
            with pytest.raises(TimeoutError):
                zk.four_letter("ruok", timeout_s=1)
            assert zk.alive
            host.restore()
            assert zk.four_letter("ruok", timeout_s=30) == "imok"
