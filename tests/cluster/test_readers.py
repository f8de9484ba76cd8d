"""The Spark and Dask readers on a cluster: given the list of every broker with a dead one
first, they read a replicated topic whole after that broker's partitions moved to new
leaders (the CLI, worker and Connect are shown doing the same in test_observability and
test_pipeline)."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from streamkit.dask import read_topic as dask_read_topic
from streamkit.testing_cluster import BrokerCluster

from .workload import create_topic, eventually, isr

# A SparkSession may take minutes to start on a loaded 2-core machine.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

CLUSTER_CONFIG = {"replica.lag.time.max.ms": "2000", "min.insync.replicas": "2"}
RECORDS = 300


def _write(bootstrap: str, topic: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    failed: list[object] = []
    for i in range(RECORDS):
        producer.produce(topic, f"v{i}".encode(), key=str(i).encode(),
                         on_delivery=lambda err, _msg: err is not None and failed.append(err))
    assert producer.flush(60) == 0 and not failed, failed


def _after_a_broker_died(cluster: BrokerCluster, topic: str) -> str:
    create_topic(cluster.bootstrap, topic, partitions=3, replication=3)
    _write(cluster.bootstrap, topic)
    cluster.kill(0)
    eventually(lambda: all(0 not in isr(cluster[1].bootstrap, topic, p) for p in range(3)),
               "broker 0 out of every ISR (its leaderships moved)", timeout=60)
    return cluster.bootstrap  # broker 0's address first


def test_the_dask_reader_reads_everything_past_a_dead_broker(cluster: BrokerCluster) -> None:
    bootstrap = _after_a_broker_died(cluster, "dask-failover")
    frame = dask_read_topic(bootstrap, "dask-failover").compute()
    assert sorted(frame["value"].map(bytes.decode)) == sorted(f"v{i}" for i in range(RECORDS))


def test_the_spark_reader_reads_everything_past_a_dead_broker(cluster: BrokerCluster) -> None:
    from streamkit.spark import read_topic as spark_read_topic
    from tests.sparkutil import spark_session

    bootstrap = _after_a_broker_died(cluster, "spark-failover")
    rows = spark_read_topic(spark_session(), "spark-failover", bootstrap=bootstrap).collect()
    assert sorted(bytes(r["value"]).decode() for r in rows) == sorted(f"v{i}" for i in range(RECORDS))
