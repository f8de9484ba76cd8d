"""Tables on a real broker: the dict API, changelogs and restore, windowed tables
(now/current/delta, expiry by stream time), TableNotOwned, global tables; memory and RocksDB
stores alike."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from pydantic import BaseModel

from streamkit.streams.agent import AgentStream
from streamkit.streams.app import App
from streamkit.streams.table import NotCoPartitionedError, TableNotOwned
from streamkit.streams.topic import partition_for_key
from streamkit.streams.windows import Window

from .conftest import Probe, eventually, running

pytestmark = pytest.mark.timeout(90)

STORES = ["memory", "rocksdb"]


class Account(BaseModel):
    owner: str
    balance: int


def commands_app(make_app: Any, store: str, **kwargs: Any) -> tuple[App, Any, Any, list[Any]]:
    """An agent that applies dict operations to a table, one command per record, and
    records what each read returned."""
    app = make_app(**kwargs)
    commands = app.topic(f"{app.id}-commands", partitions=4)
    table = app.Table("kv", default=int, store=store)
    results: list[Any] = []

    @app.agent(commands)
    async def apply(stream: AgentStream) -> None:
        async for event in stream.events():
            op, key = event.value["op"], event.key
            if op == "set":
                table[key] = event.value["v"]
            elif op == "add":
                table[key] += event.value["v"]
            elif op == "del":
                try:
                    del table[key]
                    results.append(("del", key, True))
                except KeyError:
                    results.append(("del", key, False))
            elif op == "get":
                results.append(("get", key, table.get(key, "none"), key in table))

    return app, commands, table, results


@pytest.mark.parametrize("store", STORES)
async def test_dict_api_and_changelog(make_app: Any, probe: Probe, store: str) -> None:
    app, commands, table, results = commands_app(make_app, store)
    ops = [
        ("a", {"op": "add", "v": 5}),  # default 0, then += 5
        ("a", {"op": "add", "v": 2}),
        ("b", {"op": "set", "v": 10}),
        ("c", {"op": "set", "v": 1}),
        ("c", {"op": "del"}),
        ("zzz", {"op": "del"}),  # missing: KeyError
        ("c", {"op": "get"}),
        ("a", {"op": "get"}),
    ]
    async with running(app) as runtime:
        for key, value in ops:
            await commands.send(value, key=key)
        await probe.settle(runtime)
        # Keys are in different partitions: only each key's own order is defined.
        assert sorted(results, key=repr) == sorted([("del", "c", True), ("del", "zzz", False),
                                                    ("get", "c", "none", False), ("get", "a", 7, True)], key=repr)
        assert [r for r in results if r[1] == "c"] == [("del", "c", True), ("get", "c", "none", False)]
        # The test runs in the worker's loop: it can read the table directly.
        assert dict(table.items()) == {"a": 7, "b": 10}
        assert sorted(table.keys()) == ["a", "b"] and sorted(table.values()) == [7, 10]
        assert len(table) == 2
        assert table["a"] == 7
        assert "b" in table and "c" not in table
        assert table.get("c") is None
        assert table["new"] == 0  # a missing key reads as the default, which is stored
        assert "new" in table
        assert table.owned_partitions() == [0, 1, 2, 3]
        assert table.query("b") == 10
        with pytest.raises(KeyError):
            table.query("c")
        assert table.snapshot() == {"a": 7, "b": 10, "new": 0}
        await runtime.commit()
        changelog = await probe.latest(table.changelog.name)
    assert {k.decode(): orjson.loads(v) for k, v in changelog.items()} == {"a": 7, "b": 10, "new": 0}
    records = await probe.read(table.changelog.name)
    for r in records:
        assert r.partition == partition_for_key(r.key, 4), "changelog partition = key's partition"
    # "c" was set and deleted: its last changelog record is a tombstone.
    assert [r.value for r in records if r.key == b"c"][-1] is None


async def test_table_without_default_raises_key_error(make_app: Any) -> None:
    app = make_app()
    table = app.Table("plain")
    errors: list[BaseException] = []

    @app.agent(f"{app.id}-in")
    async def read(stream: AgentStream) -> None:
        async for event in stream.events():
            try:
                table[event.key]
            except KeyError as exc:
                errors.append(exc)

    async with running(app):
        await app.topics[f"{app.id}-in"].send(1, key="nope")
        await eventually(lambda: errors, "the KeyError")
    assert errors[0].args == ("nope",)


@pytest.mark.parametrize("store", STORES)
async def test_state_survives_a_restart(make_app: Any, probe: Probe, store: str, tmp_path: Path) -> None:
    """Stop (a clean stop commits) and start again: RocksDB reopens its files and replays
    the changelog tail; memory restores everything from the changelog."""
    app, commands, table, _ = commands_app(make_app, store)
    async with running(app) as runtime:
        for i in range(40):
            commands.send_soon({"op": "add", "v": i}, key=f"k{i % 7}")
        await commands.send({"op": "set", "v": 99}, key="fixed")
        await probe.settle(runtime)
        before = dict(table.items())
    assert before["fixed"] == 99 and sum(v for k, v in before.items() if k != "fixed") == sum(range(40))

    again, commands2, table2, _ = commands_app(make_app, store, app_id=app.id, data_dir=app.data_dir)
    async with running(again) as runtime:
        await probe.settle(runtime)
        assert dict(table2.items()) == before
        restored = sum(p.restored for p in runtime.metrics.restore.values())
        if store == "memory":
            assert restored >= len(before)  # rebuilt from the changelog
        else:
            assert restored == 0  # the local files were up to date
        await commands2.send({"op": "add", "v": 1}, key="fixed")
        await probe.settle(runtime)
        assert table2["fixed"] == 100


async def test_pydantic_values(make_app: Any, probe: Probe) -> None:
    app = make_app()
    accounts = app.Table("accounts", value_type=Account)
    topic = app.topic(f"{app.id}-deposits", value_type=int)

    @app.agent(topic)
    async def deposit(stream: AgentStream) -> None:
        async for event in stream.events():
            current = accounts.get(event.key) or Account(owner=event.key, balance=0)
            accounts[event.key] = Account(owner=current.owner, balance=current.balance + event.value)

    async with running(app) as runtime:
        for amount in (5, 7, -2):
            await topic.send(amount, key="ann")
        await probe.settle(runtime)
        assert accounts["ann"] == Account(owner="ann", balance=10)
        await runtime.commit()
    changelog = await probe.latest(accounts.changelog.name)
    assert Account.model_validate_json(changelog[b"ann"]) == Account(owner="ann", balance=10)


# -- ownership -------------------------------------------------------------------------


async def test_table_not_owned_names_the_problem(make_app: Any) -> None:
    """A one-partition input makes this worker own only table partition 0: outside an agent
    (a timer, a test) a key of another partition is not on this worker, and the error says
    why."""
    app = make_app()
    topic = app.topic(f"{app.id}-in", value_type=str, partitions=1)
    table = app.Table("counts", default=int)
    key = next(f"user{i}" for i in range(100) if partition_for_key(f"user{i}".encode(), 4) != 0)

    @app.agent(topic)
    async def count(stream: AgentStream) -> None:
        async for _value in stream:
            pass

    async with running(app):
        await eventually(lambda: table.owned_partitions() == [0], "table partition 0 to be restored")
        with pytest.raises(TableNotOwned) as info:
            table[key] += 1
    assert isinstance(info.value, KeyError)
    message = str(info.value)
    p = partition_for_key(key.encode(), 4)
    assert f"table 'counts': key {key.encode()!r} is in partition {p}" in message
    assert "group_by" in message and "co-partitioned" in message


@pytest.mark.parametrize("use", ["write", "read", "contains"])
async def test_an_agent_using_a_key_of_another_partition_fails_at_once(make_app: Any, probe: Probe,
                                                                        use: str) -> None:
    """One worker owns every partition, so a table key outside the event's partition used to
    work, and broke only once a second worker took the key's partition. It is refused at
    once instead (not a KeyError, which the agent could swallow), naming group_by; the
    record's offset is not committed. The worker knows the partition of the key once it has
    seen enough keyed records to tell the topic's partitioner (murmur2 here)."""
    app = make_app()
    topic = app.topic(f"{app.id}-in", value_type=str, partitions=4)
    table = app.Table("counts", default=int)
    event_key = "e0"
    table_key = next(f"user{i}" for i in range(100)
                     if partition_for_key(f"user{i}".encode(), 4) != partition_for_key(b"e0", 4))
    seen: list[str] = []

    @app.agent(topic)
    async def count(stream: AgentStream) -> None:
        async for event in stream.events():
            if event.value == "ok":  # a co-partitioned key works
                table[event.key] += 1
                seen.append(event.key)
                continue
            try:
                if use == "write":
                    table[event.value] = 1
                elif use == "read":
                    table.get(event.value)
                else:
                    _ = event.value in table
            except KeyError:
                seen.append("swallowed")

    others = [f"other{i}" for i in range(40)]
    async with running(app, expect_failure=True) as runtime:
        for key in [*others, event_key]:
            await topic.send("ok", key=key)
        await eventually(lambda: sorted(seen) == sorted([*others, event_key]), "the co-partitioned records")
        assert runtime.partitioning(topic.name).name == "murmur2"
        await topic.send(table_key, key=event_key)
        await asyncio.wait_for(runtime.stopped.wait(), 20)
    assert isinstance(runtime.failure, NotCoPartitionedError), runtime.failure
    assert "swallowed" not in seen
    message = str(runtime.failure)
    p = partition_for_key(table_key.encode(), 4)
    q = partition_for_key(event_key.encode(), 4)
    assert f"key {table_key.encode()!r} is in partition {p}, but the agent is processing partition {q}" in message
    assert "group_by" in message and "\n" not in message
    committed = await probe.committed(app.id)
    assert sum(committed.values()) <= len(others) + 1, "the failing record was not committed"


