"""Event time across partitions, without a broker: the compiled DSL operators driven
directly (``pipeline_driver.Topology``), their repartition records delivered in any order a
broker and several workers could produce, and the final results compared with the batch
computation."""

from __future__ import annotations

import asyncio
import random
from collections import defaultdict
from datetime import timedelta

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import streamkit
from streamkit.streams.app import App
from streamkit.streams.event import Event
from streamkit.streams.processing import LateLog
from streamkit.streams.watermarks import WM_HEADER, InputClock, decode_stamp, encode_stamp
from streamkit.streams.windows import MIN_TIMESTAMP

from .pipeline_driver import LATE_TOPIC, Record, Topology, Worker

T0 = 1_700_000_040_000
SOURCE_PARTITIONS = 3
MERGED_PARTITIONS = 2  # a second source topic ("taps"), merged with the first
PARTITIONS = 2  # num.partitions: the repartition topics and the state
SIZE, GRACE = 1_000, 200


# Source partition -> [(page, timestamp)] in order. Partitions 0..2 are the topic "clicks";
# 3 and 4 are partitions 0 and 1 of "taps" (merged apps only).
Clicks = dict[int, list[tuple[str, int]]]


def click_app(two_hops: bool, merged: bool = False) -> App:
    app = App("clicks", config={"num.partitions": PARTITIONS, "late.records.topic.name": LATE_TOPIC})
    clicks = app.topic("clicks", value_type=dict, partitions=SOURCE_PARTITIONS)
    stream = app.stream(clicks)
    if merged:
        stream = stream.merge(app.stream(app.topic("taps", value_type=dict, partitions=MERGED_PARTITIONS)))
    stream = stream.group_by(lambda v: v["page"], name="by-page")
    if two_hops:
        stream = stream.map(lambda v: {**v, "site": v["page"][:2]}).group_by(lambda v: v["page"], name="again")
    (stream.window(streamkit.tumbling(ms=SIZE), grace=timedelta(milliseconds=GRACE))
        .count(name="per-window").final().to("counts"))
    return app


def source_partition(p: int) -> tuple[str, int]:
    return ("clicks", p) if p < SOURCE_PARTITIONS else ("taps", p - SOURCE_PARTITIONS)


def produce_clicks(worker: Worker, clicks: Clicks) -> None:
    for p, records in clicks.items():
        topic, partition = source_partition(p)
        log = worker.produced[(topic, partition)]
        for page, ts in records:
            log.append(Record(topic, partition, len(log), ts, f"user{len(log) % 5}".encode(),
                              orjson.dumps({"page": page}), ()))


def batch_reference(clicks: Clicks) -> tuple[dict[tuple[str, int], int], list[tuple[str, int]]]:
    """Final counts and dropped records computed from all records at once: a record is late
    when its window closed by its own partition's largest timestamp so far (itself
    included); a window is final once every partition's largest timestamp closed it."""
    counts: dict[tuple[str, int], int] = defaultdict(int)
    late: list[tuple[str, int]] = []
    finals = []
    for records in clicks.values():
        high = MIN_TIMESTAMP
        for page, ts in records:
            high = max(high, ts)
            start = ts - ts % SIZE
            if start + SIZE + GRACE <= high:
                late.append((page, ts))
            else:
                counts[(page, start)] += 1
        finals.append(high)
    stream_time = min(finals)
    return {k: n for k, n in counts.items() if k[1] + SIZE + GRACE <= stream_time}, sorted(late)


pages = st.sampled_from(["/a", "/b", "/c", "/d", "/e"])


@st.composite
def partition_clicks(draw: st.DrawFn) -> list[tuple[str, int]]:
    """Mostly ascending timestamps with steps back, some beyond grace (late)."""
    ts = T0 + draw(st.integers(0, 3_000))
    out = []
    for _ in range(draw(st.integers(1, 25))):
        if draw(st.booleans()):
            ts += draw(st.integers(0, 700))
            out.append((draw(pages), ts))
        else:
            out.append((draw(pages), ts - draw(st.integers(0, 2_000))))
    return out


