"""GroupCoordinator (groups, committed offsets, persistence to ``__consumer_offsets`` through an
in-memory store) and the binary records of ``__consumer_offsets``."""

from __future__ import annotations

import struct
from collections import defaultdict
from collections.abc import Iterable

import pytest
from kio.schema.errors import ErrorCode

from streamkit.broker.group.coordinator import CommitRequest, GroupCoordinator
from streamkit.broker.group.group import GroupSettings, JoinRequest, JoinResult, SyncResult
from streamkit.broker.group.records import (
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitValue,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
    partition_for_group,
)
from streamkit.broker.group.state import GroupState
from streamkit.log.batch import BatchHeader
from streamkit.log.records import ControlType, Record, build_control_batch, decode_batch

DELAY = 3000
SETTINGS = GroupSettings(
    initial_rebalance_delay_ms=DELAY, min_session_timeout_ms=6000, max_session_timeout_ms=300_000
)
SESSION = 10_000
REBALANCE = 30_000
PARTITIONS = 7
T0 = 1_700_000_000_000


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now


class MemoryStore:
    """The injected OffsetsStore: batches per partition of __consumer_offsets."""

    def __init__(self) -> None:
        self.stored: dict[int, list[bytes]] = defaultdict(list)

    def append(self, partition: int, batch: bytes) -> None:
        assert 0 <= partition < PARTITIONS
        decode_batch(batch)  # a valid v2 batch (CRC checked)
        self.stored[partition].append(bytes(batch))

    def records(self, partition: int) -> Iterable[Record]:
        return [r for batch in self.stored.get(partition, []) for r in decode_batch(batch)[1]]

    def batches(self, partition: int) -> Iterable[tuple[BatchHeader, list[Record]]]:
        return [decode_batch(batch) for batch in self.stored.get(partition, [])]

    def all_records(self) -> list[tuple[int, Record]]:
        return [(p, r) for p in sorted(self.stored) for r in self.records(p)]


def jreq(member_id: str = "", *, instance: str | None = None,
         protocols: tuple[tuple[str, bytes], ...] = (("range", b"sub"),)) -> JoinRequest:
    return JoinRequest(
        member_id=member_id,
        group_instance_id=instance,
        client_id=f"client-{instance or 'dyn'}",
        client_host="/10.1.2.3",
        session_timeout_ms=SESSION,
        rebalance_timeout_ms=REBALANCE,
        protocol_type="consumer",
        protocols=protocols,
        require_known_member_id=True,
    )


def commit_one(topic: str = "t", partition: int = 0, offset: int = 42, metadata: str | None = "m",
               leader_epoch: int = 3) -> list[CommitRequest]:
    return [CommitRequest(topic, partition, offset, leader_epoch, metadata)]


class Env:
    def __init__(self, store: MemoryStore | None = None, metadata_max_bytes: int = 4096) -> None:
        self.clock = Clock()
        self.store = store or MemoryStore()
        self.co = GroupCoordinator(SETTINGS, PARTITIONS, self.store, self.clock, metadata_max_bytes)

    def reopen(self) -> Env:
        """A fresh coordinator over the same store, as after a broker restart."""
        env = Env(self.store)
        env.clock.now = self.clock.now
        env.co.load()
        return env

    def admit(self, group: str = "g", instance: str | None = None) -> str:
        out = self.co.join(group, jreq(instance=instance))
        if instance is None:
            assert isinstance(out.result, JoinResult)
            assert out.result.error == ErrorCode.member_id_required
            out = self.co.join(group, jreq(out.result.member_id))
        assert out.result is None
        return out.member_id

    def completing(self, group: str = "g") -> tuple[str, str]:
        """A dynamic leader and a static follower ("i-s"), rebalance completed."""
        a = self.admit(group)
        s = self.admit(group, instance="i-s")
        self.clock.now += DELAY
        delivered = {d.member_id: d.result for d in self.co.tick()}
        assert set(delivered) == {a, s}
        assert self.co.get(group).state == GroupState.COMPLETING_REBALANCE  # type: ignore[union-attr]
        return a, s

    def stable(self, group: str = "g") -> tuple[str, str, int]:
        a, s = self.completing(group)
        gen = self.co.get(group).generation_id  # type: ignore[union-attr]
        assert self.co.sync(group, s, "i-s", gen, {}).result is None
        out = self.co.sync(group, a, None, gen, {a: b"assign-a", s: b"assign-s"})
        assert isinstance(out.result, SyncResult) and out.result.assignment == b"assign-a"
        assert [d.result.assignment for d in out.deliveries] == [b"assign-s"]  # type: ignore[union-attr]
        return a, s, gen


