"""Keyed input from any Kafka client: an ``@app.agent`` counting page views per user into a
Table, fed by confluent-kafka and kcat with their default partitioner (librdkafka's
``consistent_random``: CRC32, not the murmur2 of the Java client and streamkit), run as real
``streamkit worker`` processes, one and two of them. Every count must equal the input, the
worker must never stop on the input, and every key must be found through either worker's
web endpoint (the worker detects the partitioner to route key lookups)."""

from __future__ import annotations

import json
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest

from streamkit.streams.partitioners import PartitionerDetector, crc32_partition, murmur2_partition
from streamkit.testing import BrokerProcess

from .conftest import Probe, eventually, log_tail
from .worker_processes import PARTITIONS, Scenario, Worker

pytestmark = [pytest.mark.timeout(240), pytest.mark.integration]

KEYED_APP = "tests.streams.apps_for_tests.keyed:app"
TABLE = "views_per_user"


def keyed_worker(s: Scenario, name: str) -> Worker:
    return s.worker(name, app=KEYED_APP)


def view(user: str, i: int) -> bytes:
    return json.dumps({"user": user, "page": f"/p{i}"}).encode()


def produce_confluent(bootstrap: str, topic: str, users: list[str], n: int) -> list[str]:
    """``n`` views with confluent-kafka's default settings; returns their users in order."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    sent = []
    for i in range(n):
        user = users[i % len(users)]
        producer.produce(topic, view(user, i), key=user.encode())
        sent.append(user)
    assert producer.flush(30) == 0, "confluent-kafka did not deliver every record"
    return sent


def produce_kcat(bootstrap: str, topic: str, users: list[str], n: int) -> list[str]:
    """``n`` views piped to ``kcat -P -K:`` (its default partitioner); returns their users."""
    lines, sent = [], []
    for i in range(n):
        user = users[(i * 7) % len(users)]
        lines.append(user.encode() + b":" + view(user, i))
        sent.append(user)
    done = subprocess.run(["kcat", "-b", bootstrap, "-t", topic, "-P", "-K:"], input=b"\n".join(lines) + b"\n",
                          capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode()
    return sent


async def counts_from_changelog(s: Scenario) -> dict[str, int]:
    state = await s.probe.latest(f"{s.app_id}-{TABLE}-changelog")
    return {k.decode(): json.loads(v) for k, v in state.items()}


async def counts_from_web(worker: Worker, users: set[str]) -> dict[str, int]:
    out = {}
    for user in sorted(users):
        status, body = await worker.get(f"/tables/{TABLE}/{user}")
        assert status == 200, (user, status, body)
        out[user] = body["value"]
    return out


def misplaced_by_murmur2(users: list[str]) -> list[str]:
    """The users whose CRC32 partition differs from their murmur2 one: with the old
    murmur2-only tables each of them stopped the worker."""
    return [u for u in users if crc32_partition(u.encode(), PARTITIONS) != murmur2_partition(u.encode(), PARTITIONS)]


async def assert_all_counted(s: Scenario, sent: list[str], workers: list[Worker]) -> None:
    expected = dict(Counter(sent))
    await s.caught_up(timeout=120)
    for w in workers:
        assert w.alive, f"worker {w.name} stopped:\n{log_tail(w.log_path)}"

    async def web_counts() -> bool:
        return all([await counts_from_web(w, set(expected)) == expected for w in workers])

    await eventually(web_counts, "every worker to serve every user's count", timeout=60, interval=0.3)
    for w in workers:
        await w.terminate()
    assert await counts_from_changelog(s) == expected


async def test_one_worker_counts_what_confluent_kafka_and_kcat_produce(scenario: Scenario) -> None:
    s = scenario
    users = [f"user-{i}" for i in range(40)]
    assert len(misplaced_by_murmur2(users)) > 20
    w = keyed_worker(s, "w1").start()
    sent = produce_confluent(s.broker.bootstrap, s.input, users, 400)
    sent += produce_kcat(s.broker.bootstrap, s.input, users, 100)
    await s.caught_up(timeout=120)
    assert w.alive, log_tail(w.log_path)
    # A restart (state restored from the local store and the changelog) goes on with more.
    await w.terminate()
    w.start()
    sent += produce_confluent(s.broker.bootstrap, s.input, users, 200)
    await assert_all_counted(s, sent, [w])
    assert "consistent_random partitioner" in w.log()


async def test_two_workers_count_and_serve_every_key(scenario: Scenario) -> None:
    s = scenario
    users = [f"user-{i}" for i in range(60)]
    w1 = keyed_worker(s, "w1").start()
    w2 = keyed_worker(s, "w2").start()

    async def split() -> bool:
        owned = [await w.partitions() for w in (w1, w2)]
        return all(owned) and len(owned[0] | owned[1]) == PARTITIONS

    await eventually(split, "two workers to share the input", timeout=90, interval=0.3)
    sent = produce_confluent(s.broker.bootstrap, s.input, users, 600)
    sent += produce_kcat(s.broker.bootstrap, s.input, users, 200)
    await assert_all_counted(s, sent, [w1, w2])


# -- the partitioners themselves, against librdkafka's ------------------------------------


@pytest.mark.parametrize(("setting", "name"), [(None, "consistent_random"), ("murmur2_random", "murmur2"),
                                               ("fnv1a_random", "fnv1a"), ("consistent", "consistent_random")])
async def test_the_detector_names_librdkafkas_partitioner(broker: BrokerProcess, probe: Probe,
                                                          setting: str | None, name: str) -> None:
    """Records placed by confluent-kafka with each partitioner setting: the detector names
    the partitioner, whose function maps every key where librdkafka put it."""
    topic = f"detect-{setting}-{time.monotonic_ns()}"
    await probe.create_topic(topic, 5)
    config = {"bootstrap.servers": broker.bootstrap}
    if setting:
        config["partitioner"] = setting
    producer = confluent_kafka.Producer(config)
    placed: list[tuple[bytes, int]] = []
    for i in range(100):
        key = f"key-{i}".encode()
        producer.produce(topic, b"v", key=key,
                         on_delivery=lambda err, msg, key=key: placed.append((key, msg.partition())))
    assert producer.flush(30) == 0
    detector = PartitionerDetector()
    for key, partition in placed:
        detector.observe(key, partition, 5)
    assert detector.done and detector.name == name and not detector.unknown
    fn = detector.lookup()
    assert fn is not None and all(fn(key, 5) == p for key, p in placed)


def test_the_detector_gives_up_on_explicit_partitions() -> None:
    detector = PartitionerDetector()
    for i in range(40):
        detector.observe(f"k{i}".encode(), i % 3, 3)
    assert detector.done and detector.unknown and detector.lookup() is None
    assert detector.possible(b"anything", 2, 3)


def test_a_topic_declares_its_partitioner(tmp_path: Path) -> None:
    from streamkit import App

    app = App("declared", data_dir=tmp_path)
    assert app.topic("a", partitioner="consistent").partitioner == "consistent_random"
    assert app.topic("b").partitioner is None
    with pytest.raises(ValueError, match="unknown partitioner 'round_robin'"):
        app.topic("c", partitioner="round_robin")


# -- bad records -------------------------------------------------------------------------------


async def test_a_malformed_record_never_stops_the_worker_and_is_kept(scenario: Scenario) -> None:
    """A record the app's model refuses, among good ones from kcat: with no setting at all
    the worker logs pydantic's detail, copies the record (key, value, headers) to
    ``{app}-dead-letter`` with the error context, and goes on; after a restart too."""
    s = scenario
    users = [f"user-{i}" for i in range(10)]
    w = keyed_worker(s, "w1").start()
    sent = produce_kcat(s.broker.bootstrap, s.input, users, 20)
    bad = b'{"user": "user-1", "page": 5}'
    done = subprocess.run(["kcat", "-b", s.broker.bootstrap, "-t", s.input, "-P", "-K:", "-H", "origin=shell"],
                          input=b"user-1:" + bad + b"\n", capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode()
    sent += produce_kcat(s.broker.bootstrap, s.input, users, 20)
    await s.caught_up(timeout=120)
    assert w.alive, log_tail(w.log_path)
    assert "page: Input should be a valid string (got 5)" in w.log()
    await w.terminate()
    w.start()
    sent += produce_confluent(s.broker.bootstrap, s.input, users, 20)
    await assert_all_counted(s, sent, [w])
    dead = await s.probe.read(f"{s.app_id}-dead-letter")
    assert [(r.key, r.value) for r in dead] == [(b"user-1", bad)]
    headers = dict(dead[0].headers)
    assert headers["origin"] == b"shell"
    assert headers["__streams.errors.topic"] == s.input.encode()
    assert b"page: Input should be a valid string" in headers["__streams.errors.message"]


async def test_the_fail_handler_names_the_command_that_skips_the_record(scenario: Scenario) -> None:
    s = scenario
    w = s.worker("w1", config={"deserialization.exception.handler": "fail"}, app=KEYED_APP).start()
    done = subprocess.run(["kcat", "-b", s.broker.bootstrap, "-t", s.input, "-P", "-K:", "-p", "2"],
                          input=b'user-1:{"user": "user-1"}\n', capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode()
    assert await w.wait_exit(90) == 1
    last = w.log().strip().splitlines()[-1]
    assert f"cannot deserialize record {s.input}-2@0: invalid PageView: page: Field required" in last
    assert (f"`streamkit groups reset-offsets {s.app_id} --topic {s.input} --partition 2 --to-offset 1 "
            "--execute`") in last


# -- lookups before (or without) a known partitioner ------------------------------------------


async def test_keys_placed_by_no_known_partitioner_are_found_through_any_worker(
        make_app: Any, probe: Probe, tmp_path: Path) -> None:
    """Records written to explicit partitions (no partitioner at all): each is counted in its
    own partition's task, and a key lookup through either of two workers finds it, by asking
    the other worker when the key is not local."""
    from streamkit.streams.agent import AgentStream
    from streamkit.testing import http_get

    from .conftest import running, unique

    app_id = unique("explicit")
    topic_name = f"{app_id}-in"
    await probe.create_topic(topic_name, PARTITIONS)
    apps = []
    for name in ("a", "b"):
        app = make_app(app_id=app_id, data_dir=tmp_path / name)
        topic = app.topic(topic_name, value_type=bytes)
        table = app.Table("counts", default=int)

        def make_agent(table: Any) -> Any:
            async def count(stream: AgentStream) -> None:
                async for event in stream.events():
                    table[event.key] += 1
            return count

        app.agent(topic, name="count")(make_agent(table))
        apps.append(app)
    placed = {f"key-{i}": i % PARTITIONS for i in range(12)}  # round robin, whatever the hash
    async with running(apps[0], web_port=0) as first, running(apps[1], web_port=0) as second:
        await eventually(lambda: first.assigned and second.assigned
                         and len(first.assigned | second.assigned) == PARTITIONS, "two workers sharing the input")
        for key, partition in placed.items():
            await probe.produce(topic_name, b"x", key=key.encode(), partition=partition)
        await eventually(lambda: probe.caught_up(app_id, [topic_name]), "every record committed", timeout=60)
        for runtime in (first, second):
            assert not runtime.partitioning(topic_name).name
        for runtime in (first, second):
            for key in placed:
                status, body = await http_get(runtime.web.port, f"/tables/counts/{key}")
                assert (status, body) == (200, {"key": key, "value": 1}), (runtime.web.port, key)
            status, body = await http_get(runtime.web.port, "/tables/counts/nobody")
            assert status == 404, body
