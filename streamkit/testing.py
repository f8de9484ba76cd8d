"""Test helpers for users' apps and for streamkit's own tests: real brokers on port 0.

Three ways to run one, all real (the Kafka protocol on a loopback socket):

- ``async with embedded_broker(tmp_path) as broker``: in the caller's asyncio loop.
- ``with BrokerThread(tmp_path) as broker``: on a background thread with its own loop, for
  synchronous tests and clients (confluent-kafka, kafka-python).
- ``with BrokerProcess(tmp_path) as broker``: a separate ``streamkit broker`` process, which a
  test can SIGKILL (``broker.kill()``) and start again on the same data directory.

``await http_get(port, "/tables/NAME/KEY")`` asks a running worker's web endpoints.

Each exposes ``bootstrap`` ("127.0.0.1:PORT"). Settings use Kafka's broker names; the
defaults here make groups rebalance at once (``group.initial.rebalance.delay.ms=0``) and
allow short sessions (``group.min.session.timeout.ms=1000``) so tests run quickly.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from streamkit.broker.config import BrokerConfig
from streamkit.broker.server import Broker

__all__ = ["TEST_SETTINGS", "BrokerProcess", "BrokerThread", "embedded_broker", "http_get", "metric_value"]

TEST_SETTINGS: dict[str, str] = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "offsets.topic.num.partitions": "4",
    "transaction.state.log.num.partitions": "4",
    "share.coordinator.state.topic.num.partitions": "4",
}


def _settings(overrides: Mapping[str, Any] | None) -> dict[str, str]:
    merged = dict(TEST_SETTINGS)
    merged.update({k: str(v) for k, v in (overrides or {}).items()})
    return merged


@contextlib.asynccontextmanager
async def embedded_broker(data_dir: Path | str | None = None, settings: Mapping[str, Any] | None = None,
                          host: str = "127.0.0.1") -> AsyncIterator[Broker]:
    """A broker on a free port in the running event loop; stopped cleanly on exit."""
    with contextlib.ExitStack() as stack:
        directory = Path(data_dir) if data_dir else Path(stack.enter_context(tempfile.TemporaryDirectory()))
        broker = Broker(directory, BrokerConfig.from_kafka(_settings(settings)), host, 0)
        await broker.start()
        try:
            yield broker
        finally:
            await broker.stop()


async def http_get(port: int, path: str, host: str = "127.0.0.1", timeout: float = 10) -> tuple[int, Any]:
    """GET ``path`` from a worker's web endpoints (``--web-port``): (status, body), a JSON
    body decoded, any other as text."""
    import json

    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        await writer.drain()
        data = await asyncio.wait_for(reader.read(), timeout)
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    if b"application/json" in head.lower():
        return status, json.loads(body)
    return status, body.decode()


def metric_value(text: str, name: str, **labels: str) -> float | None:
    """The value of sample ``name`` with exactly ``labels`` in a worker's ``/metrics`` text
    (Prometheus exposition format), or None when there is no such sample."""
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    return None


class BrokerThread:
    """A broker on its own thread and event loop (for synchronous code)."""

    def __init__(self, data_dir: Path | str, settings: Mapping[str, Any] | None = None,
                 host: str = "127.0.0.1") -> None:
        self.broker = Broker(Path(data_dir), BrokerConfig.from_kafka(_settings(settings)), host, 0)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="streamkit-broker", daemon=True)

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap

    def start(self) -> BrokerThread:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.broker.start(), self._loop).result(30)
        return self

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        asyncio.run_coroutine_threadsafe(self.broker.stop(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def __enter__(self) -> BrokerThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class BrokerProcess:
    """``streamkit broker`` as a child process on a free port."""

    def __init__(self, data_dir: Path | str, settings: Mapping[str, Any] | None = None,
                 host: str = "127.0.0.1", port: int = 0, log_file: Path | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.settings = _settings(settings)
        self.host = host
        self.port = port
        self.log_file = log_file or self.data_dir.parent / f"{self.data_dir.name}-broker.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout_s: float = 30) -> BrokerProcess:
        ready = Path(tempfile.mkstemp(prefix="streamkit-ready-")[1])
        ready.unlink()
        args = [sys.executable, "-m", "streamkit", "broker", "--data-dir", str(self.data_dir),
                "--host", self.host, "--port", str(self.port), "--ready-file", str(ready)]
        for key, value in self.settings.items():
            args += ["--set", f"{key}={value}"]
        log = open(self.log_file, "ab")  # noqa: SIM115 - the child owns it
        self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if ready.exists() and ready.read_text().strip():
                self.port = int(ready.read_text().strip())
                ready.unlink()
                return self
            if self.process.poll() is not None:
                raise RuntimeError(f"broker exited with {self.process.returncode}; see {self.log_file}")
            time.sleep(0.02)
        self.kill()
        raise TimeoutError(f"broker did not start within {timeout_s}s; see {self.log_file}")

    def stop(self, timeout_s: float = 30) -> int:
        """SIGTERM and wait: a clean shutdown."""
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else 0
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout_s)

    def kill(self) -> None:
        """SIGKILL: no flush, no clean-shutdown marker."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def __enter__(self) -> BrokerProcess:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is None:
            self.stop()
        else:
            self.kill()
