"""The console's routes against a real broker process, through FastAPI's httpx.Client: each
page's data (as JSON, ``Accept: application/json``) and HTML, each action, and a 4xx with
a clear message for every kind of bad input."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from confluent_kafka import Consumer, Producer, TopicPartition

from streamkit.testing import BrokerProcess
from tests.console.conftest import JSON, assigned, eventually, joined_consumer


def _create(client: httpx.Client, name: str, partitions: int = 1, configs: str = "") -> None:
    r = client.post("/topics", data={"name": name, "partitions": str(partitions), "configs": configs}, headers=JSON)
    assert r.status_code == 200, r.text


def test_overview_names_the_broker_and_lists_topics(client: httpx.Client, broker: BrokerProcess) -> None:
    _create(client, "overview-a")
    data = client.get("/", headers=JSON).json()["overview"]
    assert data["bootstrap"] == broker.bootstrap
    assert [b["port"] for b in data["brokers"]] == [broker.port]
    assert data["controller"] == data["brokers"][0]["id"]
    assert "overview-a" in [t["name"] for t in data["topics"]]
    assert data["under_replicated"] == [] and data["offline"] == []
    html = client.get("/").text
    assert broker.bootstrap in html and 'href="/topics/overview-a"' in html
    for entry in ("Topics", "Consumer groups", "Connect", "Apps"):
        assert f">{entry}</a>" in html


def test_create_search_alter_and_delete_a_topic(client: httpx.Client) -> None:
    _create(client, "orders.v1", partitions=3, configs="retention.ms=60000\ncleanup.policy=delete")
    _create(client, "payments")
    found = client.get("/topics?q=ORDERS", headers=JSON).json()["topics"]
    assert [t["name"] for t in found] == ["orders.v1"] and found[0]["partitions"] == 3
    topic = client.get("/topics/orders.v1", headers=JSON).json()["topic"]
    assert topic["configs"]["retention.ms"] == "60000" and "retention.ms" in topic["overrides"]
    assert [(o["partition"], o["earliest"], o["latest"]) for o in topic["offsets"]] == [(0, 0, 0), (1, 0, 0), (2, 0, 0)]
    assert [r["replicas"] for r in topic["replicas"]] == [[r["leader"]] for r in topic["replicas"]]

    r = client.post("/topics/orders.v1/config", data={"key": "retention.ms", "value": "120000"}, headers=JSON)
    assert r.status_code == 200, r.text
    assert client.get("/topics/orders.v1", headers=JSON).json()["topic"]["configs"]["retention.ms"] == "120000"
    r = client.post("/topics/orders.v1/config", data={"key": "retention.ms", "delete": "1"}, headers=JSON)
    assert "retention.ms" not in client.get("/topics/orders.v1", headers=JSON).json()["topic"]["overrides"]

    # A browser is sent back to the page it changed (POST-redirect-GET), with a notice.
    r = client.post("/topics/payments/delete", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].startswith("/topics?notice=")
    assert client.get("/topics/payments", headers=JSON).status_code == 404


def test_bad_topic_input_is_a_4xx_with_kafkas_message(client: httpx.Client) -> None:
    _create(client, "taken")
    cases = [
        ({"name": "bad name!", "partitions": "1"}, "is not a legal topic name"),
        ({"name": "taken", "partitions": "1"}, "already exists"),
        ({"name": "x1", "partitions": "many"}, "partitions must be an integer"),
        ({"name": "x2", "partitions": "0"}, "partitions must be at least 1"),
        ({"name": "x3", "partitions": "1", "configs": "retention.ms=soon"}, "invalid value 'soon' for retention.ms"),
        ({"name": "x4", "partitions": "1", "configs": "no equals sign"}, "key=value"),
    ]
    for fields, message in cases:
        r = client.post("/topics", data=fields, headers=JSON)
        assert r.status_code == 400 and message in r.json()["error"], (fields, r.text)
        page = client.post("/topics", data=fields)
        assert page.status_code == 400 and "Traceback" not in page.text
    r = client.post("/topics/taken/config", data={"key": "retention.mss", "value": "1"}, headers=JSON)
    assert r.status_code == 400 and "did you mean 'retention.ms'" in r.json()["error"]
    r = client.post("/topics/taken/config", data={"key": "retention.ms", "value": "later"}, headers=JSON)
    assert r.status_code == 400 and "invalid value 'later' for retention.ms" in r.json()["error"]
    r = client.post("/topics", content=b'{"name": "j"}', headers={**JSON, "content-type": "application/json"})
    assert r.status_code == 400 and "x-www-form-urlencoded" in r.json()["error"]


def test_missing_things_are_plain_not_found_pages(client: httpx.Client) -> None:
    for path in ("/topics/gone", "/topics/gone/messages", "/groups/nobody", "/no/such/page", "/apps/127.0.0.1:1"):
        r = client.get(path)
        assert r.status_code == 404, path
        assert "Not found" in r.text and "Traceback" not in r.text
        assert client.get(path, headers=JSON).json()["status"] == 404
    assert client.post("/topics/gone/delete", headers=JSON).status_code == 404


def test_produce_then_browse_with_decoding_and_filters(client: httpx.Client, broker: BrokerProcess) -> None:
    _create(client, "browse", partitions=2)
    records = [("k1", '{"id": 1, "name": "x"}', "source=web"), ("k2", "plain text", ""), ("k1", "second", "")]
    for key, value, headers in records:
        r = client.post("/topics/browse/produce", data={"key": key, "value": value, "headers": headers,
                                                          "partition": "0"}, headers=JSON)
        assert r.status_code == 200, r.text
    # Bytes that are not text show as hex (produced by another client).
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce("browse", value=b"\x00\x01\xfe", key=b"bin", partition=1)
    producer.flush(10)

    page = client.get("/topics/browse/messages", headers=JSON).json()["page"]
    shown = {(m["partition"], m["offset"]): m for m in page["messages"]}
    assert len(shown) == 4
    first = shown[(0, 0)]
    assert first["value"] == {"kind": "json", "text": json.dumps({"id": 1, "name": "x"}, indent=2), "schema_id": None}
    assert first["headers"] == [["source", {"kind": "text", "text": "web", "schema_id": None}]]
    assert shown[(1, 0)]["value"] == {"kind": "hex", "text": "00 01 fe", "schema_id": None}

    by_key = client.get("/topics/browse/messages?key=k1", headers=JSON).json()["page"]["messages"]
    assert [(m["partition"], m["offset"]) for m in by_key] == [(0, 0), (0, 2)]
    by_value = client.get("/topics/browse/messages?contains=plain", headers=JSON).json()["page"]["messages"]
    assert [m["offset"] for m in by_value] == [1]
    from_offset = client.get("/topics/browse/messages?partition=0&start=offset&offset=1&limit=1", headers=JSON).json()
    assert [m["offset"] for m in from_offset["page"]["messages"]] == [1]
    assert "offset=2" in from_offset["next_url"]
    last = client.get("/topics/browse/messages?partition=0&start=end&limit=1", headers=JSON).json()["page"]
    assert [m["value"]["text"] for m in last["messages"]] == ["second"]

    html = client.get("/topics/browse/messages").text
    assert "&#34;name&#34;: &#34;x&#34;" in html and "00 01 fe" in html


def test_browse_from_a_timestamp(client: httpx.Client, broker: BrokerProcess) -> None:
    _create(client, "timed")
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i, ts in enumerate((1_000_000, 2_000_000, 3_000_000)):
        producer.produce("timed", value=f"v{i}".encode(), timestamp=ts)
    producer.flush(10)
    page = client.get("/topics/timed/messages?start=timestamp&timestamp=2000000", headers=JSON).json()["page"]
    assert [m["value"]["text"] for m in page["messages"]] == ["v1", "v2"]
    iso = client.get("/topics/timed/messages?start=timestamp&timestamp=1970-01-01T00:50:00Z", headers=JSON).json()
    assert [m["value"]["text"] for m in iso["page"]["messages"]] == ["v2"]


def test_bad_browse_and_produce_input_is_a_400(client: httpx.Client) -> None:
    _create(client, "strict", partitions=2)
    for query, message in [
        ("start=timestamp&timestamp=yesterday", "neither epoch milliseconds nor an ISO 8601"),
        ("start=timestamp&timestamp=99999999999999999999", "outside 0 .. 9223372036854775807"),
        ("start=offset&offset=99999999999999999999", "offset must be at most 9223372036854775807"),
        ("start=offset", "needs the offset"),
        ("start=middle", "start must be beginning, end, offset or timestamp"),
        ("partition=7", "has no partition 7"),
        ("limit=100000", "limit must be between 1 and 500"),
        ("offset=-3&start=offset", "offset must be at least 0"),
    ]:
        r = client.get(f"/topics/strict/messages?{query}", headers=JSON)
        assert r.status_code == 400 and message in r.json()["error"], (query, r.text)
    r = client.post("/topics/strict/produce", data={"value": "v", "partition": "5"}, headers=JSON)
    assert r.status_code == 400 and "has no partition 5" in r.json()["error"]


def test_groups_lag_members_and_reset(client: httpx.Client, broker: BrokerProcess) -> None:
    _create(client, "lagging", partitions=2)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        producer.produce("lagging", value=b"x", partition=i % 2)
    producer.flush(10)
    consumer = joined_consumer(broker.bootstrap, "readers", "lagging")
    consumer.commit(offsets=[TopicPartition("lagging", 0, 2), TopicPartition("lagging", 1, 5)], asynchronous=False)
    try:
        listed = client.get("/groups", headers=JSON).json()["groups"]
        assert {"group_id": "readers", "protocol_type": "consumer", "state": "Stable", "members": 1} in listed
        group = client.get("/groups/readers", headers=JSON).json()
        assert [(lag["partition"], lag["committed"], lag["end_offset"]) for lag in group["lags"]] == [(0, 2, 5), (1, 5, 5)]
        assert group["total_lag"] == 3
        assert [tp["partition"] for tp in group["members"][0]["assignment"]] == [0, 1]
        fragment = client.get("/groups/readers/lag").text
        assert 'data-total="3"' in fragment and "<html" not in fragment
        r = client.post("/groups/readers/reset", data={"topic": "lagging", "to": "earliest"}, headers=JSON)
        assert r.status_code == 409 and "stop its consumers" in r.json()["error"]
    finally:
        consumer.close()
    r = client.post("/groups/readers/reset", data={"topic": "lagging", "to": "offset", "value": "4"}, headers=JSON)
    assert r.status_code == 200, r.text
    assert client.get("/groups/readers", headers=JSON).json()["total_lag"] == 2
    for fields, status, message in [
        ({"topic": "lagging", "to": "offset", "value": "99"}, 400, "outside lagging-0"),
        ({"topic": "lagging", "to": "sideways"}, 400, "earliest, latest, offset or timestamp"),
        ({"topic": "nowhere", "to": "latest"}, 404, "topic nowhere not found"),
        ({"topic": "lagging", "to": "timestamp", "value": "soon"}, 400, "ISO 8601"),
    ]:
        r = client.post("/groups/readers/reset", data=fields, headers=JSON)
        assert r.status_code == status and message in r.json()["error"], (fields, r.text)
    r = client.post("/groups/readers/reset", data={"topic": "lagging", "to": "latest"}, headers=JSON)
    assert r.status_code == 200 and client.get("/groups/readers", headers=JSON).json()["total_lag"] == 0


def test_pages_render_without_connect_or_apps(client: httpx.Client) -> None:
    r = client.get("/connect")
    assert r.status_code == 404 and "--connect-url" in r.text
    r = client.get("/apps")
    assert r.status_code == 200 and "no stream workers" in r.text


def test_static_assets_are_served_with_their_licenses(client: httpx.Client) -> None:
    for path in ("/static/vendor/htmx/htmx.min.js", "/static/vendor/chartjs/chart.umd.min.js",
                 "/static/vendor/cytoscape/cytoscape.min.js", "/static/vendor/cytoscape/LICENSE",
                 "/static/vendor/htmx/LICENSE", "/static/vendor/chartjs/LICENSE.md", "/static/console.css",
                 "/static/lag_chart.js", "/static/tail.js", "/static/pipeline.js", "/static/throughput_chart.js"):
        assert client.get(path).status_code == 200, path


def test_an_unreachable_broker_is_a_503_with_a_retry() -> None:
    from streamkit.console import ConsoleSettings
    from streamkit.testing import free_port
    from tests.console.conftest import ConsoleThread

    address = f"127.0.0.1:{free_port()}"
    with ConsoleThread(ConsoleSettings(address)) as console, httpx.Client(base_url=console.url) as down:
        r = down.get("/", headers=JSON)
        assert r.status_code == 503 and f"cannot reach a broker at {address}" in r.json()["error"]
        page = down.get("/topics")
        assert page.status_code == 503 and "Retry" in page.text


def test_the_console_command_serves_until_terminated(broker: BrokerProcess, tmp_path: Path) -> None:
    log = tmp_path / "console.log"
    with open(log, "wb") as out:
        process = subprocess.Popen([sys.executable, "-m", "streamkit", "console", "--bootstrap-servers",
                                    broker.bootstrap, "--listen", "127.0.0.1:0"], stdout=out, stderr=subprocess.STDOUT)
    try:
        url = eventually(lambda: (re.findall(r"console listening on (http://\S+)", log.read_text())
                                  or [process.poll() is not None and log.read_text()])[0], "the console to listen")
        assert isinstance(url, str) and url.startswith("http://"), url
        page = httpx.get(url, timeout=30)
        assert page.status_code == 200 and broker.bootstrap in page.text
    finally:
        process.terminate()
    assert process.wait(30) == 0
    bad = subprocess.run([sys.executable, "-m", "streamkit", "console", "--bootstrap-servers", broker.bootstrap,
                          "--listen", "nowhere"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--listen expects HOST:PORT, got 'nowhere'" in bad.stderr


def test_live_tail_streams_new_records_as_server_sent_events(client: httpx.Client, broker: BrokerProcess) -> None:
    _create(client, "tailed", partitions=2)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce("tailed", value=b"before", partition=0)
    producer.flush(10)
    with client.stream("GET", "/topics/tailed/tail?contains=keep") as stream:
        assert stream.status_code == 200 and stream.headers["content-type"].startswith("text/event-stream")
        lines = stream.iter_lines()
        assert (next(lines), next(lines)) == ("event: ready", "data: {}")
        # The consumer seeks to the end once the stream began: records written from now on.
        for value in (b"skip me", b"keep {1}", b"keep 2"):
            producer.produce("tailed", value=value, key=b"k", partition=1)
        producer.flush(10)
        events = []
        for line in lines:
            if line.startswith("data: "):
                events.append(json.loads(line.removeprefix("data: ")))
            if len(events) == 2:
                break
    assert [(e["partition"], e["value"]["text"]) for e in events] == [(1, "keep {1}"), (1, "keep 2")]
    assert client.get("/topics/gone/tail", headers=JSON).status_code == 404
    r = client.get("/topics/tailed/tail?partition=9", headers=JSON)
    assert r.status_code == 400 and "has no partition 9" in r.json()["error"]


def test_a_live_tail_of_a_busy_topic_skips_to_the_newest_records(client: httpx.Client,
                                                                  broker: BrokerProcess) -> None:
    _create(client, "busy")
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20})
    with client.stream("GET", "/topics/busy/tail") as stream:
        lines = stream.iter_lines()
        assert (next(lines), next(lines)) == ("event: ready", "data: {}")
        began = time.monotonic()
        for i in range(5000):  # far more than a page shows in a second (200)
            producer.produce("busy", value=f"burst {i}".encode())
        producer.flush(10)
        shown, skipped, event = 0, 0, ""
        for line in lines:
            if line.startswith("event: "):
                event = line.removeprefix("event: ")
            elif line.startswith("data: ") and event == "skipped":
                skipped += json.loads(line.removeprefix("data: "))["records"]
                producer.produce("busy", value=b"newest")
                producer.flush(10)
            elif line.startswith("data: "):
                shown += 1
                if json.loads(line.removeprefix("data: "))["value"]["text"] == "newest":
                    break
            if line == "":
                event = ""
        seconds = time.monotonic() - began
    # Every record is either shown or counted as skipped, and no more than 200 a second were
    # shown. The bound counts the seconds the burst took to write and read here: on a loaded
    # machine it spans several of the tail's seconds, each with its own 200.
    assert skipped > 0 and shown + skipped == 5001
    assert shown <= 200 * (math.ceil(seconds) + 1) + 1, (shown, seconds)


def test_throughput_counts_the_records_written_to_all_topics(client: httpx.Client, broker: BrokerProcess) -> None:
    _create(client, "counted", partitions=3)
    before = client.get("/throughput").json()
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(30):
        producer.produce("counted", value=b"x", partition=i % 3)
    producer.flush(10)
    after = client.get("/throughput").json()
    assert after["records"] - before["records"] == 30
    assert after["time_ms"] >= before["time_ms"]


def test_a_kip848_group_shows_its_members_and_protocol(client: httpx.Client, broker: BrokerProcess) -> None:
    _create(client, "modern-in", partitions=2)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "modern", "group.protocol": "consumer",
                         "enable.auto.commit": False})
    consumer.subscribe(["modern-in"])
    try:
        eventually(lambda: assigned(consumer, 2), "both partitions")
        consumer.commit(offsets=[TopicPartition("modern-in", 0, 0), TopicPartition("modern-in", 1, 0)],
                        asynchronous=False)
        group = client.get("/groups/modern", headers=JSON).json()
        assert (group["protocol"], group["state"]) == ("consumer", "Stable")
        listed = {g["group_id"]: g for g in client.get("/groups", headers=JSON).json()["groups"]}
        assert (listed["modern"]["state"], listed["modern"]["members"]) == ("Stable", 1)
        assert [sorted(tp["partition"] for tp in m["assignment"]) for m in group["members"]] == [[0, 1]]
        r = client.post("/groups/modern/reset", data={"topic": "modern-in", "to": "earliest"}, headers=JSON)
        assert r.status_code == 409
    finally:
        consumer.close()


def test_a_share_group_shows_its_members_and_start_offsets(client: httpx.Client, broker: BrokerProcess) -> None:
    from confluent_kafka import ShareConsumer

    _create(client, "shared-in")
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for _ in range(5):
        producer.produce("shared-in", value=b"job")
    producer.flush(10)
    consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": "sharers"})
    consumer.subscribe(["shared-in"])
    try:
        def joined() -> Any:
            consumer.poll(0.2)
            found = client.get("/groups/sharers", headers=JSON)
            return found.status_code == 200 and found.json()["members"] and found.json()

        group = eventually(joined, "the share consumer to join")
        assert (group["protocol"], group["state"]) == ("share", "Stable")
        assert [[tp["topic"] for tp in m["assignment"]] for m in group["members"]] == [["shared-in"]]
        listed = client.get("/groups", headers=JSON)
        assert listed.status_code == 200, listed.text
        assert {"group_id": "sharers", "protocol_type": "share"}.items() <= next(
            g for g in client.get("/groups", headers=JSON).json()["groups"] if g["group_id"] == "sharers").items()
        r = client.post("/groups/sharers/reset", data={"topic": "shared-in", "to": "earliest"}, headers=JSON)
        assert r.status_code == 409 and "stop its consumers" in r.json()["error"]
    finally:
        consumer.close()
    # Once empty, its share start offset moves (AlterShareGroupOffsets).
    eventually(lambda: not client.get("/groups/sharers", headers=JSON).json()["members"], "the share group to empty")
    for to, value, start in (("latest", "", 5), ("offset", "2", 2), ("earliest", "", 0)):
        r = client.post("/groups/sharers/reset", data={"topic": "shared-in", "to": to, "value": value}, headers=JSON)
        assert r.status_code == 200, r.text
        assert [row["new"] for row in r.json()["result"]] == [start]
        lags = client.get("/groups/sharers", headers=JSON).json()["lags"]
        assert [(lag["committed"], lag["end_offset"]) for lag in lags] == [(start, 5)]
    r = client.post("/groups/sharers/reset", data={"topic": "shared-in", "to": "offset", "value": "9"}, headers=JSON)
    assert r.status_code == 400 and "outside" in r.json()["error"]
