"""One local SparkSession for the whole test session (starting one costs 10-30 s).

``spark_session()`` returns the same cached session on every call: local[2], UI off, one
shuffle partition per core, so any test module can share it. The session stops when the
interpreter exits (Spark's own atexit hook), so no fixture owns its lifetime.
"""

from __future__ import annotations

import functools
import warnings
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["spark_session"]


@functools.cache
def spark_session() -> SparkSession:
    with warnings.catch_warnings():
        # pyspark checks the pandas version on import and warns about pandas 3
        warnings.simplefilter("ignore", FutureWarning)
        from pyspark.sql import SparkSession

        return (SparkSession.builder.master("local[2]").appName("streamkit-tests")
                .config("spark.ui.enabled", "false")
                .config("spark.sql.shuffle.partitions", "2")
                .config("spark.default.parallelism", "2")
                .config("spark.driver.memory", "1g")
                .config("spark.sql.session.timeZone", "UTC")
                .getOrCreate())
