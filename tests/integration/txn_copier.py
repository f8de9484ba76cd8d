"""A transactional copier after Kafka's TransactionalMessageCopier, run as a subprocess by
tests/integration/test_transactions.py (which SIGKILLs it, or the broker, at random points).

    python txn_copier.py BOOTSTRAP INPUT OUTPUT TRANSACTIONAL_ID GROUP BATCH PAUSE_MS

It copies every record of INPUT to the same partition of OUTPUT, one transaction per polled
batch, with the consumed positions committed inside the transaction
(send_offsets_to_transaction); it reads read_committed and resumes from the group's
committed offsets. It waits PAUSE_MS inside each transaction (so that a kill often lands
between the produce and the commit). It exits 0 once every input partition is copied up to the end offsets it
saw at start, and 1 on any error: the harness just starts it again (crash-only), and the new
instance's init_transactions fences the old one and aborts its open transaction. A watchdog
ends it (exit 3) when no transaction completes for WATCHDOG_S: after a broker restart
librdkafka 2.x's send_offsets_to_transaction sometimes waits for ever on a coordinator
request (confluentinc/librdkafka#5456: that request's timeout is never checked; #5511: its
state machine is not re-triggered once the cached coordinator is gone), and a crash-only
copier treats a stuck client like any other failure.
"""

from __future__ import annotations

import os
import sys
import threading
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

WATCHDOG_S = 8.0


class Watchdog:
    def __init__(self) -> None:
        self.last = time.monotonic()
        threading.Thread(target=self._run, daemon=True).start()

    def progress(self) -> None:
        self.last = time.monotonic()

    def _run(self) -> None:
        while True:
            time.sleep(1)
            if time.monotonic() - self.last > WATCHDOG_S:
                print(f"copier stuck for {WATCHDOG_S}s; exiting", file=sys.stderr, flush=True)
                os._exit(3)


def main(bootstrap: str, source: str, sink: str, txn_id: str, group: str, batch: int, pause_ms: int) -> int:
    quiet = {"log_level": 0} if not os.environ.get("COPIER_DEBUG") else {"debug": os.environ["COPIER_DEBUG"]}
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                         "transaction.timeout.ms": 6_000, "linger.ms": 5, **quiet})
    watchdog = Watchdog()
    producer.init_transactions(30)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest", **quiet})
    try:
        metadata = consumer.list_topics(source, timeout=30).topics[source]
        partitions = sorted(metadata.partitions)
        ends = {p: consumer.get_watermark_offsets(TopicPartition(source, p), timeout=30)[1] for p in partitions}
        committed = consumer.committed([TopicPartition(source, p) for p in partitions], timeout=30)
        positions = {tp.partition: max(tp.offset, 0) for tp in committed}
        consumer.assign([TopicPartition(source, p, positions[p]) for p in partitions])
        while any(positions[p] < ends[p] for p in partitions):
            messages = consumer.consume(batch, timeout=1.0)
            if not messages:
                watchdog.progress()  # idle is not stuck
                continue
            producer.begin_transaction()
            for msg in messages:
                if msg.error():
                    raise KafkaException(msg.error())
                producer.produce(sink, key=msg.key(), value=msg.value(), partition=msg.partition())
                positions[msg.partition()] = msg.offset() + 1
            producer.flush(30)
            time.sleep(pause_ms / 1000)
            offsets = [TopicPartition(source, p, positions[p]) for p in partitions]
            producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 30)
            producer.commit_transaction(30)
            watchdog.progress()
            print("committed", flush=True)  # the harness counts these to time its kills
        return 0
    finally:
        consumer.close()


if __name__ == "__main__":
    try:
        sys.exit(main(*sys.argv[1:6], int(sys.argv[6]), int(sys.argv[7])))
    except KafkaException as exc:
        print(f"copier failed: {exc}", file=sys.stderr)
        sys.exit(1)
