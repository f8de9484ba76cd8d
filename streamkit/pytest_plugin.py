"""streamkit's pytest plugin, enabled on install (the ``pytest11`` entry point):

- ``app_driver``: ``app_driver(app, config={...}, store="memory")`` starts an
  ``AppTestDriver`` that is closed when the test ends (unit tests: no broker, milliseconds);
- ``broker``: a real streamkit broker on a free loopback port for the test, on a background
  thread (``BrokerThread``), so sync and async tests and any Kafka client can use
  ``broker.bootstrap`` (integration tests).

A project's own fixture of the same name wins over these (pytest's usual precedence).

It lives outside ``streamkit.testing`` and imports it only inside the fixtures: pytest loads
plugins before hypothesis's own, and the broker's protocol library, which
``streamkit.testing`` imports, builds hypothesis strategies when imported, which hypothesis
refuses at that point."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from streamkit.testing import BrokerThread
    from streamkit.testing.driver import AppTestDriver

__all__ = ["app_driver", "broker"]


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
