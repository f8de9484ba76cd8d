"""Stream processing: streamkit against faust-streaming and quixstreams, on one streamkit broker.

The workload, the same in every framework and all against the SAME streamkit broker (a
``streamkit broker`` child process, data in a temp dir) in the same run:

- Input: ``--events`` JSON values ``{"key": "k123", "ts": <ms>, "value": 1}`` (orjson),
  ``--keys`` distinct keys drawn uniformly (seeded), record key = the ``key`` field, record
  timestamp = ``ts``. Timestamps rise evenly over ``--span-minutes`` (10) of *recent* time
  (minute-aligned, ending a minute before the run: see faust below), so every partition's
  records are in event-time order and no framework drops a late record. One topic with
  ``--partitions`` (4, streamkit's default ``num.partitions``) partitions, produced with the
  Java client's murmur2 partitioner (librdkafka ``murmur2_random``), which is the partition
  function of streamkit's tables: input partition p holds exactly the keys of state
  partition p, so nobody needs a repartition (no ``group_by`` anywhere).
- Processing: a tumbling 1-minute COUNT per key, RocksDB state with a changelog topic,
  at-least-once, one worker process, commit interval ``--commit-ms`` (1000) everywhere:
  1. streamkit DSL: ``app.stream(t).window(tumbling(minutes=1)).count(name="counts")
     .final().to(out)``: one result per closed window (stream time per partition, no grace).
  2. streamkit agent: ``counts = app.Table("counts", default=int).tumbling(60, expires=60)``
     and ``async for v in stream: counts[v["key"]] += 1``. (No output records: streamkit's
     windowed Table has no window-close hook.) ``--modes agent-take``: the same a batch at a
     time, ``async for batch in stream.take(1000, within=0.1): for v in batch: ...``.
  3. faust-streaming: the agent + ``app.Table(..., default=int).tumbling(60, expires=1h)``,
     ``store="rocksdb://"`` (rocksdict). faust-streaming expires windows and calls
     ``on_window_close`` by the *wall clock*, not by event time, so it cannot emit final
     results by event time; a long ``expires`` keeps the recent data's windows from being
     dropped (and their counts reset) mid-run, and it produces no output records.
  4. quixstreams: ``sdf.tumbling_window(60_000).count().final(closing_strategy="partition")``
     ``.to_topic(out)``: the same semantics as (1).
  The apps are ``benchmarks/_streams_peers/{streamkit,faust,quix}_app.py``. Each runs as its
  own child process (streamkit as ``python -m streamkit worker -A streamkit_app:app -b ...``;
  faust and quix in their own virtualenvs ``benchmarks/.venv-faust`` /
  ``benchmarks/.venv-quix``, created and installed on first use with ``pip install
  faust-streaming rocksdict`` / ``pip install quixstreams`` since both conflict with
  streamkit's pins).

events/s, measured identically for all four, from outside: this process polls the
framework's consumer group's committed offsets on the input topic (OffsetFetch, every 50
ms, through a confluent-kafka consumer that never joins the group). With ``t0`` the first
poll that sees any committed offset (``c0`` committed events then, i.e. about one commit
interval after the first record was consumed) and ``t1`` the first poll at which every
input offset is committed:

    events/s = (N - c0) / (t1 - t0)

the rate of fully processed-and-committed events, excluding process start, group join and
topic creation, and including the periodic commits (changelog writes, state flushes) and
output records as each framework does them. Also shown: time from launch to the first commit,
and worker CPU seconds (all threads, /proc) over [t0, t1] per 100k events, which noise from
other work on a shared machine moves much less than the wall-clock rate.

Every framework reads the same ``--events`` events (default 1,000,000: the issue's
workload), from the same topic, so every ratio compares equal event counts. faust is slow
(about 1,800 events/s), so ``--peer-events N`` lets the peers read a separate, smaller topic
of N events generated the same way (same keys, same 10-minute span, so the same state size
and window count); streamkit then runs a second time on that topic, and ratios are only
computed between runs on the same data. (Fewer events over the same keys and span mean
fewer events per (key, window), about 1 at 100k and 10 at 1M, so more window creations,
state misses and changelog records per event: per-event cost depends on the event count,
and a ratio across counts would compare different work.)

Changelog restore (streamkit): after each streamkit run the worker is stopped (a clean final
commit), its state directory deleted and the worker started again: it restores every table
partition from its changelog before processing (there is nothing left to process). The
worker logs ``restored TABLE-P: N records in Xs (R/s); Ys from the first record (R/s)`` per
partition (partitions restore concurrently); restore rate = sum N / (last restore's end -
the earliest first record read), with both read from the log's millisecond timestamps: the
read and the apply, without connecting the readers and listing offsets (which the worker's
start shares the event loop with). The rate with those is shown as well.

Output check: the DSL and quix runs' output topics are read back; with no grace, every window
that ends at or before its partition's largest timestamp is final, so the expected number
of results and the sum of their counts are known from the generated data, and shown.

Targets: streamkit >= 10x faust-streaming, >= 3x quixstreams, >= 100,000 events/s; issue 20's:
the agent + Table >= 4x quixstreams per CPU-second, restore >= 1,000,000 changelog records/s.

``--format avro`` (issue 21): a ``streamkit schema-registry`` joins the broker, the same events
are produced a second time to ``events-avro`` as Avro in the registry's wire format (by
confluent-kafka's AvroSerializer), and the agent mode runs on them with ``AvroSerde`` values,
beside the JSON agent run: target >= 0.9 of JSON's rate. Then serializer throughput: streamkit's
AvroSerde against confluent-kafka's AvroSerializer/AvroDeserializer (fastavro) and the JSON
model codec on the same records (``schemas_bench.serde_rates``).

Usage: python benchmarks/streams_bench.py [--events N] [--keys K] [--peer-events N]
           [--skip-peers] [--only streamkit|faust|quix] [--profile DIR] [--cprofile DIR]
           [--data-dir DIR] [--commit-ms MS] [--partitions P] [--peer-timeout S] [--exactly-once]
           [--format json|avro]

``--profile DIR`` samples the streamkit workers (and their restores) with py-spy
(``pip install py-spy``) and prints the hottest functions; ``--cprofile DIR`` runs the
streamkit workers under cProfile instead (slower; .prof files kept in DIR). The default run
(1M events for everyone) takes about 15-20 minutes on 2 cores, most of it faust (about 10
minutes at its 1,800 events/s); ``--peer-events 100000`` cuts that to about 5-7.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import os
import platform
import pstats
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from streamkit.streams.topic import partition_for_key
from streamkit.testing import BrokerProcess, SchemaRegistryProcess

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import cpu_seconds, machine_load, read_collapsed
from schemas_bench import print_rates, serde_rates

HERE = Path(__file__).resolve().parent
PEERS = HERE / "_streams_peers"
WINDOW_MS = 60_000
POLL_S = 0.05

TARGET_RATE = 100_000
TARGET_VS_FAUST = 10.0
TARGET_VS_QUIX = 3.0
TARGET_RESTORE = 1_000_000  # issue 20
TARGET_AVRO_VS_JSON = 0.9

COMMON: dict[str, Any] = {"log.connection.close": False}


# -- machine ---------------------------------------------------------------------------------


# -- peer virtualenvs --------------------------------------------------------------------------


@dataclass
class Peer:
    name: str  # faust | quix
    label: str  # faust-streaming | quixstreams
    venv: Path
    packages: list[str]
    imports: str
    dist: str  # the distribution whose version is shown

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"


PEER_SPECS = {
    "faust": Peer("faust", "faust-streaming", HERE / ".venv-faust", ["faust-streaming", "rocksdict"],
                  "import faust, rocksdict", "faust-streaming"),
    "quix": Peer("quix", "quixstreams", HERE / ".venv-quix", ["quixstreams"],
                 "import quixstreams, rocksdict", "quixstreams"),
}


def _tail(text: str, n: int = 6) -> str:
    lines = [ln for ln in text.strip().splitlines() if not ln.startswith("WARNING: Location")]
    return " | ".join(lines[-n:])


def ensure_peer(peer: Peer) -> str:
    """Create ``peer.venv`` and install its packages unless they already import (idempotent);
    returns the installed version of ``peer.dist``. Raises RuntimeError saying why not."""
    def works() -> bool:
        if not peer.python.exists():
            return False
        probe = subprocess.run([str(peer.python), "-c", peer.imports], capture_output=True, timeout=120)
        return probe.returncode == 0

    if not works():
        if not peer.python.exists():
            print(f"  creating {peer.venv} (python -m venv) ...", flush=True)
            made = subprocess.run([sys.executable, "-m", "venv", str(peer.venv)], capture_output=True,
                                  text=True, timeout=300)
            if made.returncode != 0:
                raise RuntimeError(f"python -m venv {peer.venv} failed: {_tail(made.stderr)}")
        print(f"  pip install {' '.join(peer.packages)} into {peer.venv} ...", flush=True)
        pip = subprocess.run([str(peer.python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                              *peer.packages], capture_output=True, text=True, timeout=1200)
        if pip.returncode != 0:
            raise RuntimeError(f"pip install {' '.join(peer.packages)} failed: {_tail(pip.stderr or pip.stdout)}")
        if not works():
            probe = subprocess.run([str(peer.python), "-c", peer.imports], capture_output=True, text=True)
            raise RuntimeError(f"installed, but `{peer.imports}` fails: {_tail(probe.stderr)}")
    version = subprocess.run(
        [str(peer.python), "-c", f"import importlib.metadata as m; print(m.version({peer.dist!r}))"],
        capture_output=True, text=True, timeout=60)
    return version.stdout.strip() or "?"


# -- data ------------------------------------------------------------------------------------


@dataclass
class Dataset:
    topic: str
    events: int
    end_offsets: list[int]
    # expected final window results (no grace: windows ending <= the partition's max ts)
    expected_results: int
    expected_sum: int


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, **COMMON})


def create_topics(bootstrap: str, names: list[str], partitions: int) -> None:
    client = admin(bootstrap)
    for future in client.create_topics([NewTopic(n, partitions, 1) for n in names]).values():
        future.result(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        md = client.list_topics(timeout=10).topics
        if all(n in md and md[n].error is None and len(md[n].partitions) == partitions for n in names):
            return
        time.sleep(0.05)
    raise RuntimeError(f"topics {names} not in the metadata after 30 s")


def end_offsets(bootstrap: str, topic: str, partitions: int) -> list[int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "streams-bench-offsets", **COMMON})
    try:
        return [c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)]
    finally:
        c.close()


def produce_events(bootstrap: str, topic: str, n: int, keys: int, partitions: int, base_ms: int,
                   span_ms: int, seed: int, encode: Any = None) -> Dataset:
    """Produce ``n`` events (see the module docstring) and compute the expected results;
    ``encode(event dict) -> bytes`` writes the values (default: JSON with orjson)."""
    rng = random.Random(seed)
    names = [f"k{i}" for i in range(keys)]
    key_bytes = [name.encode() for name in names]
    part_of = [partition_for_key(kb, partitions) for kb in key_bytes]
    producer = Producer({"bootstrap.servers": bootstrap, **COMMON, "linger.ms": 20, "batch.size": 1_000_000,
                         "acks": 1, "compression.type": "none", "partitioner": "murmur2_random",
                         "queue.buffering.max.messages": 1_000_000, "enable.idempotence": False})
    max_ts = [0] * partitions
    windows: dict[int, Counter[tuple[int, int]]] = {p: Counter() for p in range(partitions)}
    dumps = encode or orjson.dumps
    produce = producer.produce
    randrange = rng.randrange
    started = time.perf_counter()
    for i in range(n):
        k = randrange(keys)
        ts = base_ms + i * span_ms // n
        value = dumps({"key": names[k], "ts": ts, "value": 1})
        while True:
            try:
                produce(topic, value, key_bytes[k], timestamp=ts)
                break
            except BufferError:
                producer.poll(0.01)
        p = part_of[k]
        if ts > max_ts[p]:
            max_ts[p] = ts
        windows[p][(k, ts // WINDOW_MS)] += 1
        if i % 10_000 == 0:
            producer.poll(0)
    left = producer.flush(60)
    if left:
        raise RuntimeError(f"{left} events not delivered to {topic}")
    elapsed = time.perf_counter() - started
    ends = end_offsets(bootstrap, topic, partitions)
    if sum(ends) != n:
        raise RuntimeError(f"{topic} holds {sum(ends)} records, expected {n}")
    expected_parts = [sum(c.values()) for p, c in sorted(windows.items())]
    if ends != expected_parts:
        raise RuntimeError(f"{topic}: partition sizes {ends} differ from murmur2's {expected_parts}: the "
                           "producer did not partition like streamkit's tables")
    results = total = 0
    for p, counter in windows.items():
        for (_k, w), count in counter.items():
            if (w + 1) * WINDOW_MS <= max_ts[p]:
                results += 1
                total += count
    print(f"  produced {n:,} events to {topic} ({partitions} partitions {ends}) in {elapsed:.1f}s")
    return Dataset(topic, n, ends, results, total)


def avro_encoder(registry_url: str, topic: str) -> Any:
    """``--format avro``: events as Avro in the Schema Registry's wire format, written by
    confluent-kafka's AvroSerializer (another producer, as in production) with the schema of
    the app's model (``Reading`` in ``_streams_peers/streamkit_app.py``), registered under
    ``{topic}-value``."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    schema = {"type": "record", "name": "Reading", "namespace": "streamkitapp", "fields": [
        {"name": "key", "type": "string"}, {"name": "ts", "type": "long"}, {"name": "value", "type": "long"}]}
    serialize = AvroSerializer(SchemaRegistryClient({"url": registry_url}), orjson.dumps(schema).decode())
    ctx = SerializationContext(topic, MessageField.VALUE)
    return lambda event: serialize(event, ctx)


