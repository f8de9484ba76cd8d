"""Consumer-group members for the three Python clients, each on its own thread (so a test
can run several side by side and watch their assignments), a ``kcat -G`` member as a child
process read the same way, plus a one-shot "consume n records as a group member and commit"
helper per client.

Used in-process by test_groups.py and, for the SIGKILL test, by group_member.py in a
child process (a kcat member is a process already: the test SIGKILLs it directly).
"""

from __future__ import annotations

import asyncio
import re
import shutil
import signal
import subprocess
import threading
import time
from typing import IO, Any

from tests.integration.util import QUIET

# Every member heartbeats often, so rebalances are noticed quickly.
HEARTBEAT_MS = 250


def kafka_python_subscribe(consumer: Any, topic: str, listener: Any = None, timeout: float = 30) -> None:
    """``subscribe`` for kafka-python 3.0.12, working around a client bug.

    kafka-python's leader remembers the metadata it assigned with and rejoins when newer
    metadata differs (assignment_snapshot != metadata_snapshot). Right after ``subscribe``
    its snapshot is empty until the next Metadata response, so a leader that assigns first
    always causes a second rebalance shortly after. Worse, that second JoinGroup runs as a
    task across poll() calls; the new assignment clears the mismatch, so ``need_rejoin()``
    turns False while the task is still in flight and ``join_group_async`` never consumes
    its result: the member keeps an empty assignment, stops heartbeating and is expelled
    after session.timeout.ms. (The broker's JoinGroup/SyncGroup answers are correct; the
    Java client counts a pending join as "rejoin needed".) Fetching metadata after
    ``subscribe`` and before the first ``poll`` fills the snapshot, so neither happens.
    """
    if listener is None:
        consumer.subscribe([topic])
    else:
        consumer.subscribe([topic], listener=listener)
    deadline = time.monotonic() + timeout
    while topic not in consumer.topics() or not consumer.partitions_for_topic(topic):
        assert time.monotonic() < deadline, f"kafka-python got no metadata for {topic}"
        time.sleep(0.05)


ASSIGNORS: dict[str, tuple[str, ...]] = {
    # librdkafka has no eager "sticky" (see test_confluent_has_no_eager_sticky_assignor)
    "confluent": ("range", "roundrobin", "cooperative-sticky"),
    "aiokafka": ("range", "roundrobin", "sticky"),
    "kafka-python": ("range", "roundrobin", "sticky", "cooperative-sticky"),
    "kcat": ("range", "roundrobin", "cooperative-sticky"),  # librdkafka 2.0 inside kcat 1.7
}
KCAT = shutil.which("kcat")


def _aiokafka_assignor(name: str) -> Any:
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from aiokafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor

    return {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor,
            "sticky": StickyPartitionAssignor}[name]


def _kafka_python_assignor(name: str) -> Any:
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor

    return {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor,
            "sticky": StickyPartitionAssignor, "cooperative-sticky": CooperativeStickyAssignor}[name]


