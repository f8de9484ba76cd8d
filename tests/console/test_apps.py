"""The Apps and Pipeline pages against a real stream worker process (apps.wordcount), a
real Connect worker process and a real broker process: workers up and down, their partitions
and tables, a table queried by key, the pipeline from a file source through the app to a
file sink, in the routes and in chromium; and the per-operator event time read from a
worker's metrics."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Producer
from playwright.sync_api import expect

from streamkit.console import ConsoleSettings
from streamkit.console.apps import Worker, read_metrics
from streamkit.streams.metrics import Metrics
from streamkit.testing import BrokerProcess, free_port
from tests.console.conftest import JSON, ConnectProcess, ConsoleThread, WorkerProcess, eventually

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def worker(broker: BrokerProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    with WorkerProcess("apps.wordcount", broker.bootstrap, tmp_path_factory.mktemp("wordcount") / "data") as running:
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        for line in ("hello world", "hello console"):
            producer.produce("lines", value=line.encode())
        producer.flush(10)
        yield running


@pytest.fixture(scope="module")
def down_url() -> str:
    return f"http://127.0.0.1:{free_port()}"


@pytest.fixture(scope="module")
def connect(broker: BrokerProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectProcess]:
    with ConnectProcess(broker.bootstrap, tmp_path_factory.mktemp("connect")) as running:
        yield running


@pytest.fixture(scope="module")
def console(broker: BrokerProcess, worker: WorkerProcess, connect: ConnectProcess, down_url: str) -> Iterator[str]:
    settings = ConsoleSettings(broker.bootstrap, connect.url, app_urls=(worker.url, down_url))
    with ConsoleThread(settings) as running:
        yield running.url


@pytest.fixture(scope="module")
def http(console: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=console, timeout=30) as c:
        yield c


def _address(url: str) -> str:
    return url.removeprefix("http://")


def test_workers_tables_and_lookups(http: httpx.Client, worker: WorkerProcess, down_url: str) -> None:
    workers = http.get("/apps", headers=JSON).json()["workers"]
    up, down = workers
    assert (up["address"], up["up"], up["app"]) == (_address(worker.url), True, "wordcount")
    assert "word_counts" in up["tables"] and any(p.startswith("words-") for p in up["partitions"])
    assert (down["address"], down["up"]) == (_address(down_url), False) and down["error"]
    assert "DOWN" in http.get("/apps").text

    base = f"/apps/{_address(worker.url)}"
    topology = http.get(base).text.split('<p id="topology">')[1].split("</p>")[0]
    reads, writes = topology.split("writes")
    assert ">lines</a>" in reads and ">words</a>" in reads and "changelog" not in topology
    assert ">word_counts</a>" in writes and ">lines</a>" not in writes
    eventually(lambda: http.get(f"{base}/tables/word_counts?key=hello", headers=JSON).json().get("rows") == [["hello", 2]],
               "hello counted twice")
    rows = dict(http.get(f"{base}/tables/word_counts", headers=JSON).json()["rows"])
    assert rows == {"hello": 2, "world": 1, "console": 1}
    r = http.get(f"{base}/tables/word_counts?key=absent", headers=JSON)
    assert r.status_code == 404 and "absent" in r.json()["error"]
    r = http.get(f"{base}/tables/no_such_table", headers=JSON)
    assert r.status_code == 404 and "no table named 'no_such_table'" in r.json()["error"]
    r = http.get(f"{base}/tables/word_counts?limit=lots", headers=JSON)
    assert r.status_code == 400 and "limit must be an integer" in r.json()["error"]
    assert http.get("/apps/10.0.0.1:9", headers=JSON).status_code == 404
    page = http.get(f"/apps/{_address(down_url)}")
    assert page.status_code == 200 and "DOWN" in page.text and "Retry" in page.text


def test_operator_event_time_and_late_counts_from_a_workers_metrics() -> None:
    metrics = Metrics(late_records=3, late_by_operator={"window-1": 3})
    text = metrics.render("app", dict, dict, lambda: {("window-1", 0): (5_000, 250), ("window-1", 1): (4_000, 0)})
    shown = Worker("http://w", "w", up=True)
    read_metrics(text, shown)
    assert [(o.operator, o.partition, o.stream_time_ms, o.behind_ms) for o in shown.operators] == [
        ("window-1", 0, 5_000, 250), ("window-1", 1, 4_000, 0)]
    assert shown.late_by_operator == {"window-1": 3} and shown.late_records == 3


def test_in_the_browser_find_the_worker_and_query_its_table(page: Any, console: str, worker: WorkerProcess) -> None:
    page.goto(console)
    page.get_by_role("link", name="Apps", exact=True).click()
    expect(page.locator("#workers")).to_contain_text("DOWN")
    page.get_by_role("link", name=_address(worker.url)).click()
    expect(page.locator("#app-id")).to_have_text("wordcount")
    page.locator("#tables").get_by_role("link", name="word_counts").click()
    expect(page).to_have_url(re.compile(r"/tables/word_counts$"))
    page.get_by_label("Key", exact=True).fill("hello")
    page.get_by_role("button", name="Look up").click()
    expect(page.locator("#rows tbody tr")).to_have_count(1)
    expect(page.locator("#rows tbody tr td").nth(1)).to_have_text("2")


def _pipeline_connectors(connect: ConnectProcess, directory: Path) -> None:
    (directory / "in.txt").write_text("the pipeline view\n")
    connectors = [
        ("lines-in", {"connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
                      "file": str(directory / "in.txt"), "topic": "lines"}),
        ("counts-out", {"connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
                        "file": str(directory / "out.txt"), "topics": "word_counts"}),
    ]
    for name, config in connectors:
        if httpx.get(f"{connect.url}/connectors/{name}").status_code == 404:
            r = httpx.post(f"{connect.url}/connectors", json={"name": name, "config": config}, timeout=30)
            assert r.status_code == 201, r.text


def test_the_pipeline_from_source_connector_through_the_app_to_sink(http: httpx.Client, connect: ConnectProcess,
                                                                     tmp_path_factory: pytest.TempPathFactory) -> None:
    _pipeline_connectors(connect, tmp_path_factory.mktemp("files"))
    graph = http.get("/pipeline", headers=JSON).json()["pipeline"]
    edges = {(e["source"], e["target"]) for e in graph["edges"]}
    assert {("source:lines-in", "topic:lines"), ("topic:lines", "app:wordcount"), ("topic:words", "app:wordcount"),
            ("app:wordcount", "topic:word_counts"), ("topic:word_counts", "sink:counts-out")} <= edges, edges
    assert not [n for n in graph["nodes"] if "changelog" in n["id"]]
    assert any("is down" in note for note in graph["notes"])
    source = http.get("/connect/connectors/lines-in").text
    assert 'href="/topics/lines">lines</a>' in source.split('id="connector-topics"')[1].split("</p>")[0]


def test_in_the_browser_see_the_pipeline_graph(page: Any, console: str, connect: ConnectProcess,
                                               tmp_path_factory: pytest.TempPathFactory) -> None:
    _pipeline_connectors(connect, tmp_path_factory.mktemp("files"))
    page.goto(console)
    page.get_by_role("link", name="Pipeline", exact=True).click()
    expect(page.locator("#edges")).to_contain_text("counts-out")
    page.wait_for_function("window.pipelineGraph !== undefined")  # the table is there before the script ran
    drawn = page.evaluate("window.pipelineGraph.nodes().map(n => n.id()).sort()")
    assert {"source:lines-in", "topic:lines", "app:wordcount", "topic:word_counts", "sink:counts-out"} <= set(drawn)
    assert page.evaluate("window.pipelineGraph.edges().length") == len(page.locator("#edges tbody tr").all())
    # the edges are labelled with their rate once the page has polled twice
    page.wait_for_function("window.pipelineGraph.edges().some(e => /\\/s$/.test(e.data('rate')))", timeout=30_000)
    expect(page.locator("#edges td.rate").first).to_have_text(re.compile(r"/s$"))
    page.screenshot(path=str(tmp_path_factory.getbasetemp() / "pipeline.png"))
    page.evaluate("window.pipelineGraph.getElementById('app:wordcount').emit('tap')")  # a click on the node
    expect(page.locator("#app-id")).to_have_text("wordcount")


def test_live_rates_on_the_pipeline_edges(http: httpx.Client, connect: ConnectProcess, broker: BrokerProcess,
                                          tmp_path_factory: pytest.TempPathFactory) -> None:
    _pipeline_connectors(connect, tmp_path_factory.mktemp("files"))
    before = http.get("/pipeline/rates").json()["edges"]
    assert {(e["source"], e["target"]) for e in before} >= {("source:lines-in", "topic:lines"),
                                                            ("topic:lines", "app:wordcount")}
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(200):
        producer.produce("lines", value=f"rate {i}".encode())
    producer.flush(10)
    moving: set[tuple[str, str]] = set()

    def both_moved() -> bool:
        # Into a topic: the records written to it; out of it: the offsets the app commits.
        for e in http.get("/pipeline/rates").json()["edges"]:
            if e["rate"]:
                moving.add((e["source"], e["target"]))
        return {("source:lines-in", "topic:lines"), ("topic:lines", "app:wordcount")} <= moving

    eventually(both_moved, "records per second on the edges into and out of lines", timeout=60)
