"""Fixtures for the cluster tests.

- ``zookeeper``: a real ZooKeeper per module (give each cluster or client its own chroot).
- ``cluster``: ZooKeeper and ``CLUSTER_SIZE`` broker processes (3 unless the module says),
  with the module's ``CLUSTER_CONFIG`` settings (and ``CLUSTER_OVERRIDES``, per broker),
  one cluster per module; each test gets it
  with every broker running (``heal()``: what the previous test killed, stopped or paused
  runs again). Network namespaces are per test: ``Network`` from streamkit.testing_netns.
- ``need_zookeeper`` / ``need_netns``: what the harness needs from the machine (ZooKeeper's
  jars and java; root and ``ip netns``). A missing one skips on a laptop and fails under
  STREAMKIT_REQUIRE_SERVICES=1 (CI).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from streamkit.testing import ZooKeeperServer, zookeeper_available
from streamkit.testing_cluster import BrokerCluster
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


@pytest.fixture(scope="module")
def _module_cluster(zookeeper: ZooKeeperServer, request: pytest.FixtureRequest,
                    tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerCluster]:
    size = getattr(request.module, "CLUSTER_SIZE", 3)
    config = getattr(request.module, "CLUSTER_CONFIG", {})
    overrides = getattr(request.module, "CLUSTER_OVERRIDES", None)
    with BrokerCluster(zookeeper, size, tmp_path_factory.mktemp("cluster"), config=config,
                       overrides=overrides) as running:
        yield running


@pytest.fixture
def cluster(_module_cluster: BrokerCluster) -> BrokerCluster:
    return _module_cluster.heal()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> object:
    """A failed cluster test's report ends with every broker's log tail: what the cluster
    did is most of what there is to know."""
    report = yield
    if report.failed and call.when == "call":
        cluster = item.funcargs.get("cluster") if hasattr(item, "funcargs") else None
        if isinstance(cluster, BrokerCluster):
            for i in range(len(cluster)):
                report.sections.append((f"broker {i} log", cluster.log_tail(i, 80)))
    return report