def test_table_outside_a_running_app(tmp_path: Path) -> None:
    app = App("offline", data_dir=tmp_path)
    table = app.Table("t", default=int)
    with pytest.raises(TableNotOwned, match="used outside a running app"):
        table["k"]
    assert "k" not in table
    assert table.get("k", 5) == 5
    assert list(table.items()) == []


# -- windowed tables -------------------------------------------------------------------

T0 = 1_700_000_000_000  # a multiple of every window size used here


@pytest.mark.parametrize("store", STORES)
async def test_tumbling_current_delta_and_windows(make_app: Any, probe: Probe, store: str) -> None:
    app = make_app()
    topic = app.topic(f"{app.id}-clicks", value_type=int, partitions=1)
    clicks = app.Table("clicks", default=int, store=store).tumbling(10, expires=3600)
    seen: list[tuple[int, int, int, int]] = []

    @app.agent(topic)
    async def count(stream: AgentStream) -> None:
        async for event in stream.events():
            clicks[event.key] += event.value
            ws = clicks[event.key]
            seen.append((event.timestamp, ws.current(), ws.delta(10), ws.value()))

    stamps = [T0 + 1_000, T0 + 2_000, T0 + 9_999, T0 + 10_000, T0 + 25_000, T0 + 3_000]
    async with running(app) as runtime:
        for i, ts in enumerate(stamps):
            await topic.send(i + 1, key="page", timestamp=ts)
        await probe.settle(runtime)
        windows = clicks.windows("page")
        assert clicks.table.query("page") == [
            {"start": w.start, "end": w.end, "value": v} for w, v in windows]
    # Window [T0, T0+10s) gets 1, 2, 3 and the out-of-order 6; [T0+10s, +20s) gets 4; [T0+20s, +30s) 5.
    assert seen == [
        (T0 + 1_000, 1, 0, 1),
        (T0 + 2_000, 3, 0, 3),
        (T0 + 9_999, 6, 0, 6),
        (T0 + 10_000, 4, 6, 4),  # delta(10): the window of T0 + 0 s
        (T0 + 25_000, 5, 4, 5),  # delta(10): the window of T0 + 15 s
        (T0 + 3_000, 12, 0, 12),  # out of order, its window still open: 1 + 2 + 3 + 6
    ]
    assert windows == [(Window(T0, T0 + 10_000), 12), (Window(T0 + 10_000, T0 + 20_000), 4),
                       (Window(T0 + 20_000, T0 + 30_000), 5)]