@settings(max_examples=60, deadline=None)
@given(clicks=st.fixed_dictionaries({p: partition_clicks() for p in range(SOURCE_PARTITIONS + MERGED_PARTITIONS)}),
       seed=st.integers(0, 2**32), max_batch=st.integers(1, 30), two_hops=st.booleans(), merged=st.booleans())
def test_any_interleaving_gives_the_batch_reference(clicks: Clicks, seed: int, max_batch: int,
                                                    two_hops: bool, merged: bool) -> None:
    """However the partitions' records (and the repartition topics' records) interleave,
    the final counts are the batch reference, and exactly the records late with respect to
    their own partition are dropped (and sent to the late topic). With ``merged``, a second
    topic is merged in before the ``group_by``: its partitions count like the first's."""
    if not merged:
        clicks = {p: records for p, records in clicks.items() if p < SOURCE_PARTITIONS}
    topology = Topology(click_app(two_hops, merged))
    produce_clicks(topology.worker, clicks)
    asyncio.run(topology.run(random.Random(seed), max_batch))
    expected, late = batch_reference(clicks)
    assert topology.results() == expected
    assert topology.late() == late
    assert topology.worker.metrics.late_records == len(late)


def test_a_far_future_record_closes_nothing_until_the_others_catch_up() -> None:
    """One partition an hour ahead: the windows of the others stay open, then all close."""
    topology = Topology(click_app(False))
    worker = topology.worker
    produce_clicks(worker, {0: [("/a", T0), ("/a", T0 + 3_600_000)]})

    async def go() -> None:
        await topology.run(random.Random(1), 5)
        assert topology.results() == {}
        produce_clicks(worker, {1: [("/a", T0 + 10)], 2: [("/a", T0 + 20)]})
        await topology.run(random.Random(2), 5)
        assert topology.results() == {}  # partitions 1 and 2 are at T0 + 20
        produce_clicks(worker, {1: [("/a", T0 + 3_600_000)], 2: [("/a", T0 + 3_600_000)]})
        await topology.run(random.Random(3), 5)

    asyncio.run(go())
    assert topology.results() == {("/a", T0): 3}
    assert topology.late() == []


def test_restart_mid_backlog_changes_nothing() -> None:
    """Processing stops half way and commits; a new worker (fresh clocks, the same committed
    stores: what a restart restores) continues from there and the result is the batch
    reference."""
    rng = random.Random(7)
    clicks = {p: sorted((rng.choice("abc"), T0 + rng.randrange(8_000)) for _ in range(40))
              for p in range(SOURCE_PARTITIONS)}
    clicks = {p: [(f"/{page}", ts) for page, ts in sorted(recs, key=lambda r: r[1])] for p, recs in clicks.items()}
    app = click_app(True)
    first = Topology(app)
    produce_clicks(first.worker, clicks)

    async def go() -> None:
        for _ in range(40):
            if pending := first.pending():
                await first.step(rng.choice(pending), rng.randint(1, 10))
        # Restart: the committed stores, newly compiled operators with fresh clocks.
        first.commit()
        second = Topology(app, first.worker)
        second.read = first.read
        await second.run(rng, 10)

    asyncio.run(go())
    expected, late = batch_reference(clicks)
    assert late == []
    assert first.results() == expected


def test_empty_source_partition_is_left_out_once_it_says_it_is_idle() -> None:
    topology = Topology(click_app(False))
    produce_clicks(topology.worker, {0: [("/a", T0), ("/a", T0 + 5_000)], 1: [("/b", T0), ("/b", T0 + 5_000)]})

    async def go() -> None:
        await topology.run(random.Random(1), 5)
        assert topology.results() == {}  # partition 2 holds stream time back
        source = topology.sources["clicks"]
        source.ctx.topic, source.ctx.partition = "clicks", 2
        source.mark_idle(2)
        await source.flush()
        await topology.run(random.Random(1), 5)

    asyncio.run(go())
    assert topology.results() == {("/a", T0): 1, ("/b", T0): 1}


