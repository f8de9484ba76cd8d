"""streamkit's pytest plugin, enabled on install (the ``pytest11`` entry point):

- ``app_driver``: ``app_driver(app, config={...}, store="memory")`` starts an
  ``AppTestDriver`` that is closed when the test ends (unit tests: no broker, milliseconds);
- ``broker``: a real streamkit broker on a free loopback port for the test, on a background
  thread (``BrokerThread``), so sync and async tests and any Kafka client can use
  ``broker.bootstrap`` (integration tests);
- ``connect_worker``: a standalone Connect worker on ``broker`` (its own thread and event
  loop), REST API at ``connect_worker.url``, source offsets in the test's ``tmp_path``.

A project's own fixture of the same name wins over these (pytest's usual precedence).

It lives outside ``streamkit.testing`` and imports it only inside the fixtures: pytest loads
plugins before hypothesis's own, and the broker's protocol library, which
``streamkit.testing`` imports, builds hypothesis strategies when imported, which hypothesis
refuses at that point."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from streamkit.connect.standalone import StandaloneWorker
    from streamkit.testing import BrokerThread
    from streamkit.testing.driver import AppTestDriver

__all__ = ["app_driver", "broker", "connect_worker"]


@pytest.fixture
def app_driver() -> Iterator[Callable[..., AppTestDriver]]:
    """A factory of started ``AppTestDriver``s, each closed at the end of the test."""
    from streamkit.testing.driver import AppTestDriver

    drivers: list[AppTestDriver] = []

    def start(app: Any, config: dict[str, Any] | None = None, **kwargs: Any) -> AppTestDriver:
        driver = AppTestDriver(app, config, **kwargs)
        drivers.append(driver)
        return driver

    yield start
    for driver in reversed(drivers):
        driver.close()


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerThread]:
    """A broker for this test only, with its data in the test's ``tmp_path``."""
    from streamkit.testing import BrokerThread

    with BrokerThread(tmp_path / "broker") as running:
        yield running


@pytest.fixture
def connect_worker(broker: Any, tmp_path: Path) -> Iterator[StandaloneWorker]:
    """A standalone Connect worker for this test, on the test's broker."""
    from streamkit.connect.standalone import StandaloneWorker
    from streamkit.connect.worker_config import load_worker_config

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="streamkit-connect", daemon=True)
    thread.start()

    def run(coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, loop).result(60)

    worker = StandaloneWorker(load_worker_config({
        "bootstrap.servers": broker.bootstrap, "listeners": "http://127.0.0.1:0",
        "offset.storage.file.filename": str(tmp_path / "connect-offsets.json"), "offset.flush.interval.ms": "500"}))
    try:
        run(worker.start())
        yield worker
        run(worker.stop())
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