async def test_hopping_windows_and_now(make_app: Any, probe: Probe) -> None:
    """A record is in every hopping window that contains it; current() reads the latest of
    them; now() reads the window of the wall clock (hour-long windows: the test cannot
    straddle a boundary by more than the one check below allows for)."""
    app = make_app()
    topic = app.topic(f"{app.id}-clicks", value_type=int, partitions=1)
    hop = app.Table("hop", default=int).hopping(10, 5, expires=3600)
    hours = app.Table("hours", default=int).tumbling(3600, expires=36000)
    seen: list[tuple[int, int, int]] = []
    nows: list[tuple[int, int, int]] = []

    @app.agent(topic)
    async def count(stream: AgentStream) -> None:
        async for event in stream.events():
            if event.value == 1:
                # (Only old timestamps here: a wall-clock one would move this table's stream
                # time to now, and expire these windows.)
                hop[event.key] += 1
                seen.append((event.timestamp, hop[event.key].current(), hop[event.key].delta(5)))
            else:
                hours[event.key] += 1
                before = time.time_ns() // 1_000_000 // 3_600_000
                now = hours[event.key].now()
                after = time.time_ns() // 1_000_000 // 3_600_000
                nows.append((now, before, after))

    async with running(app) as runtime:
        for ts in (T0 + 1_000, T0 + 7_000, T0 + 12_000):
            await topic.send(1, key="k", timestamp=ts)
        await topic.send(0, key="k")  # now: the record's timestamp is the wall clock
        await topic.send(0, key="k")
        await probe.settle(runtime)
        windows = hop.windows("k")
    # T0+1s is in [T0-5s, T0+5s) and [T0, T0+10s); T0+7s in [T0, +10s) and [T0+5s, +15s); ...
    assert [(w.start - T0, w.end - T0, v) for w, v in windows if w.start < T0 + 20_000] == [
        (-5_000, 5_000, 1), (0, 10_000, 2), (5_000, 15_000, 2), (10_000, 20_000, 1)]
    assert seen[:3] == [
        (T0 + 1_000, 1, 1),  # current: [T0, T0+10s); delta(5): latest window of T0-4s, [T0-5s, T0+5s)
        (T0 + 7_000, 1, 2),  # current: [T0+5s, +15s); delta(5) at T0+2s: [T0, +10s) = 2
        (T0 + 12_000, 1, 2),  # current: [T0+10s, +20s); delta(5) at T0+7s: [T0+5s, +15s) = 2
    ]
    for (now, before, after), expected in zip(nows, (1, 2), strict=True):
        assert now == expected or before != after


