"""streamkit for Dask: topics and tables as dask DataFrames, over the Kafka protocol.

::

    import streamkit.dask
    views = streamkit.dask.read_topic("localhost:9092", "page_views", model=PageView)
    views.groupby("page").size().compute()

Each dask partition reads one topic-partition's offset range (planned once, when the
DataFrame is made), so the result does not change while it is computed.
"""

from streamkit.dask.reader import read_table, read_topic

__all__ = ["read_table", "read_topic"]
