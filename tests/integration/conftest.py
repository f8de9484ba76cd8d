"""Fixtures for the integration suite: real ``streamkit broker`` processes on free ports.

``broker`` is one broker process per test module (settings from the module's
``BROKER_SETTINGS``); at module teardown it must still be alive and must shut down cleanly
(exit code 0), so a test that crashes the broker fails loudly even if its own asserts
passed. ``broker_factory`` makes function-scoped brokers for tests that stop, SIGKILL or
restart them.
"""

from __future__ import annotations

import gc
import re
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from streamkit.testing import BrokerProcess

with warnings.catch_warnings():
    # kafka-python 3 builds its protocol classes from JSON schemas at import time with
    # importlib.resources.read_text (deprecated since 3.11); import it once, quietly.
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka
    import kafka.admin
    import kafka.consumer
    import kafka.producer  # noqa: F401

_KAFKA_PYTHON_DEPRECATION = r"ignore:\w+ is deprecated. Use files\(\) instead:DeprecationWarning"
# kafka-python 3.0.12 drops the socket of a failed (re)connect without closing it (its IO
# thread, kafka/net/selector.py), e.g. while a broker restarts or just after one stopped;
# the ResourceWarning comes whenever the socket is collected, often in a later test.
# Our own raw sockets are all closed by context managers.
_CLIENT_SOCKET_LEAK = "ignore:unclosed <socket:ResourceWarning"
_HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in item.path.parents:
            item.add_marker(pytest.mark.filterwarnings(_KAFKA_PYTHON_DEPRECATION))
            item.add_marker(pytest.mark.filterwarnings(_CLIENT_SOCKET_LEAK))


@pytest.fixture(scope="module", autouse=True)
def _collect_client_garbage() -> Iterator[None]:
    """Collect leaked client sockets at the end of every module here: otherwise the next
    collection runs in whatever test comes next (e.g. tests/log), outside these filters."""
    yield
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()


def _finish(broker: BrokerProcess) -> None:
    """Stop a broker at teardown: it must be alive and exit 0 on SIGTERM."""
    process = broker.process
    if process is None:
        return
    if process.poll() is not None:
        pytest.fail(f"broker died during the test (exit {process.returncode}):\n{broker.log_tail()}")
    try:
        code = broker.stop(timeout_s=30)
    except Exception:
        broker.kill()
        raise
    assert code == 0, f"broker exited with {code} on SIGTERM:\n{broker.log_tail()}"


@pytest.fixture(scope="module")
def broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    settings = getattr(request.module, "BROKER_SETTINGS", {})
    process = BrokerProcess(tmp_path_factory.mktemp("broker") / "data", settings=settings).start()
    try:
        yield process
    finally:
        _finish(process)


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[Callable[..., BrokerProcess]]:
    """``broker_factory(settings={...})`` starts a broker owned by this test."""
    started: list[BrokerProcess] = []

    def start(settings: dict[str, Any] | None = None, name: str = "data") -> BrokerProcess:
        process = BrokerProcess(tmp_path / name, settings=settings).start()
        started.append(process)
        return process

    try:
        yield start
    finally:
        for process in started:
            if process.process is not None and process.process.poll() is None:
                _finish(process)


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    """A topic name unique to this test (legal characters only)."""
    base = re.sub(r"[^a-zA-Z0-9._-]+", "-", request.node.name)[:150].strip("-")
    return f"{base}-{uuid.uuid4().hex[:6]}"