@pytest.mark.parametrize("store", STORES)
async def test_windows_expire_by_stream_time(make_app: Any, probe: Probe, store: str) -> None:
    """``expires`` deletes a window once stream time (the largest timestamp seen on the
    partition, never the wall clock) passes its end by that much; a record for an expired
    window is dropped and counted as late."""
    app = make_app()
    topic = app.topic(f"{app.id}-clicks", value_type=int, partitions=1)
    clicks = app.Table("clicks", default=int, store=store).tumbling(10, expires=20)

    @app.agent(topic)
    async def count(stream: AgentStream) -> None:
        async for event in stream.events():
            clicks[event.key] += 1

    def starts(key: str) -> list[int]:
        return [w.start - T0 for w, _v in clicks.windows(key)]

    # Both keys in the input's one partition (stream time is per partition).
    k, other = [key for key in (f"key{i}" for i in range(100)) if partition_for_key(key.encode(), 4) == 0][:2]

    async with running(app) as runtime:
        await topic.send(1, key=k, timestamp=T0 + 1_000)
        await topic.send(1, key=other, timestamp=T0 + 2_000)
        await topic.send(1, key=k, timestamp=T0 + 29_999)  # stream time T0+29.999s: [T0, +10s) lives
        await probe.settle(runtime)
        assert starts(k) == [0, 20_000]
        await topic.send(1, key=k, timestamp=T0 + 30_000)  # T0+10s + 20s <= T0+30s: expired
        await probe.settle(runtime)
        await eventually(lambda: starts(k) == [20_000, 30_000] and starts(other) == [],
                         "[T0, T0+10s) to expire for both keys")
        await topic.send(1, key=k, timestamp=T0 + 5_000)  # late: its window expired
        await topic.send(1, key=k, timestamp=T0 + 15_000)  # [T0+10s, +20s) lives until T0+40s
        await topic.send(1, key=k, timestamp=T0 + 21_000)
        await probe.settle(runtime)
        assert runtime.metrics.late_records == 1
        assert [(w.start - T0, v) for w, v in clicks.windows(k)] == [(10_000, 1), (20_000, 2), (30_000, 1)]
        await runtime.commit()
    # The expiry reached the changelog: a restored store does not resurrect the window.
    again = make_app(app_id=app.id, data_dir=app.data_dir)
    topic2 = again.topic(topic.name, value_type=int)
    clicks2 = again.Table("clicks", default=int, store="memory").tumbling(10, expires=20)

    @again.agent(topic2)
    async def count2(stream: AgentStream) -> None:
        async for event in stream.events():
            clicks2[event.key] += 1

    async with running(again) as runtime:
        await probe.settle(runtime)
        assert [(w.start - T0, v) for w, v in clicks2.windows(k)] == [(10_000, 1), (20_000, 2), (30_000, 1)]
        assert clicks2.windows(other) == []
        # Stream time was restored with the state: the expired window stays expired.
        await topic2.send(1, key=k, timestamp=T0 + 6_000)
        await probe.settle(runtime)
        assert runtime.metrics.late_records == 1
        assert [(w.start - T0, v) for w, v in clicks2.windows(k)] == [(10_000, 1), (20_000, 2), (30_000, 1)]