# -- JoinGroup / SyncGroup / Heartbeat / LeaveGroup entry points -----------------------------


def test_join_with_an_empty_group_id_is_invalid() -> None:
    env = Env()
    out = env.co.join("", jreq())
    assert isinstance(out.result, JoinResult) and out.result.error == ErrorCode.invalid_group_id
    assert env.co.groups == {}


@pytest.mark.parametrize("instance", [None, "i-1"])
def test_join_with_a_member_id_to_an_unknown_group_creates_nothing(instance: str | None) -> None:
    env = Env()
    out = env.co.join("g", jreq("stale-id", instance=instance))
    assert isinstance(out.result, JoinResult) and out.result.error == ErrorCode.unknown_member_id
    assert env.co.get("g") is None and env.co.list_groups() == []


def test_requests_for_an_unknown_group() -> None:
    env = Env()
    out = env.co.sync("g", "m", None, 1, {})
    assert isinstance(out.result, SyncResult) and out.result.error == ErrorCode.unknown_member_id
    assert env.co.heartbeat("g", "m", None, 1) == ErrorCode.unknown_member_id
    _top, errors, deliveries = env.co.leave("g", [("m", None), ("n", None)])
    assert errors == [ErrorCode.unknown_member_id] * 2 and deliveries == []


def test_tick_fires_only_due_deadlines() -> None:
    env = Env()
    a = env.admit("g1")
    env.clock.now += 1000
    b = env.admit("g2")
    assert env.co.next_deadline() == T0 + DELAY
    env.clock.now = T0 + DELAY - 1
    assert env.co.tick() == []
    env.clock.now = T0 + DELAY
    assert [d.member_id for d in env.co.tick()] == [a]
    assert env.co.next_deadline() == T0 + 1000 + DELAY
    env.clock.now = T0 + 1000 + DELAY
    assert [d.member_id for d in env.co.tick()] == [b]


def test_leave_reports_per_member_errors() -> None:
    env = Env()
    a, _s, _ = env.stable()
    top, errors, _ = env.co.leave("g", [(a, None), ("nobody", None), ("", "i-s")])
    assert errors == [ErrorCode.none, ErrorCode.unknown_member_id, ErrorCode.none]
    assert top == ErrorCode.none
    group = env.co.get("g")
    assert group is not None and not group.members


# -- OffsetCommit / OffsetFetch ---------------------------------------------------------------


def test_simple_commit_to_a_new_group_is_accepted_and_fetched() -> None:
    env = Env()
    error, results = env.co.commit("g", "", None, -1, commit_one(offset=42, metadata="meta"))
    assert error == ErrorCode.none and results == {("t", 0): ErrorCode.none}
    assert env.co.fetch("g", [("t", 0), ("t", 1)]) == {
        ("t", 0): OffsetCommitValue(42, 3, "meta", T0),
        ("t", 1): None,
    }
    assert env.co.list_groups() == [("g", "", "Empty")]


def test_commit_with_a_generation_to_an_unknown_group_is_an_old_generation() -> None:
    env = Env()
    error, results = env.co.commit("g", "m", None, 5, commit_one())
    assert error == ErrorCode.illegal_generation and results == {}
    assert env.co.get("g") is None and env.co.fetch("g", None) == {} and not env.store.stored


def test_simple_commit_to_an_emptied_group_is_accepted() -> None:
    env = Env()
    a, _s, _ = env.stable()
    env.co.leave("g", [(a, None), ("", "i-s")])
    assert env.co.get("g").state == GroupState.EMPTY  # type: ignore[union-attr]
    error, _ = env.co.commit("g", "", None, -1, commit_one(offset=7))
    assert error == ErrorCode.none
    assert env.co.fetch("g", None)[("t", 0)].offset == 7  # type: ignore[union-attr]


