"""A local SparkSession for tests, benchmarks and one-machine use, stopped completely.

``local_session()`` returns the session; ``with local_session() as spark:`` stops it on
exit. Spark's Python workers (which run the data source's ``read`` and ``write``) start
``PYSPARK_PYTHON``, by default the ``python3`` on the PATH, which may not be the
environment streamkit is installed in; ``local_session`` points them at this interpreter.
"""

from __future__ import annotations

import os
import sys
from typing import cast

from pyspark.sql import SparkSession

from streamkit.spark.jvm import start_jvm, stop_jvm
from streamkit.spark.source import register

__all__ = ["LocalSession", "local_session"]


class LocalSession(SparkSession):
    """A SparkSession whose ``stop()`` (and so the end of a ``with`` block) also ends the
    gateway JVM: ``SparkSession.stop()`` alone leaves it running until Python exits."""

    def stop(self) -> None:
        """Stop the session, then its gateway JVM."""
        super().stop()
        stop_jvm()


def local_session(app_name: str = "streamkit", *, cores: int = 2, shuffle_partitions: int = 2,
                  config: dict[str, str] | None = None) -> LocalSession:
    """A ``local[cores]`` session with the UI off, this interpreter for Spark's Python
    workers, ``format("streamkit")`` registered, and Spark's start-up noise kept out of the
    terminal (``streamkit.spark.jvm``). Use it directly, or as ``with local_session() as
    spark:`` to stop it and its JVM at the end. A session already running in this process is
    returned (and stopped) as it is, with the source registered."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    settings = {"spark.master": f"local[{cores}]", "spark.app.name": app_name, "spark.ui.enabled": "false",
                "spark.ui.showConsoleProgress": "false", "spark.sql.shuffle.partitions": str(shuffle_partitions),
                "spark.pyspark.python": sys.executable, **(config or {})}
    start_jvm(settings)
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    # The builder makes a plain SparkSession; this one's stop() also ends the JVM.
    spark.__class__ = LocalSession
    register(spark)
    return cast(LocalSession, spark)