class Member:
    """A group member polling on a background thread.

    ``assignment`` is the set of partitions the client itself currently holds (``None``
    before its first assignment); ``callbacks`` counts its rebalance-listener calls.
    ``stop()`` closes the consumer: a dynamic member leaves the group (LeaveGroup), a
    static one (``instance_id``) does not, as Kafka clients do.
    """

    def __init__(self, client: str, bootstrap: str, group: str, topic: str, assignor: str, name: str,
                 instance_id: str | None = None, session_ms: int = 6000) -> None:
        self.client = client
        self.bootstrap = bootstrap
        self.group = group
        self.topic = topic
        self.assignor = assignor
        self.name = name
        self.instance_id = instance_id
        self.session_ms = session_ms
        self.assignment: frozenset[int] | None = None
        self.callbacks: list[tuple[str, frozenset[int]]] = []
        self.consumed = 0  # records the client returned
        self.error: BaseException | None = None
        self.closed = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._main, name=f"member-{name}", daemon=True)

    def start(self) -> Member:
        self._thread.start()
        return self

    def stop(self, timeout: float = 30) -> None:
        self._stop.set()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"member {self.name} did not stop within {timeout}s"
        self.check()

    def check(self) -> None:
        if self.error is not None:
            raise AssertionError(f"member {self.name} failed: {self.error!r}") from self.error

    def _record(self, kind: str, partitions: Any) -> None:
        self.callbacks.append((kind, frozenset(tp.partition for tp in partitions)))

    def _main(self) -> None:
        try:
            {"confluent": self._confluent, "aiokafka": lambda: asyncio.run(self._aiokafka()),
             "kafka-python": self._kafka_python}[self.client]()
        except BaseException as exc:  # reported by stop()/check() in the test thread
            self.error = exc
        finally:
            self.closed = True

    # -- the three clients -------------------------------------------------------------

    def _confluent(self) -> None:
        from confluent_kafka import Consumer

        config: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap, "group.id": self.group, "client.id": self.name,
            "partition.assignment.strategy": self.assignor, "session.timeout.ms": self.session_ms,
            "heartbeat.interval.ms": HEARTBEAT_MS, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", **QUIET}
        if self.instance_id is not None:
            config["group.instance.id"] = self.instance_id
        consumer = Consumer(config)
        consumer.subscribe([self.topic],
                           on_assign=lambda _c, ps: self._record("assign", ps),
                           on_revoke=lambda _c, ps: self._record("revoke", ps),
                           on_lost=lambda _c, ps: self._record("lost", ps))
        try:
            while not self._stop.is_set():
                msg = consumer.poll(0.05)
                if msg is not None and not msg.error():
                    self.consumed += 1
                current = frozenset(tp.partition for tp in consumer.assignment())
                if current or self.assignment is not None:
                    self.assignment = current
        finally:
            consumer.close()

    async def _aiokafka(self) -> None:
        from aiokafka import AIOKafkaConsumer
        from aiokafka.abc import ConsumerRebalanceListener

        member = self

        class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
            def on_partitions_revoked(self, revoked: Any) -> None:
                member._record("revoke", revoked)

            def on_partitions_assigned(self, assigned: Any) -> None:
                member._record("assign", assigned)

        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap, group_id=self.group, client_id=self.name,
            group_instance_id=self.instance_id,
            partition_assignment_strategy=(_aiokafka_assignor(self.assignor),),
            session_timeout_ms=self.session_ms, heartbeat_interval_ms=HEARTBEAT_MS,
            enable_auto_commit=False, auto_offset_reset="earliest")
        consumer.subscribe([self.topic], listener=Listener())
        await consumer.start()
        try:
            while not self._stop.is_set():
                batches = await consumer.getmany(timeout_ms=50)
                self.consumed += sum(len(records) for records in batches.values())
                current = frozenset(tp.partition for tp in consumer.assignment())
                if current or self.assignment is not None:
                    self.assignment = current
        finally:
            await consumer.stop()

    def _kafka_python(self) -> None:
        from kafka import ConsumerRebalanceListener, KafkaConsumer

        member = self

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked: Any) -> None:
                member._record("revoke", revoked)

            def on_partitions_assigned(self, assigned: Any) -> None:
                member._record("assign", assigned)

            def on_partitions_lost(self, lost: Any) -> None:
                member._record("lost", lost)

        consumer = KafkaConsumer(
            bootstrap_servers=self.bootstrap, group_id=self.group, client_id=self.name,
            group_instance_id=self.instance_id,
            partition_assignment_strategy=[_kafka_python_assignor(self.assignor)],
            session_timeout_ms=self.session_ms, heartbeat_interval_ms=HEARTBEAT_MS,
            enable_auto_commit=False, auto_offset_reset="earliest")
        kafka_python_subscribe(consumer, self.topic, Listener())
        try:
            while not self._stop.is_set():
                batches = consumer.poll(timeout_ms=50)
                self.consumed += sum(len(records) for records in batches.values())
                current = frozenset(tp.partition for tp in consumer.assignment())
                if current or self.assignment is not None:
                    self.assignment = current
        finally:
            consumer.close()