def test_a_woken_partition_holds_stream_time_again() -> None:
    """A partition announced idle that gets data says so (``wake``) before anything else of
    its batch goes downstream: stream time waits for it again, and none of its records is
    late, though the other partitions' records reached the repartition topic first."""
    topology = Topology(click_app(False))
    source = topology.sources["clicks"]

    async def go() -> None:
        source.ctx.topic, source.ctx.partition = "clicks", 2
        source.mark_idle(2)
        await source.flush()
        await source.wake(2, [0])
        produce_clicks(topology.worker, {0: [("/a", T0), ("/a", T0 + 5_000)], 1: [("/b", T0), ("/b", T0 + 5_000)]})
        await topology.run(random.Random(1), 5)
        assert topology.results() == {}  # partition 2 holds stream time back again
        produce_clicks(topology.worker, {2: [("/c", T0), ("/c", T0 + 5_000)]})
        await topology.run(random.Random(1), 5)

    asyncio.run(go())
    assert topology.late() == []
    assert topology.results() == {("/a", T0): 1, ("/b", T0): 1, ("/c", T0): 1}


def test_late_log_lines_add_up_to_the_metric(caplog: pytest.LogCaptureFixture) -> None:
    """The first late record of an operator is logged at once; the rest of the interval's
    in one line once it has passed (``flush``), however few come after. Each line names the
    watermark that closed the record's windows."""
    wall = [0]
    late_log = LateLog(lambda: wall[0], interval_ms=10_000)
    for i in range(30):
        late_log.note("page-counts", Event("/home", None, T0 + i, [], "clicks", 0, i), T0 + 70_000)
    late_log.flush()
    wall[0] = 9_999
    late_log.flush()
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1
    wall[0] = 10_000
    late_log.flush()
    late_log.flush(force=True)
    lines = [r.getMessage() for r in caplog.records]
    assert [int(line.split("dropped ")[1].split()[0]) for line in lines] == [1, 29]
    assert lines[0] == (f"page-counts: dropped 1 late record(s) (last: key '/home', timestamp {T0}, 70000 ms behind "
                        f"the watermark {T0 + 70_000} that closed its windows; raise grace to keep such records)")


def test_stamps_round_trip_and_cost_few_bytes() -> None:
    for kind, p, wm, own in [(0, 2, T0, T0), (0, 1, T0, T0 + 5), (1, 0, T0, T0), (3, 7, MIN_TIMESTAMP, MIN_TIMESTAMP)]:
        stamp = decode_stamp(encode_stamp(kind, p, wm, own))
        assert (stamp.partition, stamp.watermark, stamp.own) == (p, wm, own)
    assert len(encode_stamp(0, 1, T0, T0)) + len(WM_HEADER) == 27


def test_input_clock_is_the_minimum_and_never_goes_back() -> None:
    clock = InputClock(3, 0)
    clock.observe(0, 500, 0)
    clock.observe(1, 100, 0)
    assert clock.value(0) == MIN_TIMESTAMP  # partition 2 not heard of
    clock.observe(2, 300, 0)
    assert clock.value(0) == 100
    clock.observe(1, 50, 0)  # watermarks never go back
    assert clock.value(0) == 100
    clock.observe(1, 1_000, 0)
    assert clock.value(0) == 300 and clock.lag(0) == 700
    # window.idle.close.ms: partition 2 silent for 1 s drops out; the minimum of the others.
    clock.observe(0, 2_000, 900)
    clock.observe(1, 2_000, 900)
    assert clock.value(999, 1_000) == 300
    assert clock.value(1_000, 1_000) == 2_000


def test_merged_inputs_each_hold_stream_time_back() -> None:
    """``merge`` before ``group_by``: the repartitioned records carry the watermark of their
    own source partition, and downstream stream time is the minimum over every partition of
    both topics. One topic drained first (an hour ahead at the end) closes nothing of the
    other's windows; the result is the batch reference."""
    clicks: Clicks = {
        0: [("/a", T0), ("/a", T0 + 3_600_000)],
        1: [("/a", T0 + 10), ("/b", T0 + 3_600_000)],
        2: [("/b", T0 + 20), ("/b", T0 + 3_600_000)],
        3: [("/a", T0 + 30), ("/b", T0 + 1_500), ("/a", T0 + 3_600_000)],
        4: [("/b", T0 + 40), ("/b", T0 + 3_600_000)],
    }
    topology = Topology(click_app(False, merged=True))
    produce_clicks(topology.worker, clicks)

    async def go() -> None:
        # Every partition of "clicks" first, then "taps", as a worker draining a backlog may;
        # the repartition topic one record at a time (windows close after each batch).
        for topic in ("clicks", "taps"):
            for tp in sorted(tp for tp in topology.pending() if tp[0] == topic):
                await topology.step(tp, 100)
        await topology.run(random.Random(1), 1)

    asyncio.run(go())
    expected, late = batch_reference(clicks)
    assert late == []
    assert expected == {("/a", T0): 3, ("/b", T0): 2, ("/b", T0 + 1_000): 1}
    assert topology.results() == expected
    assert topology.worker.metrics.late_records == 0


