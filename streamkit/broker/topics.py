"""Topic metadata and the partition logs behind it.

Each topic's metadata (id, partition count, config overrides) is one JSON file under
``{data_dir}/.meta/topics/``, written atomically; the logs themselves are the
``{topic}-{partition}`` directories a ``LogManager`` owns. Creating a topic writes the
metadata before the partition directories; deleting removes the metadata first, so a crash
in between leaves either a complete topic or orphan directories that start-up removes.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamkit.broker.errors import BrokerError, ErrorCode
from streamkit.log.checkpoint import write_atomically
from streamkit.log.config import LogConfig
from streamkit.log.errors import ConfigError
from streamkit.log.manager import LogManager
from streamkit.log.partition import PartitionLog
from streamkit.logfmt import key_values

__all__ = ["MAX_PARTITIONS_PER_TOPIC", "TopicInfo", "TopicManager", "check_partition_count", "validate_topic_name"]

log = logging.getLogger(__name__)

_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_NAME_LENGTH = 249
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
# Every partition is a directory with open files; a request for 2**31 of them must be refused
# before the first mkdir, not discovered when the disk or the fd table runs out.
MAX_PARTITIONS_PER_TOPIC = 10_000


def check_partition_count(count: int) -> None:
    if count < 1:
        raise BrokerError(ErrorCode.invalid_partitions, "number of partitions must be at least 1")
    if count > MAX_PARTITIONS_PER_TOPIC:
        raise BrokerError(
            ErrorCode.invalid_partitions,
            f"{count} partitions is more than this broker's limit of {MAX_PARTITIONS_PER_TOPIC}"
            " per topic",
        )


def validate_topic_name(name: str) -> None:
    """Kafka's rules (Topic.validate); raises BrokerError(INVALID_TOPIC_EXCEPTION)."""
    if not name or name in (".", ".."):
        raise BrokerError(ErrorCode.invalid_topic_exception, f"topic name {name!r} is illegal")
    if len(name) > MAX_NAME_LENGTH:
        raise BrokerError(ErrorCode.invalid_topic_exception, f"topic name is longer than {MAX_NAME_LENGTH}")
    if not _LEGAL.match(name):
        raise BrokerError(
            ErrorCode.invalid_topic_exception,
            f"topic name {name!r} has characters other than ASCII alphanumerics, '.', '_' and '-'",
        )


@dataclass(slots=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: int
    overrides: dict[str, str] = field(default_factory=dict)

    @property
    def internal(self) -> bool:
        return self.name in INTERNAL_TOPICS

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "topic_id": str(self.topic_id), "partitions": self.partitions,
                "configs": self.overrides}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TopicInfo:
        return cls(data["name"], uuid.UUID(data["topic_id"]), int(data["partitions"]),
                   {str(k): str(v) for k, v in data.get("configs", {}).items()})


