"""The distributed worker's pure parts: the assignment of units and the state built from
the config topic's records."""

from __future__ import annotations

from streamkit.connect.cluster_state import ClusterState, assign_units
from streamkit.connect.status import TargetState


def test_assignment_is_deterministic_balanced_and_stable() -> None:
    units = [("a", -1), ("a", 0), ("a", 1), ("b", -1), ("b", 0), ("b", 1), ("b", 2)]
    plan = assign_units(units, ["w2", "w1", "w3"])
    assert plan == assign_units(list(reversed(units)), ["w3", "w1", "w2"]) or all(
        sorted(plan[m]) == sorted(assign_units(list(reversed(units)), ["w3", "w1", "w2"])[m]) for m in plan)
    assert sorted(u for us in plan.values() for u in us) == sorted(units)
    for name, count in (("a", 3), ("b", 4)):  # each connector's units spread over the workers
        assert sorted(len([u for u in us if u[0] == name]) for us in plan.values()) == (
            [1, 1, 1] if count == 3 else [1, 1, 2])
    # adding a connector moves none of the others' units
    more = assign_units([*units, ("c", -1), ("c", 0)], ["w1", "w2", "w3"])
    assert all(set(plan[m]) <= set(more[m]) for m in plan)
    assert assign_units(units, ["w1"]) == {"w1": units}


def test_cluster_state_from_config_records() -> None:
    state = ClusterState()
    state.apply_config("target-state-a", {"state": "PAUSED"})
    state.apply_config("connector-a", {"properties": {"connector.class": "X", "tasks.max": "2"}})
    state.apply_config("task-a-0", {"properties": {"k": "0"}})
    state.apply_config("task-a-1", {"properties": {"k": "1"}})
    assert state.tasks == {}  # not committed yet
    state.apply_config("commit-a", {"tasks": 2, "config_hash": "h"})
    assert state.tasks["a"] == [{"k": "0"}, {"k": "1"}] and state.targets["a"] == TargetState.PAUSED
    assert state.units() == [("a", -1), ("a", 0), ("a", 1)]
    restart = state.apply_config("restart-a", {"include_tasks": True, "only_failed": False, "nonce": "1"})
    assert restart is not None and restart.include_tasks and restart.task is None
    assert state.apply_config("restart-task-a-1", {"nonce": "2"}).task == 1  # type: ignore[union-attr]
    state.apply_config("target-state-a", {"state": "STOPPED"})
    assert state.units() == [("a", -1)]
    state.apply_config("connector-a", None)
    assert state.connectors == {} and state.tasks == {} and state.units() == []


async def test_a_worker_not_in_the_group_yet_answers_409() -> None:
    import pytest

    from streamkit.connect.distributed import DistributedHerder
    from streamkit.connect.errors import ConfigError
    from streamkit.connect.herder import HerderError
    from streamkit.connect.metrics import ConnectMetrics
    from streamkit.connect.plugins import PluginRegistry
    from streamkit.connect.worker_config import load_worker_config

    settings = {"bootstrap.servers": "127.0.0.1:1", "group.id": "g", "config.storage.topic": "c",
                "offset.storage.topic": "o", "status.storage.topic": "s"}
    herder = DistributedHerder(load_worker_config(settings), PluginRegistry(), ConnectMetrics(), "w:1", "http://w:1")
    config = {"connector.class": "FileStreamSinkConnector", "topics": "t", "file": "/tmp/x"}
    with pytest.raises(HerderError) as info:
        await herder.put_config("x", config)
    assert info.value.status == 409
    with pytest.raises(ConfigError):  # a bad config is a 400 before anything else
        await herder.put_config("x", {"connector.class": "FileStreamSinkConnector"})
    with pytest.raises(ConfigError) as missing:
        DistributedHerder(load_worker_config({"bootstrap.servers": "b:1"}), PluginRegistry(), ConnectMetrics(),
                          "w:1", "http://w:1")
    assert set(missing.value.problems) == {"group.id", "config.storage.topic", "offset.storage.topic",
                                           "status.storage.topic"}
