"""Page views per page and minute, by event time.

Input: ``page_views``, JSON ``{"user": ..., "page": ...}`` (any key); the record timestamp
is the time of the view.

* A DSL pipeline drops health checks, groups the views by page and counts them in tumbling
  1-minute windows with a 10 s grace period. ``.final()`` emits one result per window, once
  it can no longer change, to ``page_counts``: key the page, value
  ``{"key": page, "start": ms, "end": ms, "value": count}``. A partition's windows close when
  a later view on that partition moves its stream time past ``end + grace``; views for a
  window that already closed are late and dropped (counted in ``/metrics``). The windows
  still stored are queryable too: ``GET /tables/page_counts/{page}`` (closed ones leave the
  store at once here; ``.window(..., expires=...)`` would keep them that long).
* An agent keeps the same count in the windowed table ``views_per_page`` (hopping windows
  of 1 minute every 30 s, kept for an hour), queryable while windows are still open:
  ``GET /tables/views_per_page/{page}`` returns ``[{"start", "end", "value"}, ...]``.
  Tables never close windows: a late view still counts until its windows expire.

Run it::

    streamkit worker -A apps.pageviews --web-port 8080             # embedded broker
    streamkit worker -A apps.pageviews --broker 127.0.0.1:9092
    curl localhost:8080/tables/views_per_page/%2Fhome
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel

import streamkit
from streamkit.streams.agent import AgentStream


class PageView(BaseModel):
    user: str
    page: str


HEALTH_CHECK = "/health"

app = streamkit.App("pageviews")
views = app.topic("page_views", value_type=PageView)
per_page = app.Table("views_per_page", default=int).hopping(60, 30, expires=3600)

(app.stream(views)
    .filter(lambda view: view.page != HEALTH_CHECK)
    .group_by(lambda view: view.page, name="by_page")
    .window(streamkit.tumbling(minutes=1), grace=timedelta(seconds=10))
    .count(name="page_counts")
    .final()
    .to("page_counts"))


@app.agent(views)
async def count_views(stream: AgentStream) -> None:
    # group_by re-keys through the topic pageviews-views_per_page-repartition, so every view
    # of a page reaches the worker that owns the page's table partition.
    async for view in stream.filter(lambda v: v.page != HEALTH_CHECK).group_by(
            lambda v: v.page, name="views_per_page"):
        per_page[view.page] += 1  # the windows holding this view's timestamp
