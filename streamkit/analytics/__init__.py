"""The core that the Spark data source and the Dask readers share.

Planning (which topic-partitions, which offset ranges, split how), reading a range into
Arrow record batches, producing rows, and decoding a table's changelog all live here, free
of Spark and Dask, so both integrations read exactly the same records the same way. Every
byte moves over the Kafka protocol through confluent-kafka (librdkafka), so it works
against Apache Kafka and Redpanda as well as the streamkit broker.
"""

from streamkit.analytics.fetch import read_range
from streamkit.analytics.options import OffsetSpec, ReadOptions, parse_offsets, read_options
from streamkit.analytics.planning import OffsetRange, plan_ranges, resolve_offsets, split_ranges
from streamkit.analytics.schema import RECORD_FIELDS, model_arrow_schema, record_arrow_schema

__all__ = [
    "RECORD_FIELDS",
    "OffsetRange",
    "OffsetSpec",
    "ReadOptions",
    "model_arrow_schema",
    "parse_offsets",
    "plan_ranges",
    "read_options",
    "read_range",
    "record_arrow_schema",
    "resolve_offsets",
    "split_ranges",
]
