"""KIP-848 groups inside the GroupCoordinator: the upgrade from an empty classic group, the
migration policy's refusals, offsets shared with the classic protocol, list/delete.
(Mixed groups and persistence: test_group_migration.py.)"""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from streamkit.broker.group.consumer_group import (
    ConsumerGroups,
    ConsumerSettings,
    HeartbeatRequest,
    HeartbeatResult,
)
from streamkit.broker.group.coordinator import GroupCoordinator
from streamkit.broker.group.group import JoinResult
from tests.broker.test_group_coordinator import (
    PARTITIONS,
    SETTINGS,
    Clock,
    MemoryStore,
    commit_one,
    jreq,
)


class Env:
    def __init__(self, store: MemoryStore | None = None, policy: str = "bidirectional") -> None:
        self.clock = Clock()
        self.store = store or MemoryStore()
        self.topics = {"t": 4}
        self.policy = policy
        self.co = GroupCoordinator(SETTINGS, PARTITIONS, self.store, self.clock, 4096, ConsumerGroups(
            ConsumerSettings(migration_policy=policy), lambda: self.topics, self.clock))

    def reopen(self) -> Env:
        env = type(self)(self.store, self.policy)
        env.clock.now = self.clock.now
        env.co.load()
        return env

    def heartbeat(self, req: HeartbeatRequest) -> HeartbeatResult:
        result, _deliveries = self.co.consumer_heartbeat(req)
        return result

    def join(self, member: str, group: str = "g") -> HeartbeatResult:
        return self.heartbeat(HeartbeatRequest(group, member, 0, rebalance_timeout_ms=30000,
                                               subscribed_topic_names=("t",), owned=frozenset()))

    def classic_member(self, group: str = "g") -> str:
        out = self.co.join(group, jreq())
        assert isinstance(out.result, JoinResult)
        out = self.co.join(group, jreq(out.result.member_id))
        return out.member_id


def test_a_new_protocol_member_converts_an_empty_classic_group_and_keeps_its_offsets() -> None:
    env = Env()
    assert env.co.commit("g", "", None, -1, commit_one(offset=17)) == (ErrorCode.none, {("t", 0): ErrorCode.none})
    assert env.co.group_type("g") == "classic"
    r = env.join("m1")
    assert r.error == ErrorCode.none and r.member_epoch == 1
    assert env.co.group_type("g") == "consumer" and env.co.get("g") is None
    assert env.co.fetch("g", [("t", 0)])[("t", 0)].offset == 17  # type: ignore[union-attr]
    assert ("g", "consumer", "Stable") in env.co.list_groups()


@pytest.mark.parametrize("policy", ["disabled", "downgrade"])
def test_without_online_upgrade_a_classic_group_with_members_refuses_a_new_protocol_member(policy: str) -> None:
    env = Env(policy=policy)
    env.classic_member()
    r = env.join("m1")
    assert r.error == ErrorCode.group_id_not_found
    assert r.message == "Group g is not a consumer group."
    assert env.co.group_type("g") == "classic"


def test_an_empty_consumer_group_becomes_classic_when_a_classic_member_joins() -> None:
    env = Env()
    env.join("m1")
    env.heartbeat(HeartbeatRequest("g", "m1", -1))
    assert env.co.group_type("g") == "consumer"
    out = env.co.join("g", jreq())
    assert isinstance(out.result, JoinResult) and out.result.error == ErrorCode.member_id_required
    assert env.co.group_type("g") == "classic"


def test_offset_commits_in_a_consumer_group_check_the_member_epoch() -> None:
    env = Env()
    env.join("m1")
    assert env.co.commit("g", "m1", None, 1, commit_one(offset=5))[0] == ErrorCode.none
    assert env.co.commit("g", "m1", None, 0, commit_one(offset=6))[0] == ErrorCode.stale_member_epoch
    assert env.co.commit("g", "zz", None, 1, commit_one(offset=6))[0] == ErrorCode.unknown_member_id
    assert env.co.commit_txn("g", "m1", None, 0, 1000, 0, commit_one())[0] == ErrorCode.illegal_generation
    assert env.co.fetch("g", [("t", 0)])[("t", 0)].offset == 5  # type: ignore[union-attr]
    # The commit must not have created a classic twin of the group.
    assert env.co.get("g") is None


def test_after_a_restart_members_keep_their_epoch_and_their_offsets() -> None:
    env = Env()
    env.join("m1")
    env.co.commit("g", "m1", None, 1, commit_one(offset=9))
    env = env.reopen()
    r = env.heartbeat(HeartbeatRequest("g", "m1", 1))
    assert r.error == ErrorCode.none and r.member_epoch == 1
    assert env.co.group_type("g") == "consumer"
    assert env.co.fetch("g", [("t", 0)])[("t", 0)].offset == 9  # type: ignore[union-attr]


def test_delete_a_consumer_group() -> None:
    env = Env()
    env.join("m1")
    env.co.commit("g", "m1", None, 1, commit_one(offset=9))
    assert env.co.delete("g") == ErrorCode.non_empty_group
    env.heartbeat(HeartbeatRequest("g", "m1", -1))
    assert env.co.delete("g") == ErrorCode.none
    assert env.co.group_type("g") is None and env.co.fetch("g", None) == {}
    reopened = env.reopen()
    assert reopened.co.fetch("g", None) == {} and reopened.co.group_type("g") is None


def test_the_coordinator_timer_expires_consumer_group_sessions() -> None:
    env = Env()
    env.join("m1")
    deadline = env.co.next_deadline()
    assert deadline == env.clock.now + 45000
    env.clock.now = deadline
    env.co.tick()
    assert env.co.list_groups() == [("g", "consumer", "Empty")]


def test_broker_settings_of_consumer_groups_keep_the_assignor_order() -> None:
    from streamkit.broker.config import BrokerConfig
    from streamkit.log.errors import ConfigError

    cfg = BrokerConfig.from_kafka({"group.consumer.assignors": "range, uniform",
                                   "group.consumer.heartbeat.interval.ms": "500"})
    assert cfg.group_consumer_assignors == "range, uniform" and cfg.group_consumer_heartbeat_interval_ms == 500
    with pytest.raises(ConfigError, match=r"group\.consumer\.assignors"):
        BrokerConfig.from_kafka({"group.consumer.assignors": "sticky"})