def test_commit_to_a_group_with_members_needs_member_and_generation() -> None:
    env = Env()
    a, s, gen = env.stable()
    assert env.co.commit("g", "", None, -1, commit_one())[0] == ErrorCode.unknown_member_id
    assert env.co.commit("g", "nobody", None, gen, commit_one())[0] == ErrorCode.unknown_member_id
    assert env.co.commit("g", a, None, gen - 1, commit_one())[0] == ErrorCode.illegal_generation
    assert env.co.commit("g", a, None, gen + 1, commit_one())[0] == ErrorCode.illegal_generation
    assert env.co.fetch("g", None) == {}
    assert env.co.commit("g", s, "i-s", gen, commit_one(offset=9)) == (
        ErrorCode.none, {("t", 0): ErrorCode.none},
    )
    assert env.co.fetch("g", None)[("t", 0)].offset == 9  # type: ignore[union-attr]


def test_commit_during_completing_rebalance_is_refused() -> None:
    env = Env()
    a, _s = env.completing()
    gen = env.co.get("g").generation_id  # type: ignore[union-attr]
    assert env.co.commit("g", a, None, gen, commit_one())[0] == ErrorCode.rebalance_in_progress
    assert env.co.fetch("g", None) == {}


def test_commit_during_preparing_rebalance_is_accepted() -> None:
    env = Env()
    a, _s, gen = env.stable()
    env.admit()  # a new member: PreparingRebalance, the generation is still ``gen``
    assert env.co.get("g").state == GroupState.PREPARING_REBALANCE  # type: ignore[union-attr]
    assert env.co.commit("g", a, None, gen, commit_one(offset=11))[0] == ErrorCode.none
    assert env.co.fetch("g", None)[("t", 0)].offset == 11  # type: ignore[union-attr]


def test_commit_counts_as_a_heartbeat() -> None:
    env = Env()
    a, s, gen = env.stable()
    start = env.clock.now
    for t in range(start + 5000, start + 40_000, 5000):
        env.clock.now = t
        assert env.co.commit("g", a, None, gen, commit_one(offset=t))[0] == ErrorCode.none
        assert env.co.heartbeat("g", s, "i-s", gen) == ErrorCode.none
        env.co.tick()
    group = env.co.get("g")
    assert group is not None and group.state == GroupState.STABLE and a in group.members


def test_offset_metadata_too_large_is_per_partition() -> None:
    env = Env(metadata_max_bytes=10)
    offsets = [
        CommitRequest("t", 0, 1, -1, "x" * 10),
        CommitRequest("t", 1, 2, -1, "x" * 11),
        CommitRequest("t", 2, 3, -1, "é" * 10),  # 10 chars (20 UTF-8 bytes): Kafka counts chars
        CommitRequest("t", 3, 4, -1, None),
    ]
    error, results = env.co.commit("g", "", None, -1, offsets)
    assert error == ErrorCode.none
    assert results == {
        ("t", 0): ErrorCode.none,
        ("t", 1): ErrorCode.offset_metadata_too_large,
        ("t", 2): ErrorCode.none,
        ("t", 3): ErrorCode.none,
    }
    fetched = env.co.fetch("g", None)
    assert set(fetched) == {("t", 0), ("t", 2), ("t", 3)}
    assert fetched[("t", 2)].metadata == "é" * 10  # type: ignore[union-attr]
    assert fetched[("t", 3)].metadata == ""  # type: ignore[union-attr]


def test_fenced_static_member_cannot_commit() -> None:
    env = Env()
    _a, s, gen = env.stable()
    out = env.co.join("g", jreq(instance="i-s"))  # the static member restarts
    assert isinstance(out.result, JoinResult) and out.result.generation_id == gen
    assert env.co.commit("g", s, "i-s", gen, commit_one())[0] == ErrorCode.fenced_instance_id
    assert env.co.commit("g", out.result.member_id, "i-s", gen, commit_one())[0] == ErrorCode.none


