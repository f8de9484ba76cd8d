"""Key partitioners of the Kafka clients, and telling from a topic's records which one filled it.

A keyed record's partition is chosen by its producer, and producers differ:

=====================  ==========================================  ==============================
name                   function of the key bytes                   default of
=====================  ==========================================  ==============================
``murmur2``            ``(murmur2(key) & 0x7fffffff) % n``         the Java client, aiokafka,
                                                                   kafka-python, streamkit
``consistent_random``  ``crc32(key) % n``                          librdkafka: confluent-kafka,
                                                                   kcat, Go's confluent client
``fnv1a``              ``abs(int32(fnv1a_32(key))) % n``           Sarama (Go) ``NewHashPartitioner``
=====================  ==========================================  ==============================

(librdkafka's ``murmur2_random``, ``consistent`` and ``fnv1a_random`` place keyed records like
``murmur2``, ``consistent_random`` and ``fnv1a``; they differ only for null keys.)

Processing does not depend on it: a record's state goes to the store of the task that
processes the record (its source partition), as in Kafka Streams. Key *lookups* do: which
worker holds key K of a table (interactive queries), and whether a table key an agent uses
belongs to the record's task. For those, a topic's partitioner is either declared
(``app.topic(name, partitioner="consistent_random")``) or detected by
``PartitionerDetector`` from the (key, partition) pairs of the records the worker consumes.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from functools import lru_cache

from aiokafka.partitioner import murmur2

__all__ = ["PARTITIONERS", "Partitioner", "PartitionerDetector", "canonical_partitioner", "partitioner"]

Partitioner = Callable[[bytes, int], int]
"""``fn(key_bytes, partition_count) -> partition``."""

# Lookups repeat keys (a table access per record); the hashes are pure Python (murmur2,
# fnv1a), so a bounded memo makes a repeated lookup a C-level hit.


@lru_cache(maxsize=1 << 16)
def murmur2_partition(key: bytes, partitions: int) -> int:
    return int(murmur2(key) & 0x7FFFFFFF) % partitions


@lru_cache(maxsize=1 << 16)
def crc32_partition(key: bytes, partitions: int) -> int:
    return zlib.crc32(key) % partitions


@lru_cache(maxsize=1 << 16)
def fnv1a_partition(key: bytes, partitions: int) -> int:
    h = 0x811C9DC5
    for byte in key:
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    if h >= 0x80000000:  # librdkafka takes the absolute value of the signed 32-bit hash
        h = 0x100000000 - h
    return h % partitions


PARTITIONERS: dict[str, Partitioner] = {
    "murmur2": murmur2_partition,
    "consistent_random": crc32_partition,
    "fnv1a": fnv1a_partition,
}
"""The canonical names; ``canonical_partitioner`` also takes librdkafka's other names."""

_ALIASES = {
    "murmur2_random": "murmur2",
    "default": "murmur2",
    "java": "murmur2",
    "consistent": "consistent_random",
    "crc32": "consistent_random",
    "fnv1a_random": "fnv1a",
}


def canonical_partitioner(name: str) -> str:
    """The canonical name of a partitioner (librdkafka's names accepted); ValueError if unknown."""
    canonical = _ALIASES.get(name, name)
    if canonical not in PARTITIONERS:
        known = ", ".join(sorted({*PARTITIONERS, *_ALIASES}))
        raise ValueError(f"unknown partitioner {name!r} (known: {known})")
    return canonical


def partitioner(name: str) -> Partitioner:
    return PARTITIONERS[canonical_partitioner(name)]


class PartitionerDetector:
    """Which known partitioner placed a topic's keyed records, from (key, partition) pairs.

    Every candidate that maps an observed key elsewhere than where it was found is dropped.
    A wrong candidate survives a record by chance with probability 1/n (n partitions), so
    after a few dozen distinct keys one candidate is left: ``name`` then says it. None left
    (explicit partitions, a custom or mixed partitioners): ``unknown`` is true and lookups
    fall back to asking every worker. With one partition every partitioner agrees, and
    ``name`` is ``murmur2``."""

    __slots__ = ("_candidates", "_seen", "done", "name", "unknown")

    # Distinct keys observed before a single remaining candidate is trusted: with n >= 2
    # partitions a wrong candidate survives them all with probability at most 2**-16.
    MIN_KEYS = 16

    def __init__(self) -> None:
        self._candidates = dict(PARTITIONERS)
        self._seen: set[bytes] = set()
        self.done = False
        self.name: str | None = None
        self.unknown = False

    @classmethod
    def declared(cls, name: str) -> PartitionerDetector:
        """A topic whose partitioner is known in advance: nothing to detect."""
        detector = cls()
        detector.name = canonical_partitioner(name)
        detector._candidates = {detector.name: PARTITIONERS[detector.name]}
        detector.done = True
        return detector

    def lookup(self) -> Partitioner | None:
        """The partitioner to find a key's partition with, once known."""
        return PARTITIONERS[self.name] if self.name is not None else None

    def observe(self, key: bytes | None, partition: int, partitions: int) -> None:
        if self.done or key is None:
            return
        if partitions <= 1:
            self.name, self.done = "murmur2", True
            return
        self._candidates = {n: fn for n, fn in self._candidates.items() if fn(key, partitions) == partition}
        self._seen.add(key)
        if not self._candidates:
            self.unknown, self.done = True, True
            self._seen.clear()
        elif len(self._candidates) == 1 and len(self._seen) >= self.MIN_KEYS:
            self.name, self.done = next(iter(self._candidates)), True
            self._seen.clear()

    def possible(self, key: bytes, partition: int, partitions: int) -> bool:
        """Whether some partitioner still in the running puts ``key`` in ``partition``
        (always true once the partitioner is unknown: nothing can be ruled out)."""
        if self.unknown or partitions <= 1:
            return True
        return any(fn(key, partitions) == partition for fn in self._candidates.values())

    def candidates(self) -> list[str]:
        return sorted(self._candidates)
