"""RecordCollector's ordering: sends from synchronous code (``send_soon``, ``cast``, table
and late-record writes) reach the producer in the order they were made."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from streamkit.streams.collector import RecordCollector
from streamkit.streams.settings import AppSettings


class _SlowFirstProducer:
    """aiokafka's ``send`` may suspend (waiting for the topic's metadata, or for buffer
    space) and resume after later calls that did not have to: the first call here waits
    until released, the others do not."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.appended: list[bytes | None] = []
        self.calls = 0

    async def send(self, topic: str, value: bytes | None, **kwargs: Any) -> asyncio.Future[Any]:
        self.calls += 1
        if self.calls == 1:
            await self.release.wait()
        self.appended.append(value)
        done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done

    async def flush(self) -> None:
        return None


async def test_sends_from_synchronous_code_keep_their_order(tmp_path: Path) -> None:
    collector = RecordCollector("unused:9092", AppSettings.build({"application.id": "t"}), state_dir=tmp_path)
    producer = _SlowFirstProducer()
    collector._producer = producer
    collector.produce("out", b"k", b"1")
    for _ in range(5):
        await asyncio.sleep(0)  # the first send is suspended in the producer
    collector.produce("out", b"k", b"2")
    collector.produce("out", b"k", b"3")
    for _ in range(5):
        await asyncio.sleep(0)
    producer.release.set()
    await collector.check_deliveries()
    assert producer.appended == [b"1", b"2", b"3"]