def read_output(bootstrap: str, topic: str, partitions: int) -> tuple[int, int]:
    """(records, sum of their counts) of a window-result topic, read to its end."""
    ends = end_offsets(bootstrap, topic, partitions)
    if not sum(ends):
        return 0, 0
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "streams-bench-reader",
                  "enable.auto.commit": False, **COMMON})
    assigned = [TopicPartition(topic, p, 0) for p in range(partitions)]
    c.assign(assigned)
    pos = [0] * partitions
    records = total = 0
    deadline = time.monotonic() + 120
    try:
        while any(pos[p] < ends[p] for p in range(partitions)) and time.monotonic() < deadline:
            for msg in c.consume(10_000, 1.0):
                part, offset, raw = msg.partition(), msg.offset(), msg.value()
                if msg.error() or part is None or offset is None or raw is None:
                    continue
                records += 1
                value = orjson.loads(raw)
                total += int(value.get("value", 0)) if isinstance(value, dict) else 0
            # The consumer's positions, not the last record's offset + 1: a transactional
            # (exactly-once) output ends with a commit marker, which is never a message.
            pos = [max(tp.offset, 0) for tp in c.position(assigned)]
    finally:
        c.close()
    return records, total


# -- running a framework ----------------------------------------------------------------------


@dataclass
class Run:
    name: str
    events: int
    ok: bool = False
    rate: float = float("nan")
    seconds: float = float("nan")
    counted: int = 0
    startup: float = float("nan")  # launch -> first commit seen
    cpu: float = float("nan")  # worker CPU seconds over [t0, t1]
    broker_cpu: float = float("nan")
    out_records: int | None = None
    out_sum: int | None = None
    note: str = ""
    load: str = ""
    log: Path | None = None
    profile: Path | None = None

    @property
    def cpu_per_100k(self) -> float:
        return self.cpu / self.counted * 100_000 if self.counted else float("nan")

    @property
    def events_per_cpu_s(self) -> float:
        return self.counted / self.cpu if self.cpu and self.cpu == self.cpu else float("nan")