def test_commit_with_the_empty_group_id_is_allowed_like_kafka() -> None:
    env = Env()
    assert env.co.commit("", "", None, -1, commit_one(offset=5))[0] == ErrorCode.none
    assert env.co.fetch("", None)[("t", 0)].offset == 5  # type: ignore[union-attr]


def test_fetch_returns_the_latest_commit_for_all_or_selected_partitions() -> None:
    env = Env()
    env.co.commit("g", "", None, -1, commit_one("t", 0, 1) + commit_one("u", 2, 10))
    env.clock.now += 5
    env.co.commit("g", "", None, -1, commit_one("t", 0, 2, metadata="second"))
    everything = env.co.fetch("g", None)
    assert everything == {
        ("t", 0): OffsetCommitValue(2, 3, "second", T0 + 5),
        ("u", 2): OffsetCommitValue(10, 3, "m", T0),
    }
    assert env.co.fetch("g", [("u", 2)]) == {("u", 2): everything[("u", 2)]}
    assert env.co.fetch("other", None) == {}


# -- persistence --------------------------------------------------------------------------------


def test_records_go_to_the_groups_partition_in_kafka_layout() -> None:
    env = Env()
    a, s, gen = env.stable("my-group")
    env.co.commit("my-group", a, None, gen, commit_one("t", 4, 99))
    expected = partition_for_group("my-group", PARTITIONS)
    assert set(env.store.stored) == {expected}
    keys = [decode_key(r.key) for _, r in env.store.all_records() if r.key is not None]
    assert ("my-group",) in keys and ("my-group", "t", 4) in keys
    group_values = [
        decode_group_value(r.value)
        for _, r in env.store.all_records()
        if r.key is not None and r.value is not None and decode_key(r.key) == ("my-group",)
    ]
    last = group_values[-1]
    assert (last.protocol_type, last.generation_id, last.protocol_name, last.leader_id) == (
        "consumer", gen, "range", a,
    )
    assert {(m.member_id, m.group_instance_id, m.assignment) for m in last.members} == {
        (a, None, b"assign-a"), (s, "i-s", b"assign-s"),
    }


def test_reload_restores_offsets_and_the_stable_group() -> None:
    env = Env()
    a, s, gen = env.stable()
    env.co.commit("g", a, None, gen, commit_one("t", 0, 100) + commit_one("t", 1, 200))
    env.co.commit("g", a, None, gen, commit_one("t", 0, 150))
    before = env.co.get("g")
    assert before is not None

    new = env.reopen()
    group = new.co.get("g")
    assert group is not None
    assert group.state == GroupState.STABLE and group.generation_id == gen
    assert (group.protocol_type, group.protocol_name, group.leader_id) == ("consumer", "range", a)
    assert set(group.members) == {a, s} and group.static_members == {"i-s": s}
    for member_id, member in group.members.items():
        old = before.members[member_id]
        assert (member.group_instance_id, member.client_id, member.client_host,
                member.session_timeout_ms, member.rebalance_timeout_ms, member.assignment) == (
            old.group_instance_id, old.client_id, old.client_host,
            old.session_timeout_ms, old.rebalance_timeout_ms, old.assignment)
        assert member.metadata("range") == b"sub"
    assert new.co.fetch("g", None) == env.co.fetch("g", None)
    assert new.co.fetch("g", [("t", 0)])[("t", 0)].offset == 150  # type: ignore[union-attr]

    # The members carry on: heartbeats, their assignment, and the next generation.
    assert new.co.heartbeat("g", a, None, gen) == ErrorCode.none
    out = new.co.sync("g", s, "i-s", gen, {})
    assert isinstance(out.result, SyncResult) and out.result.assignment == b"assign-s"
    assert new.co.join("g", jreq(a)).result is None  # the leader rejoins: a rebalance
    out = new.co.join("g", jreq(s, instance="i-s"))
    assert isinstance(out.result, JoinResult) and out.result.generation_id == gen + 1


def test_reload_restores_an_empty_group_with_its_generation() -> None:
    env = Env()
    a, _s, gen = env.stable()
    env.co.commit("g", a, None, gen, commit_one())
    env.co.leave("g", [(a, None), ("", "i-s")])
    group = env.co.get("g")
    assert group is not None and group.state == GroupState.EMPTY
    new = env.reopen()
    loaded = new.co.get("g")
    assert loaded is not None and loaded.state == GroupState.EMPTY
    assert loaded.generation_id == group.generation_id and not loaded.members
    assert new.co.fetch("g", None) == env.co.fetch("g", None)


