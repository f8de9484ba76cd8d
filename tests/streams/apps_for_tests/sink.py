"""An app that forwards every record of ``SK_TEST_INPUT`` to ``SK_TEST_SINK`` with
``agent.cast`` semantics (``send_soon``): the delivery-failure test (``test_delivery.py``)
gives the sink a small ``max.message.bytes``, so forwarding a large record fails."""

from __future__ import annotations

import os

from streamkit import App
from streamkit.streams.agent import AgentStream

app = App(os.environ["SK_TEST_APP_ID"], config={"commit.interval.ms": 100, "linger.ms": 1,
                                                "session.timeout.ms": 3000, "heartbeat.interval.ms": 500})
source = app.topic(os.environ["SK_TEST_INPUT"], value_type=bytes)
sink = app.topic(os.environ["SK_TEST_SINK"], value_type=bytes)


@app.agent(source)
async def forward(stream: AgentStream) -> None:
    async for event in stream.events():
        sink.send_soon(event.value, key=event.key)