class Committed:
    """The committed offsets of ``group`` on ``topic`` (OffsetFetch, never joining the group)."""

    def __init__(self, bootstrap: str, group: str, topic: str, partitions: int) -> None:
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                  "enable.auto.commit": False, **COMMON})
        self.tps = [TopicPartition(topic, p) for p in range(partitions)]

    def total(self) -> int:
        try:
            offsets = self.consumer.committed(self.tps, timeout=5)
        except KafkaException:
            return -1
        return sum(max(tp.offset, 0) for tp in offsets)

    def close(self) -> None:
        self.consumer.close()


@contextlib.contextmanager
def py_spy(pid: int, out: Path | None) -> Iterator[None]:
    """py-spy record on ``pid`` while the block runs (collapsed stacks in ``out``)."""
    exe = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if out is None or not Path(exe).exists():
        if out is not None:
            print("  (py-spy not found: pip install py-spy)")
        yield
        return
    proc = subprocess.Popen([exe, "record", "--pid", str(pid), "--rate", "200", "--format", "raw",
                             "--output", str(out), "--nonblocking", "--idle"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield
    finally:
        proc.send_signal(signal.SIGINT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(60)


def stop_process(proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def log_tail(path: Path, n: int = 15) -> str:
    with contextlib.suppress(OSError):
        lines = path.read_text(errors="replace").splitlines()
        return "\n".join("    " + ln for ln in lines[-n:])
    return "    (no log)"


def run_framework(name: str, args: list[str], env: dict[str, str], cwd: Path, log: Path, bootstrap: str,
                  group: str, data: Dataset, partitions: int, timeout: float, broker_pid: int,
                  profile: Path | None = None) -> tuple[Run, subprocess.Popen[bytes]]:
    """Start the worker, time it from its first commit to all input committed (module
    docstring); returns the run and the still-running process (the caller stops it)."""
    run = Run(name, data.events, log=log, load=machine_load())
    watcher = Committed(bootstrap, group, data.topic, partitions)
    with open(log, "ab") as out:
        launched = time.monotonic()
        proc = subprocess.Popen(args, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
    total = data.events
    t0 = c0 = None
    cpu0 = bcpu0 = 0.0
    last = 0
    spy = py_spy(proc.pid, profile) if profile else contextlib.nullcontext()
    try:
        with spy:
            deadline = launched + timeout
            while True:
                now = time.monotonic()
                committed = watcher.total()
                if committed > 0 and t0 is None:
                    t0, c0 = now, committed
                    cpu0, bcpu0 = cpu_seconds(proc.pid), cpu_seconds(broker_pid)
                    run.startup = now - launched
                if committed >= total:
                    run.ok = True
                    break
                last = max(last, committed)
                if proc.poll() is not None:
                    run.note = f"exited with {proc.returncode} after {last:,} of {total:,} committed"
                    break
                if now > deadline:
                    run.note = f"timed out after {timeout:.0f}s at {last:,} of {total:,} committed"
                    break
                time.sleep(POLL_S)
    finally:
        watcher.close()
    t1 = time.monotonic()
    end = total if run.ok else last
    if t0 is not None and c0 is not None and t1 > t0 and end > c0:
        run.seconds = t1 - t0
        run.counted = end - c0
        run.rate = run.counted / run.seconds
        run.cpu = cpu_seconds(proc.pid) - cpu0
        run.broker_cpu = cpu_seconds(broker_pid) - bcpu0
    if profile is not None:
        run.profile = profile
    if not run.ok:
        print(f"  {name}: {run.note}; log tail ({log}):\n{log_tail(log)}")
    return run, proc


# -- streamkit --------------------------------------------------------------------------------


def streamkit_env(mode: str, app_id: str, data: Dataset, output: str, commit_ms: int, partitions: int,
                  guarantee: str = "at_least_once") -> dict[str, str]:
    env = dict(os.environ)
    env.update({"STREAMS_BENCH_GUARANTEE": guarantee, "STREAMS_BENCH_MODE": mode, "STREAMS_BENCH_APP": app_id, "STREAMS_BENCH_INPUT": data.topic,
                "STREAMS_BENCH_OUTPUT": output, "STREAMS_BENCH_COMMIT_MS": str(commit_ms),
                "STREAMS_BENCH_PARTITIONS": str(partitions), "PYTHONUNBUFFERED": "1"})
    return env


def streamkit_cmd(bootstrap: str, run_dir: Path, cprofile: Path | None) -> list[str]:
    base = [sys.executable]
    if cprofile is not None:
        base += ["-m", "cProfile", "-o", str(cprofile)]
    return [*base, "-m", "streamkit", "worker", "-A", "streamkit_app:app", "-b", bootstrap,
            "--data-dir", str(run_dir), "--loglevel", "info"]


@dataclass
class Restore:
    name: str
    ok: bool = False
    records: int = 0
    changelog: int = 0
    seconds: float = float("nan")  # from the first record read to the last applied
    whole_seconds: float = float("nan")  # from the first restore's start (connecting, offsets)
    partitions: list[tuple[int, int, float]] = field(default_factory=list)  # (partition, N, s)
    note: str = ""
    profile: Path | None = None

    @property
    def rate(self) -> float:
        return self.records / self.seconds if self.seconds and self.seconds == self.seconds else float("nan")


_RESTORED = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) .*restored (\S+)-(\d+): (\d+) records in ([\d.]+)s"
                       r"(?:.*; ([\d.]+)s from the first record)?")


def measure_restore(name: str, args: list[str], env: dict[str, str], log: Path, bootstrap: str, app_id: str,
                    table: str, partitions: int, profile: Path | None) -> Restore:
    """Start the worker on an empty state dir and read its restore log lines."""
    res = Restore(name, profile=profile)
    changelog = f"{app_id}-{table}-changelog"
    ends = end_offsets(bootstrap, changelog, partitions)
    res.changelog = sum(ends)
    expect = sum(1 for e in ends if e > 0)
    start_size = log.stat().st_size if log.exists() else 0
    with open(log, "ab") as out:
        proc = subprocess.Popen(args, cwd=PEERS, env=env, stdout=out, stderr=subprocess.STDOUT)
    lines: list[re.Match[str]] = []
    spy = py_spy(proc.pid, profile) if profile else contextlib.nullcontext()
    try:
        with spy:
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline and proc.poll() is None:
                with open(log, errors="replace") as f:
                    f.seek(start_size)
                    lines = [m for m in map(_RESTORED.match, f.read().splitlines()) if m]
                if len(lines) >= expect:
                    break
                time.sleep(0.1)
    finally:
        stop_process(proc)
    if len(lines) < expect:
        res.note = f"{len(lines)} of {expect} partitions logged a restore"
        print(f"  {name} restore: {res.note}; log tail ({log}):\n{log_tail(log)}")
        return res
    starts, firsts, ends_t = [], [], []
    for m in lines:
        at = dt.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
        n, secs = int(m.group(4)), float(m.group(5))
        reading = float(m.group(6)) if m.group(6) else secs
        res.partitions.append((int(m.group(3)), n, reading))
        res.records += n
        ends_t.append(at)
        starts.append(at - secs)
        firsts.append(at - reading)
    res.seconds = max(ends_t) - min(firsts)
    res.whole_seconds = max(ends_t) - min(starts)
    res.ok = res.records == res.changelog
    if not res.ok:
        res.note = f"restored {res.records:,} of {res.changelog:,} changelog records"
    return res


# streamkit's modes (``_streams_peers/streamkit_app.py``): the DSL over dicts (no Python
# function: columnar), the same forced onto the row path, the README tutorial's style (a
# pydantic model and a lambda: row path), the same in column expressions (columnar), agents.
MODE_LABELS = {"dsl": "streamkit DSL", "dsl-row": "streamkit DSL (row path)",
               "dsl-lambda": "streamkit DSL lambda+model", "dsl-columns": "streamkit DSL col()+model",
               "agent": "streamkit agent+Table", "agent-take": "streamkit agent take()+Table"}
# Issue 20's targets against quixstreams in the same run: (per CPU-second, wall-clock).
TARGETS_VS_QUIX = {"streamkit DSL lambda+model": (8.0, 6.0), "streamkit DSL col()+model": (20.0, None),
                   "streamkit agent+Table": (4.0, None)}


def run_streamkit(mode: str, bootstrap: str, broker_pid: int, data: Dataset, work: Path, args: argparse.Namespace,
                  restore: bool = True, tag: str = "", guarantee: str = "at_least_once",
                  registry_url: str | None = None) -> tuple[Run, Restore | None]:
    app_id = f"streams-bench-streamkit-{mode}{tag}"
    output = f"{app_id}-out"
    create_topics(bootstrap, [output], args.partitions)
    run_dir = work / app_id
    run_dir.mkdir(parents=True, exist_ok=True)
    log = work / f"{app_id}.log"
    env = streamkit_env(mode, app_id, data, output, args.commit_ms, args.partitions, guarantee)
    if registry_url is not None:  # --format avro: Avro values through the registry
        env.update({"STREAMS_BENCH_FORMAT": "avro", "STREAMS_BENCH_REGISTRY": registry_url})
    # profiled: each mode's run on the main data, and the --format avro run beside it
    profiled = tag in ("", "-avro")
    prof = Path(args.profile) if args.profile and profiled else None
    cprof = Path(args.cprofile) if args.cprofile and profiled else None
    cmd = streamkit_cmd(bootstrap, run_dir, cprof / f"streamkit-{mode}{tag}.prof" if cprof else None)
    label = MODE_LABELS[mode]
    if guarantee != "at_least_once":
        label += " (EOS)"
    if registry_url is not None:
        label += " (Avro)"
    print(f"\n{label}: {data.events:,} events ({machine_load()}) ...", flush=True)
    run, proc = run_framework(label, cmd, env, PEERS, log, bootstrap, app_id, data, args.partitions,
                              args.timeout, broker_pid, prof / f"streamkit-{mode}{tag}.txt" if prof else None)
    stop_process(proc)
    if mode.startswith("dsl"):
        run.out_records, run.out_sum = read_output(bootstrap, output, args.partitions)
    print_run(run, data)
    if not (restore and run.ok):
        return run, None
    shutil.rmtree(run_dir / "state", ignore_errors=True)
    print(f"  restore: deleted {run_dir / 'state'}; restarting the worker ...", flush=True)
    rcmd = streamkit_cmd(bootstrap, run_dir, cprof / f"streamkit-{mode}-restore.prof" if cprof else None)
    res = measure_restore(f"{label} restore", rcmd, env, log, bootstrap, app_id, "counts", args.partitions,
                          prof / f"streamkit-{mode}-restore.txt" if prof else None)
    print_restore(res)
    return run, res


# -- peers ------------------------------------------------------------------------------------


def run_peer(peer: Peer, version: str, bootstrap: str, broker_pid: int, data: Dataset, work: Path,
             args: argparse.Namespace) -> Run:
    app_id = f"streams-bench-{peer.name}"
    output = f"{app_id}-out"
    create_topics(bootstrap, [output], args.partitions)
    state = work / f"{app_id}-state"
    log = work / f"{app_id}.log"
    env = dict(os.environ)
    for var in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"):
        env.pop(var, None)
    env.update({"STREAMS_BENCH_BOOTSTRAP": bootstrap, "STREAMS_BENCH_APP": app_id, "STREAMS_BENCH_INPUT": data.topic,
                "STREAMS_BENCH_OUTPUT": output, "STREAMS_BENCH_DATADIR": str(state),
                "STREAMS_BENCH_COMMIT_MS": str(args.commit_ms), "STREAMS_BENCH_PARTITIONS": str(args.partitions),
                "PYTHONUNBUFFERED": "1", "PYTHONWARNINGS": "ignore"})
    if peer.name == "faust":
        cmd = [str(peer.python), "faust_app.py", "worker", "--loglevel", "warn"]
    else:
        cmd = [str(peer.python), "quix_app.py"]
    label = f"{peer.label} {version}"
    print(f"\n{label}: {data.events:,} events ({machine_load()}) ...", flush=True)
    run, proc = run_framework(label, cmd, env, PEERS, log, bootstrap, app_id, data, args.partitions,
                              args.peer_timeout, broker_pid)
    stop_process(proc)
    if peer.name == "quix":
        run.out_records, run.out_sum = read_output(bootstrap, output, args.partitions)
    else:
        run.note = run.note or "no output: windows close by wall clock"
    print_run(run, data)
    return run


# -- profiles ---------------------------------------------------------------------------------


def top_functions(collapsed: Path, n: int = 10) -> tuple[list[tuple[float, float, str]], list[tuple[float, str]], float]:
    """From py-spy's collapsed stacks: the top ``n`` by self time (self %, inclusive %), the
    top ``n`` by inclusive time among streamkit/aiokafka frames, and the busy share. Shares are
    of busy samples (the event loop waiting in select() is left out)."""
    samples = read_collapsed(collapsed)
    if not samples.busy:
        return [], [], 0.0
    skip = ("<module>", "run (asyncio", "run_until_complete", "run_forever", "_run_once", "_run (asyncio",
            "main (", "__call__ (", "invoke (", "worker (", "run_worker", "_run (streamkit", "<lambda>")
    inclusive = [(100 * c / samples.busy, f) for f, c in samples.incl.most_common() if not f.startswith(skip)
                 and ("streamkit" in f or "aiokafka" in f)][:n]
    return samples.top_self(n), inclusive, samples.busy_share


def print_profile(label: str, path: Path) -> None:
    rows, inclusive, busy = top_functions(path)
    if not rows:
        print(f"  {label}: no py-spy samples in {path}")
        return
    print(f"\n  {label}: busy in {busy:.0%} of samples ({path})")
    print("    top 10 by self time        self%  incl%")
    for own, inc, frame in rows:
        print(f"    {own:5.1f}% {inc:5.1f}%  {frame}")
    print("    top 10 streamkit/aiokafka by inclusive time")
    for inc, frame in inclusive:
        print(f"    {inc:5.1f}%  {frame}")


def print_cprofile(label: str, path: Path) -> None:
    if not path.exists():
        print(f"  {label}: no cProfile output at {path}")
        return
    print(f"\n  {label}: cProfile, top 10 by self time ({path})")
    stats = pstats.Stats(str(path))
    stats.sort_stats("tottime")
    width = 0
    entries = sorted(stats.stats.items(), key=lambda kv: kv[1][2], reverse=True)[:10]  # type: ignore[attr-defined]
    total = sum(v[2] for v in stats.stats.values())  # type: ignore[attr-defined]
    for (filename, line, func), (_cc, nc, tt, ct, _callers) in entries:
        where = f"{func} ({Path(filename).name}:{line})"
        width = max(width, len(where))
        print(f"    {100 * tt / total:5.1f}%  {tt:6.2f}s self {ct:6.2f}s cum {nc:>10,} calls  {where}")


# -- reporting --------------------------------------------------------------------------------


def fmt_rate(x: float) -> str:
    return f"{x:,.0f}" if x == x else "-"


def print_run(run: Run, data: Dataset) -> None:
    if run.counted:
        print(f"  {run.name}: {fmt_rate(run.rate)} events/s ({run.counted:,} events committed in {run.seconds:.2f}s "
              f"after the first commit, {run.startup:.1f}s after launch); worker CPU {run.cpu:.1f}s "
              f"({run.cpu_per_100k:.2f}s per 100k events), broker CPU {run.broker_cpu:.1f}s")
    if run.out_records is not None:
        match = "as expected" if (run.out_records, run.out_sum) == (data.expected_results, data.expected_sum) \
            else f"EXPECTED {data.expected_results:,} results summing to {data.expected_sum:,}"
        print(f"  output: {run.out_records:,} window results, counts summing to {run.out_sum:,} ({match})")


def print_restore(res: Restore) -> None:
    if res.records:
        parts = ", ".join(f"p{p}: {n:,} in {s:.2f}s" for p, n, s in sorted(res.partitions))
        whole = fmt_rate(res.records / res.whole_seconds) if res.whole_seconds > 0 else "-"
        print(f"  restore: {res.records:,} of {res.changelog:,} changelog records in {res.seconds:.2f}s from the "
              f"first record read = {fmt_rate(res.rate)} records/s ({parts}); {res.whole_seconds:.2f}s = {whole} "
              f"records/s with connecting and listing offsets")


def ratio(a: Run, b: Run | None, cpu: bool = False) -> float:
    if b is None:
        return float("nan")
    x, y = (a.events_per_cpu_s, b.events_per_cpu_s) if cpu else (a.rate, b.rate)
    return x / y if x == x and y == y and y > 0 else float("nan")


def fmt_ratio(a: Run, b: Run | None) -> str:
    """``a``'s rate over ``b``'s, only between runs over the same events ("-" otherwise)."""
    if b is None or a.events != b.events:
        return "-"
    r = ratio(a, b)
    return "-" if r != r else f"{r:.1f}x"


def report(runs: list[Run], restores: list[Restore], faust: Run | None, quix: Run | None,
           args: argparse.Namespace) -> None:
    print("\n" + "=" * 104)
    print(f"Tumbling 1-minute count per key, {args.keys:,} keys, {args.partitions} partitions, "
          f"{args.span_minutes} minutes of event time, RocksDB state, commit every {args.commit_ms} ms, "
          "one worker, on one streamkit broker")
    print("events/s = events committed after the worker's first commit / time from that commit until every "
          "input offset is committed")
    print("(polled from outside, identically for every framework); each rate is from that framework's own "
          "event count.")
    head = (f"{'framework':<30} {'events':>10} {'events/s':>10} {'vs faust':>9} {'vs quix':>8} "
            f"{'CPU s/100k':>10} {'ev/CPU-s':>9}  note")
    print(head)
    print("-" * len(head))
    for r in runs:
        print(f"{r.name:<30} {r.events:>10,} {fmt_rate(r.rate):>10} {fmt_ratio(r, faust):>9} "
              f"{fmt_ratio(r, quix):>8} {r.cpu_per_100k:>10.2f} {fmt_rate(r.events_per_cpu_s):>9}  {r.note}")
    for r in runs:
        base = next((x for x in runs if x.name == r.name.removesuffix(" (EOS)") and x.events == r.events), None)
        if r.name.endswith(" (EOS)") and base is not None and base.rate == base.rate and r.rate == r.rate:
            print(f"{r.name:<30} exactly_once / at_least_once throughput: {r.rate / base.rate:.2f}x (target >= 0.85)")
    for res in restores:
        print(f"{res.name:<30} {res.records:>10,} {fmt_rate(res.rate):>10} {'':>9} {'':>8} {'':>10} {'':>9}  "
              f"changelog records/s {res.note}")
    if any(p is not None and r.events != p.events for r in runs for p in (faust, quix)):
        print("ratios only between rows with equal 'events' (the same data): per-event cost depends on the "
              "event count.")
    print("CPU s/100k: the worker process's CPU seconds (all threads) per 100k events over the timed span; "
          "ev/CPU-s: events per worker CPU-second.")

    def same_data(r: Run, peer: Run | None) -> Run | None:
        """``r``'s framework and mode on the peer's data (the run itself by default)."""
        if peer is None or r.events == peer.events:
            return r
        twin = [x for x in runs if x.name == r.name and x.events == peer.events]
        return twin[0] if twin else None

    print("\nTargets:")
    firsts: dict[str, Run] = {}
    for r in runs:
        if r.name.startswith("streamkit"):
            firsts.setdefault(r.name, r)
    for name, r in firsts.items():
        checks = [(f">= {TARGET_RATE:,} events/s ({r.events:,} events)",
                   r.rate >= TARGET_RATE if r.rate == r.rate else None)]
        for peer, target, what in ((faust, TARGET_VS_FAUST, "faust"), (quix, TARGET_VS_QUIX, "quix")):
            twin = same_data(r, peer)
            x = ratio(twin, peer) if twin is not None else float("nan")
            if twin is not None and peer is not None and x == x:
                c = ratio(twin, peer, cpu=True)
                checks.append((f">= {target:.0f}x {what} ({x:.1f}x on {peer.events:,} events, per CPU-s {c:.1f}x)",
                               x >= target))
            else:
                checks.append((f">= {target:.0f}x {what}", None))
        print(f"  {name:<22} " + "; ".join(f"{what}: {'-' if ok is None else 'PASS' if ok else 'MISS'}"
                                          for what, ok in checks))
    for name, (cpu_target, wall_target) in TARGETS_VS_QUIX.items():
        r = firsts.get(name)
        twin = None if r is None else same_data(r, quix)
        if twin is None or quix is None:
            continue
        c, x = ratio(twin, quix, cpu=True), ratio(twin, quix)
        line = f"  {name:<22} vs quix per CPU-s {c:.1f}x (target >= {cpu_target:.0f}x: {'PASS' if c >= cpu_target else 'MISS'})"
        if wall_target is not None:
            line += f"; wall-clock {x:.1f}x (target >= {wall_target:.0f}x: {'PASS' if x >= wall_target else 'MISS'})"
        print(line)
    for res in restores:
        ok = res.rate >= TARGET_RESTORE if res.rate == res.rate else None
        print(f"  {res.name:<22} >= {TARGET_RESTORE:,} changelog records/s: "
              f"{'-' if ok is None else 'PASS' if ok else 'MISS'}")
    print(f"\nmachine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"{machine_load()} at the end")


# -- main -------------------------------------------------------------------------------------


def avro_report(runs: list[Run], serde_n: int, rates: dict[str, tuple[float, float]]) -> None:
    """``--format avro``: the agent on Avro values against the agent on JSON values (same
    events, same run), and serializer throughput against confluent-kafka's."""
    json_run = next((r for r in runs if r.name == MODE_LABELS["agent"]), None)
    avro_run = next((r for r in runs if r.name == f"{MODE_LABELS['agent']} (Avro)"), None)
    print("\n--format avro: agent + Table with Avro values through the Schema Registry")
    if json_run is None or avro_run is None:
        print("  (run with --modes including agent to compare)")
    else:
        wall, cpu = ratio(avro_run, json_run), ratio(avro_run, json_run, cpu=True)
        print(f"  Avro {fmt_rate(avro_run.rate)} events/s vs JSON {fmt_rate(json_run.rate)}: {wall:.2f}x wall clock, "
              f"{cpu:.2f}x per CPU-second (target >= {TARGET_AVRO_VS_JSON}x)")
    print_rates(serde_n, rates)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=1_000_000, help="events for every framework (default 1,000,000)")
    ap.add_argument("--keys", type=int, default=10_000, help="distinct keys (default 10,000)")
    ap.add_argument("--peer-events", type=int, default=None,
                    help="fewer events for faust and quix (default: --events); streamkit then also runs on "
                         "those, and ratios compare runs on the same data only")
    ap.add_argument("--skip-peers", action="store_true", help="streamkit only")
    ap.add_argument("--only", choices=["streamkit", "faust", "quix"], help="run one framework")
    ap.add_argument("--peers", default="faust,quix", help="peers to run (default faust,quix)")
    ap.add_argument("--modes", default="dsl,agent",
                    help="streamkit modes to run: dsl, dsl-row, dsl-lambda, dsl-columns, agent, agent-take "
                         "(default dsl,agent)")
    ap.add_argument("--exactly-once", action="store_true",
                    help="also run each streamkit mode under processing.guarantee=exactly_once, same commit interval")
    ap.add_argument("--no-restore", action="store_true", help="skip the changelog restore measurement")
    ap.add_argument("--partitions", type=int, default=4, help="input partitions (default 4)")
    ap.add_argument("--span-minutes", type=int, default=10, help="event-time span of the input (default 10)")
    ap.add_argument("--commit-ms", type=int, default=1000, help="commit interval of every framework (default 1000)")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--timeout", type=float, default=900, help="seconds allowed for a streamkit run")
    ap.add_argument("--peer-timeout", type=float, default=1800, help="seconds allowed for a peer run")
    ap.add_argument("--profile", metavar="DIR", help="py-spy the streamkit workers; print hottest functions")
    ap.add_argument("--cprofile", metavar="DIR", help="run the streamkit workers under cProfile (slower)")
    ap.add_argument("--data-dir", metavar="DIR", help="keep the broker, state and logs here (default: temp dir)")
    ap.add_argument("--format", choices=["json", "avro"], default="json",
                    help="avro: also run the agent mode on the same events as Avro through a Schema Registry, "
                         "and measure serializer throughput against confluent-kafka's (see avro_report)")
    args = ap.parse_args()
    if args.peer_events is None:
        args.peer_events = args.events

    selected = {args.only} if args.only else {"streamkit", *(p.strip() for p in args.peers.split(",") if p.strip())}
    if args.skip_peers:
        selected -= {"faust", "quix"}
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    for d in (args.profile, args.cprofile):
        if d:
            Path(d).mkdir(parents=True, exist_ok=True)

    print(f"streams_bench: {machine_load()}", flush=True)
    peers: dict[str, tuple[Peer, str]] = {}
    peer_errors: dict[str, str] = {}
    for name in ("faust", "quix"):
        if name not in selected:
            continue
        peer = PEER_SPECS[name]
        try:
            peers[name] = (peer, ensure_peer(peer))
            print(f"  {peer.label} {peers[name][1]} ready in {peer.venv}")
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
            peer_errors[name] = str(exc)
            print(f"  {peer.label}: cannot install ({exc}); going on without it")

    work = Path(args.data_dir) if args.data_dir else Path(tempfile.mkdtemp(prefix="streams-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    broker = BrokerProcess(work / "broker", settings={"num.partitions": args.partitions}).start()
    assert broker.process is not None
    broker_pid = broker.process.pid
    print(f"  streamkit broker on {broker.bootstrap} (pid {broker_pid}, data and logs in {work})")
    runs: list[Run] = []
    restores: list[Restore] = []
    faust_run = quix_run = None
    registry: SchemaRegistryProcess | None = None
    avro_data: Dataset | None = None
    avro_rates: tuple[int, dict[str, tuple[float, float]]] | None = None
    try:
        span_ms = args.span_minutes * WINDOW_MS
        now_ms = time.time_ns() // 1_000_000
        base_ms = (now_ms // WINDOW_MS) * WINDOW_MS - span_ms - WINDOW_MS  # recent, minute-aligned
        topics = {}
        if "streamkit" in selected:
            topics[args.events] = "events"
        if peers:
            topics.setdefault(args.peer_events, f"events-peer-{args.peer_events}")
        create_topics(broker.bootstrap, list(topics.values()), args.partitions)
        datasets = {n: produce_events(broker.bootstrap, topic, n, args.keys, args.partitions, base_ms, span_ms,
                                      args.seed) for n, topic in topics.items()}
        if args.format == "avro":
            registry = SchemaRegistryProcess(broker.bootstrap, work / "registry.log").start()
            create_topics(broker.bootstrap, ["events-avro"], args.partitions)
            avro_data = produce_events(broker.bootstrap, "events-avro", args.events, args.keys, args.partitions,
                                       base_ms, span_ms, args.seed, avro_encoder(registry.url, "events-avro"))

        if "streamkit" in selected:
            for mode in modes:
                run, res = run_streamkit(mode, broker.bootstrap, broker_pid, datasets[args.events], work, args,
                                         restore=not args.no_restore)
                runs.append(run)
                if res is not None:
                    restores.append(res)
            if registry is not None and avro_data is not None:
                run, _ = run_streamkit("agent", broker.bootstrap, broker_pid, avro_data, work, args, restore=False,
                                       tag="-avro", registry_url=registry.url)
                runs.append(run)
                serde_n = min(args.events, 200_000)
                avro_rates = (serde_n, serde_rates(serde_n, registry.url))
            if args.exactly_once:
                for mode in modes:
                    run, _ = run_streamkit(mode, broker.bootstrap, broker_pid, datasets[args.events], work, args,
                                           restore=False, tag="-eos", guarantee="exactly_once")
                    runs.append(run)
            if peers and args.peer_events != args.events:
                # The same data as the peers, for like-for-like ratios (see report()).
                for mode in modes:
                    run, _ = run_streamkit(mode, broker.bootstrap, broker_pid, datasets[args.peer_events], work,
                                           args, restore=False, tag="-peerdata")
                    runs.append(run)
        for name, (peer, version) in peers.items():
            run = run_peer(peer, version, broker.bootstrap, broker_pid, datasets[args.peer_events], work, args)
            runs.append(run)
            if name == "faust":
                faust_run = run
            else:
                quix_run = run
    finally:
        if registry is not None:
            registry.stop()
        broker.stop()

    for name, why in peer_errors.items():
        print(f"\n{PEER_SPECS[name].label} not measured: {why}")
    report(runs, restores, faust_run, quix_run, args)
    if avro_rates is not None:
        avro_report(runs, *avro_rates)
    if args.profile:
        for r in runs:
            if r.profile is not None:
                print_profile(r.name, r.profile)
        for res in restores:
            if res.profile is not None:
                print_profile(res.name, res.profile)
    if args.cprofile:
        for mode in modes:
            print_cprofile(f"streamkit {mode}", Path(args.cprofile) / f"streamkit-{mode}.prof")
            print_cprofile(f"streamkit {mode} restore", Path(args.cprofile) / f"streamkit-{mode}-restore.prof")
        if args.format == "avro":
            print_cprofile("streamkit agent (Avro)", Path(args.cprofile) / "streamkit-agent-avro.prof")
    if not args.data_dir:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if all(r.ok for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
