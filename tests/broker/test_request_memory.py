"""queued.max.request.bytes: one budget for the request bytes all connections hold; the
broker stops reading when it is spent (back-pressure) instead of allocating."""

from __future__ import annotations

import asyncio
import struct
from pathlib import Path

import pytest

from streamkit.broker.memory import RequestMemory
from streamkit.testing import embedded_broker

MIB = 1 << 20


def test_reads_never_take_more_than_what_is_left() -> None:
    memory = RequestMemory(capacity=10, read_size=4)
    a, b = object(), object()
    assert memory.try_reserve(a) == 4
    assert memory.try_reserve(b) == 4
    assert memory.try_reserve(a) == 2  # only 2 left
    assert memory.used == 10
    assert memory.try_reserve(object()) == 0  # a connection holding nothing waits


def test_actual_holdings_replace_reservations() -> None:
    memory = RequestMemory(capacity=10, read_size=8)
    a = object()
    assert memory.try_reserve(a) == 8
    memory.hold(a, 3)  # the read returned 3 bytes
    assert memory.used == 3 and memory.charge_of(a) == 3
    memory.hold(a, 0, completed=True)
    assert memory.used == 0
    memory.release(a)
    assert memory.used == 0 and memory.charge_of(a) == 0


def test_one_partial_frame_may_overdraw_so_the_group_cannot_deadlock() -> None:
    memory = RequestMemory(capacity=10, read_size=4)
    a, b = object(), object()
    memory.try_reserve(a)
    memory.hold(a, 5)
    memory.try_reserve(b)
    memory.hold(b, 5)
    # Spent, both hold partial frames: exactly one of them may go on
    assert memory.try_reserve(a) == 4
    assert memory.try_reserve(b) == 0
    assert memory.try_reserve(a) == 4  # still a's until it completes a request
    memory.hold(a, 0, completed=True)  # a's request answered: the overdraft ends
    assert memory.used == 5
    assert memory.try_reserve(b) == 4


def test_unbounded() -> None:
    memory = RequestMemory(capacity=-1, read_size=4)
    owner = object()
    for _ in range(100):
        assert memory.try_reserve(owner) == 4
    assert memory.used == 400


def test_a_waiting_reader_wakes_when_memory_frees() -> None:
    async def main() -> None:
        memory = RequestMemory(capacity=4, read_size=4)
        a, b = object(), object()
        assert await memory.reserve(a) == 4
        waiting = asyncio.create_task(memory.reserve(b))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        memory.hold(a, 1, completed=True)
        assert await asyncio.wait_for(waiting, 1) == 3
        memory.release(a)
        assert memory.used == 3

    asyncio.run(main())


async def _send_partial(port: int, frame_size: int, body: bytes, deadline_s: float) -> tuple[asyncio.StreamWriter, int]:
    """Open a connection, announce a frame of ``frame_size`` bytes and push ``body`` of it
    until the broker stops taking bytes; returns the writer and the bytes sent."""
    _reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(struct.pack(">i", frame_size))
    sent = 0
    chunk = 256 * 1024
    try:
        while sent < len(body):
            writer.write(body[sent : sent + chunk])
            await asyncio.wait_for(writer.drain(), deadline_s)
            sent += chunk
    except TimeoutError:
        pass  # the broker stopped reading: back-pressure
    return writer, sent


@pytest.mark.parametrize("capacity_mib", [4, -1], ids=["capped", "unbounded"])
def test_partial_frames_from_many_connections_stay_within_the_budget(tmp_path: Path, capacity_mib: int) -> None:
    capacity = capacity_mib * MIB if capacity_mib > 0 else -1
    connections, partial = 6, 8 * MIB

    async def main() -> None:
        settings = {"queued.max.request.bytes": capacity, "socket.request.max.bytes": 64 * MIB}
        async with embedded_broker(tmp_path, settings) as broker:
            body = bytes(partial)
            results = await asyncio.gather(*(_send_partial(broker.port, 32 * MIB, body, 1.0)
                                             for _ in range(connections)))
            await asyncio.sleep(0.2)
            held = broker.memory.used
            if capacity < 0:
                # Unbounded (Kafka's default): the broker took every byte it was sent.
                assert held >= connections * partial
            else:
                # At most the budget plus one request's overdraft (+ the read in flight).
                assert held <= capacity + partial + MIB, held
                assert sum(sent for _, sent in results) > held  # the rest waits in the clients' sockets
                # A new client is not read from while the budget is spent...
                reader, writer = await asyncio.open_connection("127.0.0.1", broker.port)
                writer.write(_api_versions_frame())
                await writer.drain()
                with pytest.raises(TimeoutError):
                    await asyncio.wait_for(reader.readexactly(4), 0.5)
                # ...and is answered as soon as the memory frees.
                for hog, _ in results:
                    hog.close()
                (size,) = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 10))
                assert size > 0
                writer.close()
            for hog, _ in results:
                hog.close()
            await asyncio.sleep(0.2)
            assert broker.memory.used == 0

    asyncio.run(main())


def _api_versions_frame() -> bytes:
    # ApiVersions v0, request header v1: api key 18, version 0, correlation id 7, client "t"
    data = struct.pack(">hhih", 18, 0, 7, 1) + b"t"
    return struct.pack(">i", len(data)) + data
