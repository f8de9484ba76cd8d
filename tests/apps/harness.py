"""Running an example app as ``python -m streamkit worker`` against a real broker, and
talking to it with a plain Kafka client (aiokafka) and HTTP.

Every helper is async: the tests run in pytest-asyncio's loop, and the worker is a child
process, so waiting never blocks the clients.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from streamkit.testing import http_get

REPO = Path(__file__).resolve().parents[2]

_RUNNING = re.compile(r"running against (\S+)")
_WEB = re.compile(r"web endpoints on http://([\w.\-]+):(\d+)")


async def wait_for(probe: Callable[[], Any], what: str, timeout: float = 30,
                   interval: float = 0.1) -> Any:
    """Call (and await, if it is async) ``probe()`` until it returns something truthy, and
    return that; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = probe()
        last = await result if inspect.isawaitable(result) else result
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")
        await asyncio.sleep(interval)


class Worker:
    """``python -m streamkit worker -A APP`` as a child process (the real CLI). ``app`` is a
    module path; a bare name means ``apps.NAME``."""

    def __init__(self, app: str, bootstrap: str, data_dir: Path, *, web: bool = True) -> None:
        self.app = app
        self.bootstrap = bootstrap
        self.data_dir = data_dir
        self.web = web
        self.log_path = data_dir.parent / f"{data_dir.name}-worker.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.web_port: int | None = None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    async def start(self, timeout: float = 30) -> Worker:
        module = self.app if "." in self.app else f"apps.{self.app}"
        args = [sys.executable, "-m", "streamkit", "worker", "-A", module,
                "--broker", self.bootstrap, "--data-dir", str(self.data_dir)]
        if self.web:
            args += ["--web-port", "0"]  # any free port; the log line says which
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(args, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)

        async def started() -> bool:
            assert self.process is not None
            if self.process.poll() is not None:
                raise AssertionError(f"worker exited with {self.process.returncode}:\n{self.log()}")
            text = self.log()
            return bool(_RUNNING.search(text)) and (not self.web or bool(_WEB.search(text)))

        await wait_for(started, f"worker {module} to start", timeout)
        if self.web:
            match = _WEB.search(self.log())
            assert match is not None
            self.web_port = int(match.group(2))
        # Partitions assigned (and tables restored) follow shortly; records produced before
        # then are read from the beginning anyway (auto.offset.reset=earliest).
        await wait_for(lambda: "partitions assigned" in self.log(), "the partition assignment", timeout)
        return self

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM (a clean stop: final commit) and the exit code."""
        if self.process is None:
            return 0
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                return self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
                raise AssertionError(f"worker did not stop within {timeout}s:\n{self.log()}") from None
        return self.process.returncode

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    async def get(self, path: str) -> tuple[int, Any]:
        """GET ``path`` from the worker's web endpoints: (status, body), a JSON body decoded."""
        assert self.web_port is not None, "started without --web-port"
        return await http_get(self.web_port, path)

    async def table(self, table: str, key: str) -> tuple[int, Any]:
        """GET /tables/{table}/{key}: (status, the value or the error)."""
        status, body = await self.get(f"/tables/{quote(table, safe='')}/{quote(key, safe='')}")
        return status, body.get("value") if status == 200 else body


@dataclass(frozen=True)
class Out:
    """A consumed record, its value decoded from JSON."""

    key: str | None
    value: Any
    timestamp: int
    partition: int


async def committed(bootstrap: str, group: str) -> int:
    """The sum of ``group``'s committed offsets (0 before its first commit)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        offsets = await admin.list_consumer_group_offsets(group)
    finally:
        await admin.close()
    return sum(max(meta.offset, 0) for meta in offsets.values())


async def create_topics(bootstrap: str, names: Sequence[str], partitions: int) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(n, partitions, 1) for n in names])
    finally:
        await admin.close()


async def produce(bootstrap: str, topic: str, records: Sequence[tuple[str | None, Any, int]]) -> None:
    """Produce ``(key, value, timestamp_ms)`` in order; values are JSON-encoded (str values
    are sent as plain UTF-8, None as a tombstone). Keys go through aiokafka's default
    partitioner, murmur2, the one streamkit's tables assume for key -> partition."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    await producer.start()
    try:
        futures = []
        for key, value, ts in records:
            if value is None:
                raw = None
            elif isinstance(value, str):
                raw = value.encode()
            else:
                raw = json.dumps(value).encode()
            futures.append(await producer.send(topic, raw, key=None if key is None else key.encode(),
                                               timestamp_ms=ts))
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


class Reader:
    """Reads a topic from its beginning (no consumer group) for the whole test."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.records: list[Out] = []
        self._consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=None,
                                          auto_offset_reset="earliest", enable_auto_commit=False)

    async def __aenter__(self) -> Reader:
        await self._consumer.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._consumer.stop()

    async def _poll(self, timeout_ms: int) -> None:
        batch = await self._consumer.getmany(timeout_ms=timeout_ms)
        for records in batch.values():
            for r in records:
                self.records.append(Out(None if r.key is None else r.key.decode(),
                                        None if r.value is None else json.loads(r.value),
                                        r.timestamp, r.partition))

    async def read(self, count: int, timeout: float = 30, settle: float = 1.5) -> list[Out]:
        """Wait until ``count`` records have arrived in all, then keep reading for ``settle``
        seconds so that any extra record shows up too; every record read so far."""
        deadline = time.monotonic() + timeout
        while len(self.records) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.topic}: expected {count} records within {timeout}s, "
                                     f"got {len(self.records)}: {self.records}")
            await self._poll(200)
        quiet_until = time.monotonic() + settle
        while time.monotonic() < quiet_until:
            await self._poll(100)
        return list(self.records)