async def test_windowed_table_needs_an_event(make_app: Any) -> None:
    app = make_app()
    topic = app.topic(f"{app.id}-in", value_type=int, partitions=1)
    windowed = app.Table("w", default=int).tumbling(10)

    @app.agent(topic)
    async def noop(stream: AgentStream) -> None:
        async for _ in stream:
            pass

    async with running(app):
        with pytest.raises(RuntimeError, match="needs a current event"):
            windowed["k"] += 1


# -- global tables -----------------------------------------------------------------------


async def test_global_table_sees_every_partition(make_app: Any, probe: Probe) -> None:
    """A global table's writes go to its changelog and become readable once read back, on
    every worker, whatever the key's partition."""
    app = make_app()
    topic = app.topic(f"{app.id}-in", partitions=1)
    everything = app.GlobalTable("everything", default=int)

    @app.agent(topic)
    async def write(stream: AgentStream) -> None:
        async for event in stream.events():
            everything[event.key] = event.value

    keys = [f"key{i}" for i in range(12)]
    assert len({partition_for_key(k.encode(), 4) for k in keys}) == 4
    async with running(app) as runtime:
        for i, key in enumerate(keys):
            topic.send_soon(i, key=key)
        await probe.settle(runtime)
        await eventually(lambda: dict(everything.items()) == {k: i for i, k in enumerate(keys)},
                         "every key to be read back from the changelog")
        assert everything["key3"] == 3
        assert everything["missing"] == 0  # default, not stored
        assert "missing" not in everything
        assert everything.owned_partitions() == [0, 1, 2, 3]
        with pytest.raises(KeyError):
            everything.query("missing")
        everything["key0"] = 100  # outside an agent: still goes through the changelog
        del everything["key1"]
        await eventually(lambda: everything.get("key0") == 100 and "key1" not in everything,
                         "the write and the delete to be read back")


