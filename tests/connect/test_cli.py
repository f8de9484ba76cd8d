"""``streamkit connect standalone`` as a user runs it: a real process, the shipped configs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from streamkit.connect.config import validate_config
from streamkit.connect.plugins import PluginRegistry
from streamkit.connect.standalone import connector_config
from streamkit.connect.worker_config import load_worker_config
from streamkit.testing import BrokerThread

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "connectors"


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


@pytest.mark.parametrize("path", sorted(p.name for p in SHIPPED.glob("*.json") if not p.name.startswith("worker")))
def test_shipped_connector_configs_are_valid(path: str) -> None:
    name, config = connector_config(json.loads((SHIPPED / path).read_text()), path)
    try:
        valid = validate_config({**config, "name": name}, PluginRegistry())
    except Exception as exc:
        if "jdbc" in path.lower() and "Jdbc" in str(exc):
            pytest.skip("the JDBC connectors are not merged yet")
        raise
    assert valid.name == name


def test_shipped_worker_configs_are_valid() -> None:
    for path in SHIPPED.glob("worker*.json"):
        load_worker_config(json.loads(path.read_text()))


def test_standalone_process_runs_the_shipped_file_connectors(broker: BrokerThread, tmp_path: Path) -> None:
    worker = {**json.loads((SHIPPED / "worker.json").read_text()), "bootstrap.servers": broker.bootstrap,
              "listeners": "http://127.0.0.1:0", "offset.storage.file.filename": str(tmp_path / "offsets.json"),
              "offset.flush.interval.ms": "500"}
    (tmp_path / "worker.json").write_text(json.dumps(worker))
    src, out = tmp_path / "test.txt", tmp_path / "test.sink.txt"
    src.write_text("hello\nworld\n")
    for name, file in (("file-source.json", src), ("file-sink.json", out)):
        shipped = json.loads((SHIPPED / name).read_text())
        shipped["config"]["file"] = str(file)
        (tmp_path / name).write_text(json.dumps(shipped))
    ready = tmp_path / "port"
    log = (tmp_path / "worker.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "streamkit", "connect", "standalone", str(tmp_path / "worker.json"),
         str(tmp_path / "file-source.json"), str(tmp_path / "file-sink.json"), "--ready-file", str(ready)],
        env=_env(), stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while not (ready.exists() and ready.read_text()):
            assert process.poll() is None, (tmp_path / "worker.log").read_text()
            assert time.monotonic() < deadline, "the worker did not start"
            time.sleep(0.1)
        with httpx.Client(base_url=f"http://127.0.0.1:{ready.read_text()}", timeout=30) as client:
            assert sorted(client.get("/connectors").json()) == ["local-file-sink", "local-file-source"]
            while not (out.exists() and out.read_text() == "hello\nworld\n"):
                assert time.monotonic() < deadline, f"sink file: {out.read_text() if out.exists() else None!r}"
                time.sleep(0.1)
            status = client.get("/connectors/local-file-sink/status").json()
            assert status["tasks"][0]["state"] == "RUNNING"
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0, (tmp_path / "worker.log").read_text()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        log.close()
    offsets = json.loads((tmp_path / "offsets.json").read_text())
    assert list(offsets.values()) == [{"position": 12}]


def test_bad_config_is_one_line_and_exit_code_2(broker: BrokerThread, tmp_path: Path) -> None:
    # a broker to reach: as Kafka's connect-standalone, the worker checks it before the connectors
    (tmp_path / "worker.json").write_text(json.dumps({"bootstrap.servers": broker.bootstrap, "rest.port": "0"}))
    (tmp_path / "bad.json").write_text(json.dumps({"name": "bad", "config": {
        "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector", "tasks.max": "x"}}))
    result = subprocess.run(
        [sys.executable, "-m", "streamkit", "connect", "standalone", str(tmp_path / "worker.json"),
         str(tmp_path / "bad.json")], env=_env(), capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.startswith("error: invalid config: ")
    assert "tasks.max" in result.stderr and "file" in result.stderr and "topics" in result.stderr
    eos = tmp_path / "eos.json"
    eos.write_text(json.dumps({"bootstrap.servers": "127.0.0.1:1", "exactly.once.source.support": "enabled"}))
    result = subprocess.run([sys.executable, "-m", "streamkit", "connect", "standalone", str(eos)],
                            env=_env(), capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "not supported in standalone mode" in result.stderr
    assert "offset.storage.file.filename" in result.stderr and "distributed" in result.stderr
