"""A local SparkSession for tests, benchmarks and one-machine use, stopped completely.

Spark's Python workers (which run the data source's ``read`` and ``write``) start
``PYSPARK_PYTHON``, by default the ``python3`` on the PATH, which may not be the
environment streamkit is installed in; ``local_session`` points them at this interpreter.
On exit it stops the session *and* the JVM behind it: ``SparkSession.stop()`` alone leaves
the gateway JVM running until the Python process ends.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator

from pyspark import SparkContext
from pyspark.sql import SparkSession

from streamkit.spark.source import register

__all__ = ["local_session", "start_local_session", "stop_jvm"]


def start_local_session(app_name: str = "streamkit", *, cores: int = 2, shuffle_partitions: int = 2,
                        config: dict[str, str] | None = None) -> SparkSession:
    """A ``local[cores]`` session with the UI off, this interpreter for Spark's Python
    workers and ``format("streamkit")`` registered; the caller stops it (``stop_jvm`` too).
    A session already running in this process is returned as it is, with the source
    registered."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (SparkSession.builder.master(f"local[{cores}]").appName(app_name)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
               .config("spark.pyspark.python", sys.executable))
    for key, value in (config or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


@contextlib.contextmanager
def local_session(app_name: str = "streamkit", *, cores: int = 2, shuffle_partitions: int = 2,
                  config: dict[str, str] | None = None) -> Iterator[SparkSession]:
    """``start_local_session``, stopped with its JVM on exit."""
    spark = start_local_session(app_name, cores=cores, shuffle_partitions=shuffle_partitions, config=config)
    try:
        yield spark
    finally:
        spark.stop()
        stop_jvm()


def stop_jvm(timeout_s: float = 60) -> None:
    """End the gateway JVM that PySpark started (after ``SparkSession.stop()``)."""
    gateway = SparkContext._gateway
    if gateway is None:
        return
    proc: subprocess.Popen[bytes] | None = getattr(gateway, "proc", None)
    gateway.shutdown()
    SparkContext._gateway = None
    SparkContext._jvm = None
    if proc is None:
        return
    if proc.stdin is not None:
        proc.stdin.close()  # the JVM exits when its stdin closes
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        proc.terminate()
        proc.wait(timeout_s)