def test_reload_keeps_the_new_id_of_a_restarted_static_member() -> None:
    env = Env()
    a, s, gen = env.stable()
    out = env.co.join("g", jreq(instance="i-s"))
    assert isinstance(out.result, JoinResult)
    new_id = out.result.member_id
    new = env.reopen()
    group = new.co.get("g")
    assert group is not None and set(group.members) == {a, new_id}
    assert group.generation_id == gen and group.state == GroupState.STABLE
    assert new.co.heartbeat("g", new_id, "i-s", gen) == ErrorCode.none
    assert new.co.heartbeat("g", s, "i-s", gen) == ErrorCode.fenced_instance_id
    out2 = new.co.sync("g", new_id, "i-s", gen, {})
    assert isinstance(out2.result, SyncResult) and out2.result.assignment == b"assign-s"


def test_delete_groups() -> None:
    env = Env()
    a, _s, gen = env.stable()
    env.co.commit("g", a, None, gen, commit_one("t", 0) + commit_one("t", 1))
    env.co.commit("simple", "", None, -1, commit_one("u", 0))
    assert env.co.delete("g") == ErrorCode.non_empty_group
    assert env.co.delete("unknown") == ErrorCode.group_id_not_found
    env.admit()  # PreparingRebalance: still not deletable
    assert env.co.delete("g") == ErrorCode.non_empty_group
    group = env.co.get("g")
    assert group is not None
    for member_id in list(group.members):
        env.co.leave("g", [(member_id, group.members[member_id].group_instance_id)])
    env.clock.now += DELAY
    env.co.tick()
    assert env.co.get("g").state == GroupState.EMPTY  # type: ignore[union-attr]

    assert env.co.delete("g") == ErrorCode.none
    assert env.co.get("g") is None and env.co.fetch("g", None) == {}
    assert env.co.delete("g") == ErrorCode.group_id_not_found
    assert [g for g, _, _ in env.co.list_groups()] == ["simple"]
    tombstones = {decode_key(r.key) for _, r in env.store.all_records()  # type: ignore[arg-type]
                  if r.value is None}
    assert tombstones == {("g",), ("g", "t", 0), ("g", "t", 1)}

    new = env.reopen()
    assert new.co.get("g") is None and new.co.fetch("g", None) == {}
    assert [g for g, _, _ in new.co.list_groups()] == ["simple"]
    assert new.co.fetch("simple", None)[("u", 0)].offset == 42  # type: ignore[union-attr]


def test_a_group_recreated_after_delete_and_reload_is_persisted_again() -> None:
    def short_lived_group(env: Env) -> None:
        env.admit(instance="i-s")  # straight to PreparingRebalance
        env.co.leave("g", [("", "i-s")])  # gone before the rebalance ends
        env.clock.now += DELAY
        env.co.tick()
        group = env.co.get("g")
        assert group is not None and group.state == GroupState.EMPTY
        assert group.generation_id == 1

    env = Env()
    short_lived_group(env)
    assert env.co.delete("g") == ErrorCode.none
    second = env.reopen()
    assert second.co.get("g") is None
    short_lived_group(second)  # the same id through the same generation as the deleted one
    third = second.reopen()
    loaded = third.co.get("g")
    assert loaded is not None and loaded.state == GroupState.EMPTY
    assert loaded.generation_id == 1


def test_deleted_offsets_stay_deleted_after_reload() -> None:
    env = Env()
    env.co.commit("g", "", None, -1, commit_one("t", 0) + commit_one("t", 1))
    env.co.delete_offsets("g", [("t", 0), ("t", 9)])
    assert set(env.co.fetch("g", None)) == {("t", 1)}
    assert set(env.reopen().co.fetch("g", None)) == {("t", 1)}


# -- DescribeGroups / ListGroups --------------------------------------------------------------


