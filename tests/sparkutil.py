"""One local SparkSession for the whole test session (starting one costs 10-30 s).

``spark_session()`` returns the same cached session on every call: local[2], UI off, one
shuffle partition per core, so any test module can share it. The session stops when the
test session ends (``stop_spark_session``, called from tests/conftest.py), JVM included.
"""

from __future__ import annotations

import functools
import warnings
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["spark_session", "stop_spark_session"]


@functools.cache
def spark_session() -> SparkSession:
    with warnings.catch_warnings():
        # pyspark checks the pandas version on import and warns about pandas 3
        warnings.simplefilter("ignore", FutureWarning)
        from streamkit.spark.session import start_local_session

        return start_local_session("streamkit-tests", config={
            "spark.default.parallelism": "2", "spark.driver.memory": "1g",
            "spark.sql.session.timeZone": "UTC"})


def stop_spark_session() -> None:
    """Stop the shared session and its JVM, if one was started (at the end of the tests)."""
    if spark_session.cache_info().currsize == 0:
        return
    from streamkit.spark.session import stop_jvm

    spark_session().stop()
    stop_jvm()
    spark_session.cache_clear()