def extracted_app() -> App:
    """Counts per page in windows by the value's ``at`` (``.window(..., timestamp=fn)``)
    after a ``group_by``; the record timestamps say nothing about it."""
    app = App("clicks", config={"num.partitions": PARTITIONS, "late.records.topic.name": LATE_TOPIC})
    clicks = app.topic("clicks", value_type=dict, partitions=SOURCE_PARTITIONS)
    (app.stream(clicks).group_by(lambda v: v["page"], name="by-page")
        .window(streamkit.tumbling(ms=SIZE), grace=timedelta(milliseconds=GRACE), timestamp=lambda e: e.value["at"])
        .count(name="per-window").final().to("counts"))
    return app


def produce_with_times(worker: Worker, clicks: Clicks, record_time: int) -> None:
    """``clicks`` with their times in the value; every record timestamp ``record_time``."""
    for p, records in clicks.items():
        log = worker.produced[("clicks", p)]
        for page, ts in records:
            log.append(Record("clicks", p, len(log), record_time, f"user{len(log) % 5}".encode(),
                              orjson.dumps({"page": page, "at": ts}), ()))


def test_a_window_timestamp_extractor_keeps_a_watermark_per_upstream_partition() -> None:
    """A window with its own timestamps, after a repartition: its stream time is the minimum
    over the upstream partitions of the largest extracted timestamp each has sent, not the
    largest seen. A backlog drained one source partition after the other (the first an hour
    ahead at its end) drops nothing and gives the batch reference; the record timestamps
    (all equal, far in the future) close nothing."""
    clicks: Clicks = {
        p: [(page, T0 + 100 * i + 10 * p) for i, page in enumerate(["/a", "/b", "/a", "/b"] * 3)]
        + [("/a", T0 + 3_600_000), ("/b", T0 + 3_600_000)]
        for p in range(SOURCE_PARTITIONS)
    }
    topology = Topology(extracted_app())
    produce_with_times(topology.worker, clicks, record_time=T0 + 86_400_000)

    async def go() -> None:
        for p in range(SOURCE_PARTITIONS):
            await topology.step(("clicks", p), 100)
        await topology.run(random.Random(1), 1)

    asyncio.run(go())
    expected, late = batch_reference(clicks)
    assert late == [] and len(expected) == 4
    assert topology.results() == expected
    assert topology.worker.metrics.late_records == 0


def test_a_window_timestamp_extractor_drops_only_what_is_late_in_its_own_partition() -> None:
    """Lateness by extracted time is judged against the largest extracted timestamp that the
    record's own upstream partition sent to the operator's partition (there is no other
    carrier of extracted time): here the same page's record before it."""
    clicks: Clicks = {
        0: [("/a", T0), ("/b", T0 + 60), ("/a", T0 + 5_000), ("/a", T0 + 100), ("/b", T0 + 4_900), ("/a", T0 + 3_600_000),
            ("/b", T0 + 3_600_000)],
        1: [("/a", T0 + 50), ("/b", T0 + 60), ("/a", T0 + 3_600_000), ("/b", T0 + 3_600_000)],
        2: [("/b", T0 + 70), ("/a", T0 + 80), ("/a", T0 + 3_600_000), ("/b", T0 + 3_600_000)],
    }
    topology = Topology(extracted_app())
    produce_with_times(topology.worker, clicks, record_time=0)
    asyncio.run(topology.run(random.Random(2), 2))
    expected, late = batch_reference(clicks)
    assert late == [("/a", T0 + 100)]
    assert topology.results() == expected
    assert topology.late() == late
