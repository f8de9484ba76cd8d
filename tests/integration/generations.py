"""Every generation of a consumer group, replayed from ``__consumer_offsets``.

The broker writes a GroupMetadataValue record each time a generation becomes Stable (the
leader's assignment delivered) or the group becomes Empty, and when a static member's new
id replaces its old one. Reading those records back from the partition's segment files
gives the history of who was handed which partitions in each generation, which a test can
check for double ownership however fast the rebalances went by. (The internal topic is
compacted, but only closed segments are; a test's records stay in the active segment.)

Assignments are decoded from the consumer protocol's bytes here, independently of any client
library: ConsumerProtocolAssignment (all versions 0-3 start alike)
    int16 version, int32 count of [string topic, int32 count of [int32 partition]], bytes user_data
"""

from __future__ import annotations

import itertools
import struct
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from streamkit.broker.group.records import (
    GroupMetadataValue,
    decode_group_value,
    decode_key,
    partition_for_group,
)
from streamkit.log.batch import iter_batch_spans
from streamkit.log.records import decode_batch
from streamkit.testing import TEST_SETTINGS

__all__ = ["Generation", "check_generations", "decode_assignment", "group_history"]


def decode_assignment(data: bytes) -> dict[str, list[int]]:
    """A consumer protocol assignment: topic -> partitions."""
    if not data:
        return {}
    pos = 2  # version
    (topics,) = struct.unpack_from(">i", data, pos)
    pos += 4
    out: dict[str, list[int]] = {}
    for _ in range(max(topics, 0)):
        (length,) = struct.unpack_from(">h", data, pos)
        pos += 2
        topic = data[pos : pos + length].decode()
        pos += length
        (count,) = struct.unpack_from(">i", data, pos)
        pos += 4
        out.setdefault(topic, []).extend(struct.unpack_from(f">{count}i", data, pos))
        pos += 4 * count
    return out


def decode_owned(subscription: bytes) -> dict[str, list[int]] | None:
    """The partitions a member says it owns when it joins (ConsumerProtocolSubscription v1+:
    int16 version, [string topic], bytes user_data, [string topic, [int32 partition]] owned);
    None for version 0, which has no such field."""
    if len(subscription) < 2:
        return None
    (version,) = struct.unpack_from(">h", subscription, 0)
    if version < 1:
        return None
    pos = 2
    (topics,) = struct.unpack_from(">i", subscription, pos)
    pos += 4
    for _ in range(max(topics, 0)):
        (length,) = struct.unpack_from(">h", subscription, pos)
        pos += 2 + length
    (user_data,) = struct.unpack_from(">i", subscription, pos)
    pos += 4 + max(user_data, 0)
    (count,) = struct.unpack_from(">i", subscription, pos)
    pos += 4
    owned: dict[str, list[int]] = {}
    for _ in range(max(count, 0)):
        (length,) = struct.unpack_from(">h", subscription, pos)
        pos += 2
        topic = subscription[pos : pos + length].decode()
        pos += length
        (n,) = struct.unpack_from(">i", subscription, pos)
        pos += 4
        owned.setdefault(topic, []).extend(struct.unpack_from(f">{n}i", subscription, pos))
        pos += 4 * n
    return owned


def group_history(data_dir: Path, group: str,
                  offsets_partitions: int = int(TEST_SETTINGS["offsets.topic.num.partitions"])) -> list[GroupMetadataValue]:
    """The group's metadata records in the order the broker wrote them (tombstones left out)."""
    directory = data_dir / f"__consumer_offsets-{partition_for_group(group, offsets_partitions)}"
    out = []
    for path in sorted(directory.glob("*.log")):
        data = path.read_bytes()
        for pos, size, _base, _last in iter_batch_spans(data):
            for record in decode_batch(data[pos : pos + size])[1]:
                if record.key is not None and record.value is not None and decode_key(record.key) == (group,):
                    out.append(decode_group_value(record.value))
    return out


@dataclass(frozen=True)
class Generation:
    generation_id: int
    owners: dict[int, str]  # partition -> owner (group.instance.id, else member id)
    members: frozenset[str]
    # Per member: the partitions it said it owned when it joined this generation (None: a
    # version-0 subscription, which does not say).
    claimed: dict[str, list[int] | None]


def _owner(member_id: str, instance_id: str | None) -> str:
    return instance_id or member_id


def check_generations(data_dir: Path, group: str, topic: str, partitions: int,
                      cooperative: bool = False) -> list[Generation]:
    """Assert that in every recorded generation with members each partition of ``topic`` has
    exactly one owner (cooperative: at most one, and a partition moves from a member still in
    the group only through a generation where nobody owns it). Returns the generations."""
    history = []
    last_id = -1
    for value in group_history(data_dir, group):
        assert value.generation_id >= last_id, f"generation went back: {last_id} -> {value.generation_id}"
        last_id = value.generation_id
        if not value.members:
            continue
        owned: Counter[int] = Counter()
        owners: dict[int, str] = {}
        for m in value.members:
            assignment = decode_assignment(m.assignment)
            assert set(assignment) <= {topic}, f"generation {value.generation_id}: foreign topics {assignment}"
            for p in assignment.get(topic, []):
                owned[p] += 1
                owners[p] = _owner(m.member_id, m.group_instance_id)
        where = f"group {group} generation {value.generation_id}"
        assert all(0 <= p < partitions for p in owned), f"{where}: unknown partitions {sorted(owned)}"
        doubled = sorted(p for p, n in owned.items() if n > 1)
        assert not doubled, f"{where}: partitions {doubled} owned twice ({_describe(value)})"
        if not cooperative:
            missing = sorted(set(range(partitions)) - set(owned))
            assert not missing, f"{where}: partitions {missing} owned by nobody ({_describe(value)})"
        members = frozenset(_owner(m.member_id, m.group_instance_id) for m in value.members)
        claimed: dict[str, list[int] | None] = {}
        for m in value.members:
            said = decode_owned(m.subscription)
            claimed[_owner(m.member_id, m.group_instance_id)] = None if said is None else said.get(topic, [])
        history.append(Generation(value.generation_id, owners, members, claimed))
    if cooperative:
        assert any(c is not None for g in history for c in g.claimed.values()), (
            f"group {group}: no member listed its owned partitions (cooperative clients send v1+ subscriptions)")
        for before, after in itertools.pairwise(history):
            for p, owner in after.owners.items():
                previous = before.owners.get(p)
                if previous in (None, owner) or previous not in after.members:
                    continue
                # The previous generation handed ``p`` to ``previous``, but a member owns what
                # it received: one whose SyncGroup lost the race with the next rebalance
                # never got it, and says so when it rejoins (cooperative subscriptions list
                # the partitions owned). A partition still claimed must not move.
                claim = after.claimed.get(previous)
                assert claim is not None and p not in claim, (
                    f"group {group}: partition {p} moved from {previous} (still a member, claiming "
                    f"{claim}) to {owner} between generations {before.generation_id} and "
                    f"{after.generation_id} without being revoked")
    return history


def _describe(value: GroupMetadataValue) -> str:
    return "; ".join(f"{m.member_id}: {decode_assignment(m.assignment)}" for m in value.members)