class KcatMember:
    """``kcat -G GROUP TOPIC`` as a child process, with the same face as ``Member``.

    kcat reports each rebalance on stderr (librdkafka's rebalance callback):
    ``% Group G rebalanced (memberid M): assigned: t [0], t [1]`` / ``revoked: ...`` under
    an eager assignor, ``incremental assignment|revoke of N partition(s) (...): t [2]...``
    under cooperative-sticky; those lines drive ``assignment`` and ``callbacks``. Each
    record is one stdout line (``consumed``). ``stop()`` is SIGTERM: kcat closes its consumer,
    which leaves the group (a static member does not); ``kill()`` is SIGKILL.
    """

    _REBALANCE = re.compile(r"^% Group \S+ rebalanced(?::| \(memberid [^)]*\):) "
                            r"(?:(?P<eager>assigned|revoked):|incremental (?P<coop>assignment|revoke) of)")

    def __init__(self, bootstrap: str, group: str, topic: str, assignor: str, name: str,
                 instance_id: str | None = None, session_ms: int = 6000) -> None:
        assert KCAT is not None, "kcat is not installed"
        self.name = name
        self.topic = topic
        self.instance_id = instance_id
        self.assignment: frozenset[int] | None = None
        self.callbacks: list[tuple[str, frozenset[int]]] = []
        self.consumed = 0
        self.stderr: list[str] = []
        self.closed = False
        self._stopping = False
        # -E: keep running through "all brokers down" (a broker restart), as the clients do;
        # -u: unbuffered output, one line per record as it arrives
        args = [KCAT, "-b", bootstrap, "-G", group, "-E", "-u", "-f", "%p %o\\n",
                "-X", f"client.id={name}", "-X", f"partition.assignment.strategy={assignor}",
                "-X", f"session.timeout.ms={session_ms}", "-X", f"heartbeat.interval.ms={HEARTBEAT_MS}",
                "-X", "auto.offset.reset=earliest", "-X", "log_level=3"]
        if instance_id is not None:
            args += ["-X", f"group.instance.id={instance_id}"]
        self._args = [*args, topic]
        self._process: subprocess.Popen[str] | None = None
        self._threads: list[threading.Thread] = []

    @property
    def pid(self) -> int:
        assert self._process is not None
        return self._process.pid

    def start(self) -> KcatMember:
        self._process = subprocess.Popen(self._args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, text=True, bufsize=1)
        assert self._process.stdout is not None and self._process.stderr is not None
        self._threads = [threading.Thread(target=self._read_stdout, args=(self._process.stdout,), daemon=True),
                         threading.Thread(target=self._read_stderr, args=(self._process.stderr,), daemon=True)]
        for thread in self._threads:
            thread.start()
        return self

    def _read_stdout(self, pipe: IO[str]) -> None:
        for _line in pipe:
            self.consumed += 1

    def _read_stderr(self, pipe: IO[str]) -> None:
        for line in pipe:
            self.stderr.append(line.rstrip("\n"))
            match = self._REBALANCE.match(line)
            if match is None:
                continue
            partitions = frozenset(int(p) for p in re.findall(rf"{re.escape(self.topic)} \[(\d+)\]", line))
            current = self.assignment or frozenset()
            if match["eager"] == "assigned":
                self.callbacks.append(("assign", partitions))
                self.assignment = partitions
            elif match["eager"] == "revoked":
                self.callbacks.append(("revoke", partitions))
                self.assignment = frozenset()
            elif match["coop"] == "assignment":
                self.callbacks.append(("assign", partitions))
                self.assignment = current | partitions
            else:
                self.callbacks.append(("revoke", partitions))
                self.assignment = current - partitions

    def check(self) -> None:
        process = self._process
        if process is not None and not self._stopping and process.poll() is not None:
            tail = "\n".join(self.stderr[-20:])
            raise AssertionError(f"kcat member {self.name} exited with {process.returncode}:\n{tail}")

    def _finish(self, sig: signal.Signals, timeout: float) -> int:
        assert self._process is not None
        self._stopping = True
        if self._process.poll() is None:
            self._process.send_signal(sig)
        code = self._process.wait(timeout)
        for thread in self._threads:
            thread.join(timeout)
        for pipe in (self._process.stdout, self._process.stderr):
            if pipe is not None:
                pipe.close()
        self.closed = True
        return code

    def stop(self, timeout: float = 30) -> None:
        """SIGTERM: kcat closes its consumer cleanly and exits 0."""
        code = self._finish(signal.SIGTERM, timeout)
        assert code == 0, f"kcat member {self.name} exited with {code} on SIGTERM:\n" + "\n".join(self.stderr[-20:])

    def kill(self) -> None:
        """SIGKILL: no LeaveGroup, no commit."""
        self._finish(signal.SIGKILL, 10)