def test_describe_and_list_groups() -> None:
    env = Env()
    a, s, _ = env.stable("g1")
    env.admit("g2")
    d1, d2 = env.co.describe("g1"), env.co.describe("g2")
    assert (d1.state, d1.protocol_type, d1.protocol_name) == ("Stable", "consumer", "range")
    assert {m.member_id for m in d1.members} == {a, s}
    assert (d2.state, d2.protocol_name) == ("PreparingRebalance", "")  # no protocol until Stable
    assert env.co.describe("nope").state == "Dead"
    assert sorted(env.co.list_groups()) == [
        ("g1", "consumer", "Stable"), ("g2", "consumer", "PreparingRebalance"),
    ]
    assert env.co.list_groups({"Stable"}) == [("g1", "consumer", "Stable")]


# -- records of __consumer_offsets ------------------------------------------------------------


def test_offset_records_roundtrip_in_kafkas_layout() -> None:
    key = encode_offset_key("grp", "topic", 5)
    assert key == b"\x00\x01" + b"\x00\x03grp" + b"\x00\x05topic" + b"\x00\x00\x00\x05"
    assert decode_key(key) == ("grp", "topic", 5)
    value = OffsetCommitValue(offset=1 << 40, leader_epoch=7, metadata="ü", commit_timestamp=T0)
    data = encode_offset_value(value)
    assert data == (struct.pack(">hqi", 3, 1 << 40, 7) + b"\x00\x02" + "ü".encode()
                    + struct.pack(">q", T0))
    assert decode_offset_value(data) == value


def test_older_offset_value_versions_decode() -> None:
    v1 = struct.pack(">hq", 1, 77) + b"\x00\x02md" + struct.pack(">qq", T0, T0 + 1000)
    assert decode_offset_value(v1) == OffsetCommitValue(77, -1, "md", T0)
    v0 = struct.pack(">hq", 0, 78) + b"\xff\xff" + struct.pack(">q", T0)  # null metadata
    assert decode_offset_value(v0) == OffsetCommitValue(78, -1, "", T0)
    assert decode_key(struct.pack(">h", 0) + b"\x00\x01g\x00\x01t" + struct.pack(">i", 2)) == (
        "g", "t", 2,
    )


def test_group_records_roundtrip() -> None:
    assert encode_group_key("grp") == b"\x00\x02\x00\x03grp"
    assert decode_key(encode_group_key("grüppe")) == ("grüppe",)
    value = GroupMetadataValue(
        protocol_type="consumer", generation_id=12, protocol_name="range", leader_id="m-1",
        state_timestamp=T0,
        members=(
            MemberMetadata("m-1", None, "c1", "/10.0.0.1", 30_000, 10_000, b"\x00sub\xff", b""),
            MemberMetadata("m-2", "inst", "c2", "/10.0.0.2", 60_000, 45_000, b"", b"\x00\x01"),
        ),
    )
    data = encode_group_value(value)
    assert data.startswith(b"\x00\x03\x00\x08consumer" + struct.pack(">i", 12))
    assert decode_group_value(data) == value
    empty = GroupMetadataValue("", 3, None, None, T0, ())
    assert decode_group_value(encode_group_value(empty)) == empty


def test_older_group_value_version_decodes() -> None:
    v0 = (struct.pack(">h", 0) + b"\x00\x08consumer" + struct.pack(">i", 4) + b"\x00\x05range"
          + b"\x00\x01m" + struct.pack(">i", 1)
          + b"\x00\x01m" + b"\x00\x01c" + b"\x00\x01h" + struct.pack(">i", 10_000)
          + struct.pack(">i", 2) + b"su" + struct.pack(">i", 1) + b"A")
    assert decode_group_value(v0) == GroupMetadataValue(
        "consumer", 4, "range", "m", -1, (MemberMetadata("m", None, "c", "h", 0, 10_000, b"su", b"A"),),
    )


def test_unknown_key_version_and_truncated_records() -> None:
    assert decode_key(struct.pack(">h", 9) + b"whatever") is None
    with pytest.raises(ValueError):
        decode_key(encode_offset_key("g", "t", 1)[:-1])
    with pytest.raises(ValueError):
        decode_offset_value(encode_offset_value(OffsetCommitValue(1, 2, "m", 3))[:-3])


