"""Run by test_session.py in a process of its own, since ``local_session()`` starts and
stops a JVM (the test session shares one that must stay up): the session used directly,
then as a context manager. Prints what it saw as one JSON line; a Spark Python worker
writes a line to stderr, which must reach this process's stderr."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

from pyspark import SparkContext
from pyspark.sql import SparkSession

from streamkit.spark import local_session

WORKER_LINE = "a line from a Spark Python worker"


def _passthrough(batches: Iterator[Any]) -> Iterator[Any]:
    print(WORKER_LINE, file=sys.stderr, flush=True)
    yield from batches


def _jvm() -> Any:
    assert SparkContext._gateway is not None
    return SparkContext._gateway.proc


def main() -> None:
    report: dict[str, Any] = {}
    spark = local_session("direct", cores=1)
    jvm = _jvm()
    report["direct_is_session"] = isinstance(spark, SparkSession)
    # An Arrow use: pyspark warns about pandas 3 in this process and in its workers.
    report["direct_rows"] = spark.range(5).mapInArrow(_passthrough, "id long").count()
    spark.stop()
    report["direct_jvm_exit"] = jvm.poll()
    with local_session("with", cores=1) as spark:
        jvm = _jvm()
        report["with_rows"] = spark.range(3).count()
    report["with_jvm_exit"] = jvm.poll()
    report["with_session_left"] = SparkSession.getActiveSession() is not None
    print(json.dumps(report))


if __name__ == "__main__":
    main()
