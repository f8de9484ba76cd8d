"""queued.max.request.bytes in a real broker process: many connections each sending a large
partial request cannot grow the broker's memory past the budget (plus one request)."""

from __future__ import annotations

import asyncio
import struct
from pathlib import Path

import pytest

from streamkit.testing import BrokerProcess
from tests.integration.util import host_port, rss_kb

pytestmark = pytest.mark.integration

MIB = 1 << 20
CONNECTIONS = 8
PARTIAL = 24 * MIB


async def _flood(bootstrap: str) -> list[asyncio.StreamWriter]:
    host, port = host_port(bootstrap)
    body = bytes(PARTIAL)

    async def one() -> asyncio.StreamWriter:
        _reader, writer = await asyncio.open_connection(host, port)
        writer.write(struct.pack(">i", 90 * MIB))  # a valid length prefix; the frame never completes
        for start in range(0, PARTIAL, MIB):
            writer.write(body[start : start + MIB])
            try:
                await asyncio.wait_for(writer.drain(), 1.0)
            except TimeoutError:
                break  # the broker stopped reading this connection
        return writer

    return list(await asyncio.gather(*(one() for _ in range(CONNECTIONS))))


@pytest.mark.parametrize(("budget", "bound_mib"), [(8 * MIB, 80), (-1, None)], ids=["capped", "unbounded"])
def test_broker_memory_stays_bounded_under_partial_frames(tmp_path: Path, budget: int, bound_mib: int | None) -> None:
    broker = BrokerProcess(tmp_path / "data", settings={"queued.max.request.bytes": budget}).start()
    try:
        assert broker.process is not None
        pid = broker.process.pid

        async def main() -> int:
            before = rss_kb(pid)
            writers = await _flood(broker.bootstrap)
            await asyncio.sleep(0.5)
            grown = (rss_kb(pid) - before) // 1024
            for w in writers:
                w.close()
            return grown

        grown_mib = asyncio.run(main())
        attempted = CONNECTIONS * PARTIAL // MIB
        if bound_mib is None:
            # Kafka's default (-1): the broker reads it all; this is what the budget prevents.
            assert grown_mib >= attempted * 3 // 4, grown_mib
        else:
            # budget (8) + one request's overdraft (24) + per-connection transport buffers
            assert grown_mib < bound_mib < attempted, grown_mib
            assert "queued.max.request.bytes (8388608) reached" in broker.log_file.read_text()
    finally:
        assert broker.stop() == 0