def make_member(client: str, bootstrap: str, group: str, topic: str, assignor: str, name: str,
                instance_id: str | None = None, session_ms: int = 6000) -> Member | KcatMember:
    """A (not yet started) group member of ``client``: one of ``ASSIGNORS``' keys."""
    if client == "kcat":
        return KcatMember(bootstrap, group, topic, assignor, name, instance_id, session_ms)
    return Member(client, bootstrap, group, topic, assignor, name, instance_id, session_ms)


# -- consume n records as a group member, commit, close ------------------------------------

Consumed = list[tuple[int, int, bytes]]  # (partition, offset, value)


def consume_and_commit(client: str, bootstrap: str, group: str, topic: str, count: int,
                       timeout: float = 60) -> Consumed:
    """Join ``group``, take at least ``count`` records (a few at a time), commit what was
    consumed synchronously, and leave. Every record a poll returned counts as consumed."""
    return {"confluent": _confluent_consume, "aiokafka": _aiokafka_consume_sync,
            "kafka-python": _kafka_python_consume, "kcat": _kcat_consume}[client](bootstrap, group, topic, count,
                                                                                timeout)


def _kcat_consume(bootstrap: str, group: str, topic: str, count: int, timeout: float) -> Consumed:
    """``kcat -G -c COUNT``: it exits after COUNT records and commits (auto commit) on close
    the offsets of the records it printed."""
    assert KCAT is not None, "kcat is not installed"
    result = subprocess.run(
        [KCAT, "-b", bootstrap, "-G", group, "-c", str(count), "-q", "-f", "%p %o %s\\n",
         "-X", "auto.offset.reset=earliest", "-X", "session.timeout.ms=6000",
         "-X", f"heartbeat.interval.ms={HEARTBEAT_MS}", "-X", "log_level=3", topic],
        capture_output=True, timeout=timeout, check=False)
    assert result.returncode == 0, f"kcat -G exited {result.returncode}: {result.stderr.decode(errors='replace')}"
    out: Consumed = []
    for line in result.stdout.splitlines():
        partition, offset, value = line.split(b" ", 2)
        out.append((int(partition), int(offset), value))
    return out


def _confluent_consume(bootstrap: str, group: str, topic: str, count: int, timeout: float) -> Consumed:
    from confluent_kafka import Consumer, KafkaException

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
                         "heartbeat.interval.ms": HEARTBEAT_MS, **QUIET})
    out: Consumed = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                raise KafkaException(msg.error())
            out.append((msg.partition(), msg.offset(), msg.value()))
        if out:
            consumer.commit(asynchronous=False)  # the offsets of the records poll() returned
    finally:
        consumer.close()
    return out


def _aiokafka_consume_sync(bootstrap: str, group: str, topic: str, count: int, timeout: float) -> Consumed:
    return asyncio.run(_aiokafka_consume(bootstrap, group, topic, count, timeout))


async def _aiokafka_consume(bootstrap: str, group: str, topic: str, count: int, timeout: float) -> Consumed:
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                                auto_offset_reset="earliest", session_timeout_ms=6000,
                                heartbeat_interval_ms=HEARTBEAT_MS)
    await consumer.start()
    out: Consumed = []
    try:
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout_ms=200, max_records=4)).values():
                out.extend((r.partition, r.offset, r.value) for r in records)
        if out:
            await consumer.commit()  # the positions after the records getmany() returned
    finally:
        await consumer.stop()
    return out


def _kafka_python_consume(bootstrap: str, group: str, topic: str, count: int, timeout: float) -> Consumed:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                             auto_offset_reset="earliest", session_timeout_ms=6000,
                             heartbeat_interval_ms=HEARTBEAT_MS)
    out: Consumed = []
    try:
        kafka_python_subscribe(consumer, topic)
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200, max_records=4).values():
                out.extend((r.partition, r.offset, r.value) for r in records)
        if out:
            consumer.commit()  # the offsets of the records poll() returned
    finally:
        consumer.close()
    return out
