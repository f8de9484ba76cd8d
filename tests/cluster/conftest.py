"""Fixtures for the cluster tests: a real ZooKeeper per module, and guards for what the
cluster harness needs from the machine (ZooKeeper's jars and java, ``ip netns`` as root).
A missing one skips on a laptop and fails under STREAMKIT_REQUIRE_SERVICES=1 (CI)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from streamkit.testing import ZooKeeperServer, zookeeper_available
from streamkit.testing_netns import netns_available
from tests.conftest import require_service


@pytest.fixture(scope="session")
def need_zookeeper() -> None:
    require_service(zookeeper_available(), "ZooKeeper (java and Debian's zookeeper package)")


@pytest.fixture(scope="session")
def need_netns() -> None:
    require_service(netns_available(), "network namespaces (root and iproute2's ip netns)")


@pytest.fixture(scope="module")
def zookeeper(need_zookeeper: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """One ZooKeeper for the module; give each test its own chroot."""
    with ZooKeeperServer(tmp_path_factory.mktemp("zookeeper")) as server:
        yield server