async def test_global_table_on_two_workers_holds_every_partition(make_app: Any, probe: Probe,
                                                                 tmp_path: Path) -> None:
    """Two workers split the input: each writes only the keys of its own partitions, and each
    reads every key back (from all changelog partitions). A third worker's start returns
    only once its copy has caught up: its agents and joins see the whole table at once."""
    def build(app: App) -> tuple[Any, Any]:
        topic = app.topic(f"{app.id}-in", partitions=4)
        everything = app.GlobalTable("everything", default=int)

        @app.agent(topic)
        async def write(stream: AgentStream) -> None:
            async for event in stream.events():
                everything[event.key] = event.value

        return topic, everything

    w1 = make_app(data_dir=tmp_path / "w1")
    topic, g1 = build(w1)
    w2 = make_app(app_id=w1.id, data_dir=tmp_path / "w2")
    _, g2 = build(w2)
    keys = [f"key{i}" for i in range(40)]
    expected = {k: i for i, k in enumerate(keys)}
    async with running(w1) as r1, running(w2) as r2:
        def split() -> bool:
            mine = [{p for _t, p in r.assigned} for r in (r1, r2)]
            return all(mine) and not mine[0] & mine[1] and mine[0] | mine[1] == {0, 1, 2, 3}

        await eventually(split, "the two workers to split the input")
        await probe.produce_many(topic.name, [(k.encode(), str(i).encode(), None) for k, i in expected.items()])
        await eventually(lambda: probe.caught_up(w1.id, [topic.name]), "every record to be committed")
        for runtime in (r1, r2):
            wrote = {p for (_t, p), n in runtime.metrics.consumed_total.items() if n}
            assert wrote and wrote != {0, 1, 2, 3}, "each worker processed only part of the input"
        for table in (g1, g2):
            await eventually(lambda: dict(table.items()) == expected,  # noqa: B023
                             "each worker to hold every key")
            assert table["key7"] == 7 and table.get("nope") is None
        w3 = make_app(app_id=w1.id, data_dir=tmp_path / "w3")
        _, g3 = build(w3)
        async with running(w3) as r3:
            assert r3.global_tables_ready.is_set()
            assert dict(g3.items()) == expected, "caught up before start() returned"


async def test_windowed_updates_of_every_kind_agree_across_commits(make_app: Any, probe: Probe) -> None:
    """``+=``-style updates, assignments and ``apply`` on the same windows, with commits in
    between and a restart: every read sees the latest write (the cached window aggregates
    of ``+=`` never go stale)."""
    app = make_app()
    topic = app.topic(f"{app.id}-ops", value_type=dict, partitions=1)
    totals = app.Table("totals", default=int).tumbling(10, expires=3600)
    seen: list[int] = []

    @app.agent(topic)
    async def update(stream: AgentStream) -> None:
        async for op in stream:
            if op["op"] == "add":
                totals["k"] += op["n"]
            elif op["op"] == "sub":
                totals["k"] -= op["n"]
            elif op["op"] == "set":
                totals["k"] = op["n"]
            else:
                totals["k"].apply(lambda v, n=op["n"]: v * n)
            seen.append(totals["k"].current())

    ops = [("add", 2), ("add", 3), ("set", 10), ("add", 1), ("apply", 3), ("add", 1), ("sub", 4)]
    expected, value = [], 0
    for name, n in ops:
        value = {"add": value + n, "sub": value - n, "set": n, "apply": value * n}[name]
        expected.append(value)
    async with running(app) as runtime:
        for name, n in ops:  # one at a time, each committed before the next
            await topic.send({"op": name, "n": n}, key="k", timestamp=T0 + 1_000)
            await probe.settle(runtime)
        assert seen == expected
    again = make_app(app_id=app.id, data_dir=app.data_dir)
    topic2 = again.topic(topic.name, value_type=dict)
    totals2 = again.Table("totals", default=int).tumbling(10, expires=3600)
    seen2: list[int] = []

    @again.agent(topic2)
    async def update2(stream: AgentStream) -> None:
        async for op in stream:
            totals2["k"] += op["n"]
            seen2.append(totals2["k"].current())

    async with running(again) as runtime:
        await probe.settle(runtime)
        await topic2.send({"op": "add", "n": 5}, key="k", timestamp=T0 + 2_000)
        await probe.settle(runtime)
    assert seen2 == [expected[-1] + 5]