def java_string_hash(text: str) -> int:
    """Java's String.hashCode, by hand: s[0]*31^(n-1) + ... over UTF-16 code units, int32."""
    units: list[int] = []
    for ch in text:
        code = ord(ch)
        if code > 0xFFFF:  # a surrogate pair in Java's UTF-16 string
            code -= 0x10000
            units += [0xD800 + (code >> 10), 0xDC00 + (code & 0x3FF)]
        else:
            units.append(code)
    n = len(units)
    total = sum(u * 31 ** (n - 1 - i) for i, u in enumerate(units)) % 2**32
    return total - 2**32 if total >= 2**31 else total


@pytest.mark.parametrize(
    ("group_id", "java_hash"),
    [
        ("", 0),
        ("a", 97),
        ("Aa", 2112),
        ("test-group", 627841412),
        ("gruppé", -1237286465),  # non-ASCII, negative hash
        ("grp-😀", -1235730613),  # outside the BMP: two UTF-16 units
        ("polygenelubricants", -(2**31)),  # Integer.MIN_VALUE: Utils.abs gives 0
    ],
)
@pytest.mark.parametrize("partitions", [1, 7, 50])
def test_partition_for_group_matches_kafka(group_id: str, java_hash: int, partitions: int) -> None:
    assert java_string_hash(group_id) == java_hash
    expected = (0 if java_hash == -(2**31) else abs(java_hash)) % partitions
    assert partition_for_group(group_id, partitions) == expected


# -- transactional offsets (TxnOffsetCommit) -------------------------------------------------


def _marker(pid: int, commit: bool) -> bytes:
    return build_control_batch(ControlType.COMMIT if commit else ControlType.ABORT, producer_id=pid,
                               producer_epoch=0, coordinator_epoch=0, timestamp=0)


def test_txn_offsets_are_visible_only_after_commit() -> None:
    env = Env()
    assert env.co.commit_txn("g", "", None, -1, 7, 0, commit_one(offset=10))[0] == ErrorCode.none
    assert env.co.fetch("g", [("t", 0)]) == {("t", 0): None}
    assert env.co.has_pending("g", ("t", 0))
    env.co.complete_txn(7, commit=True)
    assert env.co.fetch("g", [("t", 0)])[("t", 0)].offset == 10  # type: ignore[union-attr]
    assert not env.co.has_pending("g", ("t", 0))
    env.co.commit_txn("g", "", None, -1, 7, 0, commit_one(offset=20))
    env.co.complete_txn(7, commit=False)
    assert env.co.fetch("g", [("t", 0)])[("t", 0)].offset == 10  # type: ignore[union-attr]


def test_replay_drops_aborted_and_keeps_committed_txn_offsets() -> None:
    env = Env()
    partition = partition_for_group("g", PARTITIONS)
    env.co.commit_txn("g", "", None, -1, 7, 0, commit_one(offset=10))
    env.store.append(partition, _marker(7, commit=True))
    env.co.commit_txn("g", "", None, -1, 7, 0, commit_one(offset=20))
    env.store.append(partition, _marker(7, commit=False))
    env.co.commit_txn("g", "", None, -1, 8, 0, commit_one(partition=1, offset=30))  # still open
    again = env.reopen()
    assert again.co.fetch("g", [("t", 0), ("t", 1)])[("t", 0)].offset == 10  # type: ignore[union-attr]
    assert again.co.fetch("g", [("t", 1)]) == {("t", 1): None}
    assert again.co.has_pending("g", ("t", 1))
    again.co.complete_txn(8, commit=True)
    assert again.co.fetch("g", [("t", 1)])[("t", 1)].offset == 30  # type: ignore[union-attr]


def test_txn_commit_from_a_stale_generation_is_refused() -> None:
    env = Env()
    a, _s, gen = env.stable()
    assert env.co.commit_txn("g", a, None, gen + 1, 7, 0, commit_one())[0] == ErrorCode.illegal_generation
    assert env.co.commit_txn("g", "who", None, gen, 7, 0, commit_one())[0] == ErrorCode.unknown_member_id
    assert env.co.commit_txn("g", a, None, gen, 7, 0, commit_one())[0] == ErrorCode.none
