"""Hypothesis strategies for kio's types, for the property tests of the wire codecs.

kio registers strategies for its phantom types, with two gaps filled here:
- ``Records`` (opaque record batches) has none;
- ``i64Timedelta``'s goes up to ``timedelta.max``, but kio's native reader goes through
  microseconds in a signed 64-bit integer and floats, and fails on some values past 2**53
  milliseconds ("timedelta milliseconds overflow"; about 104 million days). No Kafka
  duration comes near that, so the strategy keeps to 2**52 milliseconds either way, and
  like kio's own it leaves out the durations that float-based timedelta cannot carry
  through milliseconds exactly.
"""

from __future__ import annotations

import datetime

from hypothesis import strategies as st
from kio.static.primitive import Records, _timedelta_survives_roundtrip, i64Timedelta

__all__ = ["register"]

_LIMIT_MS = 2**52


def _i64_timedeltas() -> st.SearchStrategy[i64Timedelta]:
    deltas = st.integers(-_LIMIT_MS, _LIMIT_MS).map(lambda ms: datetime.timedelta(milliseconds=ms))
    return deltas.filter(_timedelta_survives_roundtrip).map(i64Timedelta.parse)


def register() -> None:
    st.register_type_strategy(Records, st.binary(max_size=64))
    st.register_type_strategy(i64Timedelta, _i64_timedeltas())
