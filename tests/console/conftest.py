"""Fixtures for the console tests: one real broker process per module, and the console
served by uvicorn on it (on a free port, its own thread), asked over HTTP by httpx."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from streamkit.console import ConsoleServer, ConsoleSettings
from streamkit.testing import BrokerProcess

JSON = {"Accept": "application/json"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path_factory.mktemp("broker") / "data") as running:
        yield running


@pytest.fixture(scope="module")
def client(broker: BrokerProcess) -> Iterator[httpx.Client]:
    with ConsoleThread(ConsoleSettings(broker.bootstrap)) as console, \
            httpx.Client(base_url=console.url, timeout=30) as c:
        yield c


class ConsoleThread:
    """The console served by uvicorn on a free port, on its own thread and event loop."""

    def __init__(self, settings: ConsoleSettings) -> None:
        self.server = ConsoleServer(settings, "127.0.0.1", 0)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="console", daemon=True)

    @property
    def url(self) -> str:
        return self.server.url

    def __enter__(self) -> ConsoleThread:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self._loop).result(30)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.server.stop(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()


def eventually(probe: Callable[[], Any], what: str, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {value!r})")
        time.sleep(0.1)


CHROMIUM = "/usr/bin/chromium"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's chromium driven by Playwright (headless; never a downloaded browser)."""
    from pathlib import Path

    from tests.conftest import require_service

    require_service(Path(CHROMIUM).exists(), f"chromium at {CHROMIUM} (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Any, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A fresh page; its last screen is kept as a test artifact (screenshots/TEST.png under
    pytest's base temp directory, or $STREAMKIT_SCREENSHOTS)."""
    import os
    from pathlib import Path

    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    opened.set_default_timeout(15_000)
    try:
        yield opened
    finally:
        folder = Path(os.environ.get("STREAMKIT_SCREENSHOTS") or tmp_path_factory.getbasetemp() / "screenshots")
        folder.mkdir(parents=True, exist_ok=True)
        opened.screenshot(path=str(folder / f"{request.node.name}.png"), full_page=True)
        context.close()


class _Child:
    """A child process the fixtures start: SIGTERM on exit, SIGKILL if it does not stop."""

    process: Any

    def __exit__(self, *exc: object) -> None:
        self.process.terminate()
        try:
            self.process.wait(30)
        except Exception:
            self.process.kill()
            self.process.wait(10)


def assigned(consumer: Any, count: int = 1) -> bool:
    """Poll a confluent-kafka consumer once (the group protocol runs in its polls); whether
    it holds ``count`` partitions or more."""
    consumer.poll(0.1)
    return len(consumer.assignment()) >= count


def joined_consumer(bootstrap: str, group: str, topic: str) -> Any:
    """A confluent-kafka consumer that is a member of ``group`` with partitions of ``topic``."""
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "session.timeout.ms": 6000})
    consumer.subscribe([topic])
    eventually(lambda: assigned(consumer), f"{group} to get partitions")
    return consumer


class ConnectProcess(_Child):
    """``streamkit connect standalone`` as a child process, its REST API on a free port."""

    def __init__(self, bootstrap: str, directory: Any) -> None:
        import json
        from pathlib import Path

        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.config = self.directory / "worker.json"
        self.config.write_text(json.dumps({
            "bootstrap.servers": bootstrap, "listeners": "http://127.0.0.1:0",
            "offset.storage.file.filename": str(self.directory / "offsets.json"),
            "offset.flush.interval.ms": "500",
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter"}))
        self.ready = self.directory / "ready"
        self.log_file = self.directory / "connect.log"
        self.process: Any = None
        self.url = ""

    def __enter__(self) -> ConnectProcess:
        import subprocess
        import sys

        with open(self.log_file, "wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "streamkit", "connect", "standalone", str(self.config),
                 "--ready-file", str(self.ready)], stdout=log, stderr=subprocess.STDOUT)
        port = eventually(lambda: self._port(), "the Connect worker's REST API")
        self.url = f"http://127.0.0.1:{port}"
        return self

    def _port(self) -> str | None:
        if self.process.poll() is not None:
            raise AssertionError(f"connect exited with {self.process.returncode}:\n{self.log_file.read_text()}")
        text = self.ready.read_text().strip() if self.ready.exists() else ""
        return text or None



class WorkerProcess(_Child):
    """``streamkit worker -A MODULE --web-port 0`` as a child process; ``url`` is its web
    port, read from its log once it serves and has its partitions."""

    def __init__(self, module: str, bootstrap: str, data_dir: Any) -> None:
        from pathlib import Path

        self.module = module
        self.bootstrap = bootstrap
        self.data_dir = Path(data_dir)
        self.log_file = self.data_dir.parent / f"{self.data_dir.name}-worker.log"
        self.process: Any = None
        self.url = ""

    def _log(self) -> str:
        return self.log_file.read_text(errors="replace") if self.log_file.exists() else ""

    def __enter__(self) -> WorkerProcess:
        import os
        import re
        import subprocess
        import sys
        from pathlib import Path

        repo = Path(__file__).resolve().parents[2]
        with open(self.log_file, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "streamkit", "worker", "-A", self.module, "--broker", self.bootstrap,
                 "--data-dir", str(self.data_dir), "--web-port", "0"],
                cwd=repo, env={**os.environ, "PYTHONPATH": str(repo)}, stdout=log, stderr=subprocess.STDOUT)

        def serving() -> str | None:
            if self.process.poll() is not None:
                raise AssertionError(f"worker exited with {self.process.returncode}:\n{self._log()}")
            text = self._log()
            match = re.search(r"web endpoints on (http://[\w.\-]+:\d+)", text)
            return match.group(1) if match and "partitions assigned" in text else None

        self.url = eventually(serving, f"worker {self.module} to serve")
        return self

