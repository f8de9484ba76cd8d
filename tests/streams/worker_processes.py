"""``streamkit worker`` processes for the worker-process tests (``test_workers.py``,
``test_keyed_input.py``, ``test_backlog_processes.py``): one test's app id, topics, data
directories and worker processes (``Scenario``, the ``scenario`` fixture of conftest.py),
each worker a real subprocess of an app in ``apps_for_tests`` configured by environment."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson

from streamkit.testing import BrokerProcess

from .conftest import Probe, eventually, log_tail, unique

__all__ = ["APP", "PARTITIONS", "REPO", "Scenario", "Worker"]

REPO = Path(__file__).resolve().parents[2]
APP = "tests.streams.apps_for_tests.counter:app"
PARTITIONS = 4


class Worker:
    """One ``streamkit worker`` process of an app (by default the counter app)."""

    def __init__(self, name: str, bootstrap: str, app_id: str, input_topic: str, data_dir: Path,
                 log_dir: Path, gate: Path | None = None, config: dict[str, Any] | None = None,
                 app: str = APP) -> None:
        self.name = name
        self.app = app
        self.bootstrap = bootstrap
        self.data_dir = data_dir
        self.log_path = log_dir / f"{name}.log"
        self.env = {**os.environ, "SK_TEST_APP_ID": app_id, "SK_TEST_INPUT": input_topic,
                    "PYTHONUNBUFFERED": "1"}
        if gate is not None:
            self.env["SK_TEST_GATE"] = str(gate)
        if config:
            self.env["SK_TEST_CONFIG"] = orjson.dumps(config).decode()
        self.process: subprocess.Popen[bytes] | None = None
        self._port: int | None = None

    def start(self) -> Worker:
        self._port = None
        args = [sys.executable, "-m", "streamkit", "worker", "-A", self.app, "--broker", self.bootstrap,
                "--data-dir", str(self.data_dir), "--web-port", "0", "--loglevel", "info"]
        with open(self.log_path, "ab") as log:
            log.write(f"---- start {time.strftime('%X')} ----\n".encode())
            self.process = subprocess.Popen(args, cwd=REPO, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def _check_alive(self) -> None:
        if not self.alive:
            code = self.process.returncode if self.process else None
            raise AssertionError(f"worker {self.name} exited ({code}):\n{log_tail(self.log_path)}")

    async def port(self) -> int:
        if self._port is None:
            def found() -> int | None:
                self._check_alive()
                ports = re.findall(r"web endpoints on http://127\.0\.0\.1:(\d+)", self.log().split("---- start")[-1])
                return int(ports[-1]) if ports else None

            self._port = await eventually(found, f"worker {self.name}'s web port", timeout=60)
        return self._port

    async def get(self, path: str) -> tuple[int, Any]:
        port = await self.port()
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 10)
        writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        await writer.drain()
        data = await asyncio.wait_for(reader.read(), 20)
        writer.close()
        head, _, body = data.partition(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        return status, orjson.loads(body) if body and b"json" in head else body.decode()

    async def partitions(self) -> set[str]:
        status, body = await self.get("/health")
        assert status == 200, body
        return set(body["partitions"])

    async def wait_exit(self, timeout: float = 60) -> int:
        assert self.process is not None
        await eventually(lambda: self.process.poll() is not None, f"worker {self.name} to exit", timeout=timeout)
        return self.process.returncode

    async def terminate(self, timeout: float = 60) -> int:
        """SIGTERM (a clean stop: the worker commits what it processed) and wait."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        code = await self.wait_exit(timeout)
        assert code == 0, f"worker {self.name} exited with {code} on SIGTERM:\n{log_tail(self.log_path)}"
        return code

    def kill(self) -> None:
        if self.alive:
            assert self.process is not None
            self.process.kill()
            self.process.wait(10)


class Scenario:
    """One test's app id, topics, data directories and worker processes."""

    def __init__(self, broker: BrokerProcess, probe: Probe, tmp_path: Path, name: str) -> None:
        self.broker = broker
        self.probe = probe
        self.tmp = tmp_path
        self.app_id = unique(name)
        self.input = f"{self.app_id}-words"
        self.workers: list[Worker] = []
        self.sent: list[tuple[str, str]] = []  # (key, value) in production order
        self.pace = False
        self.started = time.monotonic()

    def worker(self, name: str, gate: Path | None = None, config: dict[str, Any] | None = None,
               app: str = APP) -> Worker:
        w = Worker(name, self.broker.bootstrap, self.app_id, self.input, self.tmp / f"data-{name}", self.tmp, gate,
                   config, app)
        self.workers.append(w)
        return w

    async def produce(self, n: int, keys: int = 50, prefix: str = "k") -> None:
        """``n`` records over ``keys`` keys; values are sequence numbers (so "latest" has
        one right answer per key: records of a key are in one partition, in order)."""
        base = len(self.sent)
        batch = [(f"{prefix}{(base + i) % keys}", str(base + i)) for i in range(n)]
        await self.probe.produce_many(self.input, [(k.encode(), v.encode(), None) for k, v in batch])
        self.sent.extend(batch)

    def expected_counts(self, base: dict[str, int] | None = None) -> dict[str, int]:
        counts = Counter(base or {})
        counts.update(k for k, _v in self.sent)
        return dict(counts)

    def expected_latest(self) -> dict[str, str]:
        return {k: v for k, v in self.sent}

    async def caught_up(self, timeout: float = 90) -> None:
        def alive() -> None:
            for w in self.workers:
                if w.process is not None and w.process.returncode not in (None, 0, -9):
                    raise AssertionError(f"worker {w.name} failed:\n{log_tail(w.log_path)}")

        async def done() -> bool:
            alive()
            return await self.probe.caught_up(self.app_id, [self.input])

        await eventually(done, f"{self.app_id} to commit all {len(self.sent)} records", timeout=timeout, interval=0.1)

    async def committed_total(self) -> int:
        return sum((await self.probe.committed(self.app_id)).values())

    async def counts(self) -> dict[str, int]:
        state = await self.probe.latest(f"{self.app_id}-counts-changelog")
        return {k.decode(): orjson.loads(v) for k, v in state.items()}

    async def latest(self) -> dict[str, str]:
        state = await self.probe.latest(f"{self.app_id}-latest-changelog")
        return {k.decode(): orjson.loads(v) for k, v in state.items()}

    def elapsed(self) -> str:
        return f"{time.monotonic() - self.started:.1f}s"
