"""A property of the DSL, tested through AppTestDriver with streamkit.testing.strategies:
final window counts equal the batch computation of the same records when no record is later
than the grace period (DESIGN: "final results equal the batch computation")."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

import streamkit
from streamkit.testing import AppTestDriver
from streamkit.testing.strategies import timestamped_records

MINUTE = 60_000
GRACE_MS = 20_000


def counts_app() -> streamkit.App:
    app = streamkit.App("prop-counts", config={"num.partitions": 1})
    numbers = app.topic("numbers", value_type=int, partitions=1)
    (app.stream(numbers)
        .window(streamkit.tumbling(minutes=1), grace=timedelta(milliseconds=GRACE_MS))
        .count(name="counts")
        .final()
        .to("counts"))
    return app


APP = counts_app()


@settings(max_examples=60, deadline=None)
@given(timestamped_records(st.integers(0, 9), keys=st.sampled_from(["a", "b", "c"]), max_disorder_ms=GRACE_MS,
                           min_size=1, max_size=40))
def test_final_window_counts_equal_the_batch_computation(records: list[dict[str, object]]) -> None:
    with AppTestDriver(APP) as driver:
        driver.input("numbers").send_many(records)
        last = max(int(str(r["timestamp"])) for r in records)
        driver.input("numbers").send(0, key="end", timestamp=last + 2 * MINUTE + GRACE_MS)  # closes them all
        finals = {(r.value["key"], r.value["start"]): r.value["value"] for r in driver.output("counts").read_all()}
        assert driver.late("counts") == []
    expected = Counter((r["key"], int(str(r["timestamp"])) // MINUTE * MINUTE) for r in records)
    assert finals == dict(expected)


@given(timestamped_records(st.none(), partitions=3, max_gap_ms=10, max_disorder_ms=5, max_size=20))
def test_records_stay_within_their_bounds(records: list[dict[str, object]]) -> None:
    latest = 0
    for r in records:
        ts, partition = int(str(r["timestamp"])), int(str(r["partition"]))
        assert 0 <= partition < 3 and "key" not in r
        latest = max(latest, ts)
        assert latest - ts <= 5
