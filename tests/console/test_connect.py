"""The Connect pages against a real ``streamkit connect standalone`` process and broker
process: the routes over HTTP, then the same in chromium (create with per-field errors, a
failed task's trace, restart, pause, resume, delete with confirmation)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from streamkit.console import ConsoleSettings
from streamkit.testing import BrokerProcess
from tests.console.conftest import JSON, ConnectProcess, ConsoleThread, eventually

pytestmark = pytest.mark.integration

FILE_SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"


@pytest.fixture(scope="module")
def connect(broker: BrokerProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectProcess]:
    with ConnectProcess(broker.bootstrap, tmp_path_factory.mktemp("connect")) as running:
        yield running


@pytest.fixture(scope="module")
def console(broker: BrokerProcess, connect: ConnectProcess) -> Iterator[str]:
    with ConsoleThread(ConsoleSettings(broker.bootstrap, connect.url)) as running:
        yield running.url


@pytest.fixture(scope="module")
def http(console: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=console, timeout=30) as c:
        yield c


def _sink(name: str, file: Path) -> str:
    return json.dumps({"name": name, "config": {"connector.class": FILE_SINK, "tasks.max": "1",
                                                "topics": "sink-in", "file": str(file)}})


def _state(http: httpx.Client, name: str) -> tuple[str, list[str]]:
    status = http.get(f"/connect/connectors/{name}", headers=JSON).json()["status"]
    return status["connector"]["state"], [t["state"] for t in status["tasks"]]


def test_connect_routes(http: httpx.Client, tmp_path: Path) -> None:
    r = http.post("/connect/connectors", data={"connector": _sink("routes-sink", tmp_path / "out.txt")}, headers=JSON)
    assert r.status_code == 200, r.text
    eventually(lambda: _state(http, "routes-sink") == ("RUNNING", ["RUNNING"]), "the sink running")
    listed = http.get("/connect", headers=JSON).json()
    assert listed["connectors"]["routes-sink"]["status"]["connector"]["state"] == "RUNNING"
    assert FILE_SINK in [p["class"] for p in listed["plugins"]]
    page = http.get("/connect/connectors/routes-sink")
    assert page.status_code == 200 and 'id="connector-topics"' in page.text
    fragment = http.get("/connect/connectors/routes-sink/status").text
    assert 'id="connector-state" class="state">RUNNING<' in fragment and "<html" not in fragment

    config = http.get("/connect/connectors/routes-sink", headers=JSON).json()["info"]["config"]
    edited = {**config, "file": str(tmp_path / "edited.txt")}
    r = http.post("/connect/connectors/routes-sink/config", data={"config": json.dumps(edited)}, headers=JSON)
    assert r.status_code == 200, r.text
    assert http.get("/connect/connectors/routes-sink", headers=JSON).json()["info"]["config"]["file"] == edited["file"]
    r = http.post("/connect/connectors/routes-sink/config", data={"config": json.dumps({**edited, "tasks.max": "zero"})})
    assert r.status_code == 400 and "<code>tasks.max</code>" in r.text and "zero" in r.text  # kept to fix
    r = http.post("/connect/connectors/routes-sink/config", data={"config": "[]"}, headers=JSON)
    assert r.status_code == 400 and "must be a JSON object" in r.json()["error"]
    assert http.get("/connect/connectors/routes-sink", headers=JSON).json()["info"]["config"]["tasks.max"] == "1"

    assert http.post("/connect/connectors/routes-sink/pause", headers=JSON).status_code == 200
    eventually(lambda: _state(http, "routes-sink")[0] == "PAUSED", "the sink paused")
    assert http.post("/connect/connectors/routes-sink/resume", headers=JSON).status_code == 200
    eventually(lambda: _state(http, "routes-sink")[0] == "RUNNING", "the sink resumed")
    assert http.post("/connect/connectors/routes-sink/tasks/0/restart", headers=JSON).status_code == 200
    assert http.post("/connect/connectors/routes-sink/delete", headers=JSON).status_code == 200
    assert http.get("/connect/connectors/routes-sink", headers=JSON).status_code == 404


def test_bad_connector_input_is_a_4xx_with_connects_message(http: httpx.Client) -> None:
    cases = [
        ("{not json", 400, "not valid JSON"),
        ("[1, 2]", 400, "must be a JSON object"),
        ('{"config": {"connector.class": "x"}}', 400, "needs a 'name'"),
    ]
    for body, status, message in cases:
        r = http.post("/connect/connectors", data={"connector": body}, headers=JSON)
        assert r.status_code == status and message in r.json()["error"], (body, r.text)
    # Connect's validation: the problems per field.
    bad = json.dumps({"name": "bad", "config": {"connector.class": FILE_SINK, "tasks.max": "zero"}})
    r = http.post("/connect/connectors", data={"connector": bad})
    assert r.status_code == 400
    assert "<code>tasks.max</code>" in r.text and "<code>topics</code>" in r.text
    assert http.post("/connect/connectors/nobody/pause", headers=JSON).status_code == 404
    assert http.post("/connect/connectors/x/explode", headers=JSON).status_code == 404
    assert http.get("/connect/connectors/nobody").status_code == 404


def test_a_connect_worker_that_is_down_shows_as_down(broker: BrokerProcess) -> None:
    from streamkit.testing import free_port

    url = f"http://127.0.0.1:{free_port()}"
    with ConsoleThread(ConsoleSettings(broker.bootstrap, url)) as down, httpx.Client(base_url=down.url) as c:
        r = c.get("/connect")
        assert r.status_code == 503 and f"the Connect REST API at {url} does not answer" in r.text
        assert "Retry" in r.text and "Traceback" not in r.text


def test_in_the_browser_create_restart_a_failed_task_pause_and_delete(page: Any, console: str,
                                                                       tmp_path: Path) -> None:
    blocker = tmp_path / "later"
    blocker.write_text("a file where the sink needs a directory: its task fails to start")
    target = blocker / "out.txt"
    page.goto(console)
    page.get_by_role("link", name="Connect", exact=True).click()
    form = page.locator("#create-connector")
    form.get_by_role("textbox").fill(json.dumps({"name": "ui-sink", "config": {"connector.class": FILE_SINK}}))
    form.get_by_role("button", name="Create").click()
    expect(page.locator("#problems")).to_contain_text("topics")  # what is missing, per field

    page.locator("#create-connector").get_by_role("textbox").fill(_sink("ui-sink", target))
    page.locator("#create-connector").get_by_role("button", name="Create").click()
    expect(page).to_have_url(re.compile(r"/connect/connectors/ui-sink\?notice="))
    tasks = page.locator("#tasks")
    expect(tasks).to_contain_text("FAILED", timeout=20_000)  # the page refreshes its status
    expect(tasks.locator("pre.trace")).to_contain_text(str(blocker))

    blocker.unlink()
    page.get_by_role("button", name="Restart task").click()
    expect(page.get_by_role("status")).to_contain_text("restarted task 0")
    expect(tasks.locator("td.state")).to_have_text("RUNNING", timeout=20_000)
    expect(tasks.locator("pre.trace")).to_have_count(0)

    page.get_by_role("button", name="Pause").click()
    expect(page.locator("#connector-state")).to_have_text("PAUSED", timeout=20_000)
    page.get_by_role("button", name="Resume").click()
    expect(page.locator("#connector-state")).to_have_text("RUNNING", timeout=20_000)

    page.on("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete").click()
    expect(page.get_by_role("status")).to_contain_text("deleted connector ui-sink")
    expect(page.locator("#connectors")).not_to_contain_text("ui-sink")


class _CountingProxy:
    """A TCP proxy in front of the Connect worker that counts the connections made to it."""

    def __init__(self, target: str) -> None:
        import asyncio
        import threading

        self.host, port = target.removeprefix("http://").rstrip("/").rsplit(":", 1)
        self.target_port = int(port)
        self.connections = 0
        # Its own loop on its own thread: playwright's sync API runs a loop on this one.
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(asyncio.start_server(self._pipe, "127.0.0.1", 0),
                                                        self._loop).result(10)
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def _pipe(self, reader: Any, writer: Any) -> None:
        import asyncio
        import contextlib

        self.connections += 1
        up_writer = None
        try:
            up_reader, up_writer = await asyncio.open_connection(self.host, self.target_port)

            async def copy(source: Any, sink: Any) -> None:
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
                sink.close()

            await asyncio.gather(copy(reader, up_writer), copy(up_reader, writer), return_exceptions=True)
        finally:
            # Closed and waited for on this loop: a transport left closing when the loop
            # stops is collected later as "unclosed", failing whichever test runs then.
            for w in (writer, up_writer):
                if w is not None:
                    w.close()
                    with contextlib.suppress(Exception):
                        await w.wait_closed()

    async def _shutdown(self) -> None:
        import asyncio

        self._server.close()
        pipes = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in pipes:
            task.cancel()
        await asyncio.gather(*pipes, return_exceptions=True)
        await self._server.wait_closed()

    def close(self) -> None:
        import asyncio

        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()


def test_the_console_keeps_one_connection_to_connect_across_pages(broker: BrokerProcess,
                                                                   connect: ConnectProcess) -> None:
    proxy = _CountingProxy(connect.url)
    try:
        with ConsoleThread(ConsoleSettings(broker.bootstrap, proxy.url)) as console, \
                httpx.Client(base_url=console.url, timeout=30) as web:
            for _ in range(5):  # each page asks Connect twice: the connectors, the plugins
                assert web.get("/connect", headers=JSON).status_code == 200
        assert proxy.connections == 1
    finally:
        proxy.close()
