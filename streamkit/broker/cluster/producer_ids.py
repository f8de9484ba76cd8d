"""Producer ids of a cluster member: blocks of 1000 taken in ZooKeeper, as Kafka's ZooKeeper
mode does (``ZkProducerIdManager``).

``/latest_producer_id_block`` holds the last block any broker took; a broker takes the next
one with a compare-and-set on the znode's version, and retries when another broker took one
in between. No two brokers ever hand out the same id, and an id is never handed out twice
across restarts: a restarted broker takes a new block (the rest of its old one is skipped).

A block is taken at start; the next one is fetched in the background when the current one
runs low. Should it run out first, ``next_id`` raises ``ProducerIdsUnavailable`` and the
client retries.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from streamkit.broker.cluster.zk import ZkClient, with_retries
from streamkit.broker.cluster.zkdata import PRODUCER_ID_BLOCK, ProducerIdBlock
from streamkit.broker.producers import ProducerIdsUnavailable

__all__ = ["BLOCK_SIZE", "ZkProducerIds"]

log = logging.getLogger(__name__)

BLOCK_SIZE = 1000  # Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE
_LAST_ID = 2**63 - 1


class ZkProducerIds:
    """See the module docstring."""

    def __init__(self, broker_id: int, block_size: int = BLOCK_SIZE) -> None:
        self.broker_id = broker_id
        self.block_size = block_size
        self.zk: ZkClient | None = None
        self._block: ProducerIdBlock | None = None
        self._next = 0
        self._spare: ProducerIdBlock | None = None
        self._fetching: asyncio.Task[None] | None = None
        self._stopping = False

    async def start(self, zk: ZkClient) -> None:
        """Take the first block (waiting for ZooKeeper as long as it takes)."""
        self.zk = zk
        block = await with_retries("taking a producer id block", self.take, stopping=lambda: self._stopping)
        if block is not None:
            self._use(block)

    async def stop(self) -> None:
        self._stopping = True
        if self._fetching is not None:
            self._fetching.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._fetching

    def _use(self, block: ProducerIdBlock) -> None:
        self._block, self._next = block, block.start
        log.info("producer ids %d to %d are this broker's (%s)", block.start, block.end, PRODUCER_ID_BLOCK)

    def next_id(self) -> int:
        if self._block is None or self._next > self._block.end:
            if self._spare is None:
                self._prefetch()
                raise ProducerIdsUnavailable("waiting for the next block of producer ids from ZooKeeper")
            self._use(self._spare)
            self._spare = None
        assert self._block is not None
        pid = self._next
        self._next += 1
        if self._spare is None and self._block.end - pid < self.block_size // 10:
            self._prefetch()
        return pid

    def _prefetch(self) -> None:
        if self.zk is None or self._stopping or (self._fetching is not None and not self._fetching.done()):
            return
        self._fetching = asyncio.create_task(self._fetch(), name="producer-id-block")

    async def _fetch(self) -> None:
        block = await with_retries("taking a producer id block", self.take, stopping=lambda: self._stopping)
        if block is not None:
            self._spare = block

    async def take(self) -> ProducerIdBlock:
        """The next block, taken by compare-and-set (created at 0 by the first broker)."""
        zk = self.zk
        assert zk is not None, "start() first"
        while True:
            got = await zk.get(PRODUCER_ID_BLOCK)
            if got is None:
                block = ProducerIdBlock(self.broker_id, 0, self.block_size - 1)
                if await zk.create(PRODUCER_ID_BLOCK, block.to_bytes()):
                    return block
                continue  # another broker created it first
            data, version = got
            start = ProducerIdBlock.from_bytes(data).end + 1 if data else 0
            if start + self.block_size - 1 > _LAST_ID:
                raise RuntimeError("every producer id has been handed out")
            block = ProducerIdBlock(self.broker_id, start, start + self.block_size - 1)
            if await zk.compare_and_set(PRODUCER_ID_BLOCK, block.to_bytes(), version):
                return block