class TopicManager:
    def __init__(self, data_dir: Path, defaults: LogConfig, logs: LogManager) -> None:
        self.data_dir = data_dir
        self.defaults = defaults
        self.logs = logs
        self.meta_dir = data_dir / ".meta" / "topics"
        self.topics: dict[str, TopicInfo] = {}

    # -- start-up ----------------------------------------------------------------------

    def load(self, create_missing: bool = True) -> None:
        """Read topic metadata, open every partition log, remove orphans, create missing
        (a cluster member creates the partitions it is assigned, ``host``)."""
        self.meta_dir.mkdir(parents=True, exist_ok=True)
        for path in sorted(self.meta_dir.glob("*.json")):
            try:
                info = TopicInfo.from_json(json.loads(path.read_text()))
            except (ValueError, KeyError) as exc:
                log.error("ignoring unreadable topic metadata %s: %s", path, exc)
                continue
            self.topics[info.name] = info
        opened = self.logs.open_all(self.config_for)
        for topic, partition in opened:
            known = self.topics.get(topic)
            if known is None or partition >= known.partitions:
                log.warning("deleting orphan partition %s-%d (no topic metadata)", topic, partition)
                self.logs.delete(topic, partition)
        if not create_missing:
            return
        for info in self.topics.values():
            for p in range(info.partitions):
                if self.logs.get(info.name, p) is None:
                    self.logs.create(info.name, p, self.config_for(info.name))

    # -- a cluster member's local replicas ----------------------------------------------

    def host(self, name: str, topic_id: uuid.UUID, partitions: int, overrides: dict[str, str],
             partition: int) -> PartitionLog:
        """The local log of one partition the cluster assigned here (opened, or created);
        the topic's metadata kept as the cluster has it."""
        info = self.topics.get(name)
        if info is None or info.topic_id != topic_id or info.partitions != partitions or info.overrides != overrides:
            info = TopicInfo(name, topic_id, partitions, dict(overrides))
            self._save(info)
            self.topics[name] = info
        plog = self.logs.get(name, partition)
        if plog is None:
            plog = self.logs.create(name, partition, self.config_for(name))
        return plog

    def unhost(self, name: str, partition: int) -> None:
        """Delete a local replica; the topic's metadata goes with its last one."""
        if self.logs.get(name, partition) is not None:
            self.logs.delete(name, partition)
        info = self.topics.get(name)
        if info is not None and not any(self.logs.get(name, p) is not None for p in range(info.partitions)):
            del self.topics[name]
            (self.meta_dir / f"{name}.json").unlink(missing_ok=True)

    # -- queries -----------------------------------------------------------------------

    def config_for(self, topic: str) -> LogConfig:
        info = self.topics.get(topic)
        if info is None or not info.overrides:
            return self.defaults
        return LogConfig.from_kafka(info.overrides, base=self.defaults)

    def get(self, topic: str) -> TopicInfo | None:
        return self.topics.get(topic)

    def partition(self, topic: str, partition: int) -> PartitionLog | None:
        return self.logs.get(topic, partition)

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        for info in self.topics.values():
            if info.topic_id == topic_id:
                return info
        return None

    # -- changes -------------------------------------------------------------------------

    def _save(self, info: TopicInfo) -> None:
        write_atomically(self.meta_dir / f"{info.name}.json", json.dumps(info.to_json()).encode())

    def check_create(self, name: str, partitions: int, replication_factor: int,
                     configs: dict[str, str]) -> LogConfig:
        """Validate a CreateTopics entry; raises BrokerError with Kafka's error code."""
        validate_topic_name(name)
        if name in self.topics:
            raise BrokerError(ErrorCode.topic_already_exists, f"topic {name!r} already exists")
        check_partition_count(partitions)
        if replication_factor != 1:
            raise BrokerError(
                ErrorCode.invalid_replication_factor,
                f"replication factor {replication_factor} is larger than the 1 available broker",
            )
        try:
            return LogConfig.from_kafka(configs, base=self.defaults)
        except ConfigError as exc:
            raise BrokerError(ErrorCode.invalid_config, str(exc)) from exc

    def create(self, name: str, partitions: int, configs: dict[str, str] | None = None,
               replication_factor: int = 1) -> TopicInfo:
        configs = dict(configs or {})
        config = self.check_create(name, partitions, replication_factor, configs)
        info = TopicInfo(name, uuid.uuid4(), partitions, configs)
        self._save(info)
        self.topics[name] = info
        for p in range(partitions):
            self.logs.create(name, p, config)
        log.info("created topic %s with %d partition%s%s", name, partitions, "" if partitions == 1 else "s",
                 f" ({key_values(configs)})" if configs else "")
        return info

    def delete(self, name: str) -> None:
        info = self.topics.pop(name, None)
        if info is None:
            raise BrokerError(ErrorCode.unknown_topic_or_partition, f"topic {name!r} does not exist")
        (self.meta_dir / f"{name}.json").unlink(missing_ok=True)
        for p in range(info.partitions):
            self.logs.delete(name, p)
        log.info("deleted topic %s", name)

    def add_partitions(self, name: str, count: int, validate_only: bool = False) -> None:
        info = self.topics.get(name)
        if info is None:
            raise BrokerError(ErrorCode.unknown_topic_or_partition, f"topic {name!r} does not exist")
        if count <= info.partitions:
            raise BrokerError(
                ErrorCode.invalid_partitions,
                f"topic {name!r} has {info.partitions} partitions; the new count must be larger",
            )
        check_partition_count(count)
        if validate_only:
            return
        config = self.config_for(name)
        old = info.partitions
        info.partitions = count
        self._save(info)
        for p in range(old, count):
            self.logs.create(name, p, config)

    def set_overrides(self, name: str, overrides: dict[str, str], validate_only: bool = False) -> None:
        """Replace a topic's config overrides (AlterConfigs semantics)."""
        info = self.topics.get(name)
        if info is None:
            raise BrokerError(ErrorCode.unknown_topic_or_partition, f"topic {name!r} does not exist")
        try:
            config = LogConfig.from_kafka(overrides, base=self.defaults)
        except ConfigError as exc:
            raise BrokerError(ErrorCode.invalid_config, str(exc)) from exc
        if validate_only:
            return
        info.overrides = dict(overrides)
        self._save(info)
        self.logs.update_config(name, config)
