"""Several registry processes on one broker, and restarts: one leader takes the writes
(others forward to it), ids are unique and never reused, and the state is rebuilt from
the ``_schemas`` topic after a restart of the registry or of the broker."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from streamkit.testing import BrokerProcess, SchemaRegistryProcess


def schema(field: str) -> str:
    return json.dumps({"type": "record", "name": "R", "fields": [{"name": field, "type": "int"}]})


def register(url: str, subject: str, text: str) -> int:
    response = httpx.post(f"{url}/subjects/{subject}/versions", json={"schema": text}, timeout=30)
    assert response.status_code == 200, response.text
    return int(response.json()["id"])


@pytest.fixture
def pair(broker: BrokerProcess, tmp_path: Path) -> Iterator[tuple[SchemaRegistryProcess, SchemaRegistryProcess]]:
    settings = {"kafkastore.topic": f"_schemas_{tmp_path.name}", "schema.registry.group.id": tmp_path.name}
    a = SchemaRegistryProcess(broker.bootstrap, tmp_path / "a.log", settings).start()
    b = SchemaRegistryProcess(broker.bootstrap, tmp_path / "b.log", settings).start()
    try:
        yield a, b
    finally:
        a.stop()
        b.stop()


def test_two_registries_agree_and_hand_out_unique_ids(pair: tuple[SchemaRegistryProcess, ...]) -> None:
    a, b = pair
    # concurrent registrations on both processes, distinct schemas: one leader numbers them
    jobs = [(url, f"subject-{i}", schema(f"f{i}")) for i in range(20) for url in [(a.url, b.url)[i % 2]]]
    with ThreadPoolExecutor(8) as pool:
        ids = list(pool.map(lambda job: register(*job), jobs))
    assert len(set(ids)) == 20
    # what one process registered, the other serves at once (forwarded writes wait for the read)
    for (_, subject, text), sid in zip(jobs, ids, strict=True):
        for url in (a.url, b.url):
            assert json.loads(httpx.get(f"{url}/schemas/ids/{sid}").json()["schema"]) == json.loads(text)
            assert httpx.get(f"{url}/subjects/{subject}/versions/latest").json()["id"] == sid
    # the same schema through either process gets the same id
    assert register(a.url, "shared-a", schema("f3")) == register(b.url, "shared-b", schema("f3")) == ids[3]
    # config written through one is read through the other
    assert httpx.put(f"{b.url}/config", json={"compatibility": "FULL"}).status_code == 200
    assert httpx.get(f"{a.url}/config").json() == {"compatibilityLevel": "FULL"}


def test_a_leader_that_stops_hands_over(pair: tuple[SchemaRegistryProcess, ...]) -> None:
    a, b = pair
    first = register(b.url, "handover", schema("x"))
    leader, other = (a, b) if _leader(a) == a.url else (b, a)
    leader.stop()
    deadline = time.monotonic() + 30
    while _leader(other) != other.url:
        assert time.monotonic() < deadline, "the remaining registry did not take over"
        time.sleep(0.1)
    second = register(other.url, "handover-2", schema("y"))
    assert second > first
    leader.start()  # same port, rebuilt from the topic
    assert httpx.get(f"{leader.url}/schemas/ids/{second}").status_code == 200
    assert register(leader.url, "handover-3", schema("z")) > second


def _leader(registry: SchemaRegistryProcess) -> str | None:
    """Which URL the process forwards to: it logs each change of leader."""
    lines = [line for line in registry.log_file.read_text().splitlines() if "schema registry leader is now" in line]
    return lines[-1].split("leader is now ")[1].split(" ")[0] if lines else None


def test_registry_restart_rebuilds_its_state(broker: BrokerProcess, tmp_path: Path) -> None:
    settings = {"kafkastore.topic": f"_schemas_{tmp_path.name}", "schema.registry.group.id": tmp_path.name}
    with SchemaRegistryProcess(broker.bootstrap, tmp_path / "r.log", settings) as registry:
        assert httpx.put(f"{registry.url}/config/restart", json={"compatibility": "NONE"}).status_code == 200
        ids = [register(registry.url, "restart", schema(f"f{i}")) for i in range(3)]
        httpx.delete(f"{registry.url}/subjects/restart/versions/1")
        registry.kill()
        registry.start()
        assert httpx.get(f"{registry.url}/subjects/restart/versions").json() == [2, 3]
        assert httpx.get(f"{registry.url}/config/restart").json() == {"compatibilityLevel": "NONE"}
        assert httpx.get(f"{registry.url}/schemas/ids/{ids[0]}").status_code == 200
        # ids never go back, even after the newest version is deleted for good
        httpx.delete(f"{registry.url}/subjects/restart/versions/3")
        httpx.delete(f"{registry.url}/subjects/restart/versions/3?permanent=true")
        assert register(registry.url, "restart-next", schema("g")) > ids[2]


def test_broker_restart(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "broker") as broker, \
            SchemaRegistryProcess(broker.bootstrap, tmp_path / "r.log") as registry:
        first = register(registry.url, "survives", schema("a"))
        broker.stop()
        broker.start()
        # the registry's clients reconnect on their own: the first write after it works
        assert register(registry.url, "survives-2", schema("b")) > first
        assert httpx.get(f"{registry.url}/schemas/ids/{first}").status_code == 200
        registry.stop()
        registry.start()
        assert httpx.get(f"{registry.url}/subjects").json() == ["survives", "survives-2"]


def test_a_registry_not_eligible_never_leads(broker: BrokerProcess, tmp_path: Path) -> None:
    settings = {"kafkastore.topic": f"_schemas_{tmp_path.name}", "schema.registry.group.id": tmp_path.name}
    with SchemaRegistryProcess(broker.bootstrap, tmp_path / "a.log", settings) as eligible, \
            SchemaRegistryProcess(broker.bootstrap, tmp_path / "b.log",
                                  # its URL sorts first, so only the eligibility keeps it from leading
                                  {**settings, "leader.eligibility": "false", "host.name": "127.0.0.0"}) as follower:
        assert _leader(follower) == eligible.url
        sid = register(follower.url, "via-follower", schema("x"))
        assert httpx.get(f"{eligible.url}/schemas/ids/{sid}").status_code == 200
        assert _leader(eligible) == eligible.url
