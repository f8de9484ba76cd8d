"""One local SparkSession for the whole test session (starting one costs 10-30 s).

``spark_session()`` returns the same cached session on every call: local[2], UI off, one
shuffle partition per core, so any test module can share it. The session stops when the
test session ends (``stop_spark_session``, called from tests/conftest.py), JVM included.
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["SPARK_NOISE", "spark_session", "stop_spark_session"]

# What Spark and its JVM print when left to their defaults: log4j's banner and WARN lines
# (NativeCodeLoader, Utils' hostname notice...), the "Setting default log level" banner,
# the JVM's incubator-module notice, and pyspark's FutureWarning about pandas 3.
SPARK_NOISE = re.compile(r"log4j|Setting default log level|To adjust logging level|NativeCodeLoader|"
                         r"Using incubator modules|FutureWarning|PySpark does not yet|\bWARN\b")


@functools.cache
def spark_session() -> SparkSession:
    from streamkit.spark.session import local_session

    return local_session("streamkit-tests", config={
        "spark.default.parallelism": "2", "spark.driver.memory": "1g", "spark.sql.session.timeZone": "UTC"})


def stop_spark_session() -> None:
    """Stop the shared session and its JVM, if one was started (at the end of the tests)."""
    if spark_session.cache_info().currsize == 0:
        return
    spark_session().stop()
    spark_session.cache_clear()
