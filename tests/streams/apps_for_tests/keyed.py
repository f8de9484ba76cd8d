"""The most ordinary app there is: page views keyed by user, counted per user.

Run as ``python -m streamkit worker -A tests.streams.apps_for_tests.keyed:app``; configured
like ``counter.py`` by ``SK_TEST_APP_ID``, ``SK_TEST_INPUT`` and ``SK_TEST_CONFIG``. The
input is written by any Kafka client with its default partitioner (confluent-kafka and kcat
place keys with CRC32, not murmur2); nothing here says which.
"""

from __future__ import annotations

import json
import os

from pydantic import BaseModel

from streamkit import App
from streamkit.streams.agent import AgentStream


class PageView(BaseModel):
    user: str
    page: str


app = App(os.environ["SK_TEST_APP_ID"], config={
    "commit.interval.ms": 200,
    "session.timeout.ms": 3000,
    "heartbeat.interval.ms": 500,
    "linger.ms": 1,
    **json.loads(os.environ.get("SK_TEST_CONFIG", "{}")),
})
views = app.topic(os.environ["SK_TEST_INPUT"], value_type=PageView)
views_per_user = app.Table("views_per_user", default=int)


@app.agent(views)
async def count(stream: AgentStream) -> None:
    async for view in stream:
        views_per_user[view.user] += 1
