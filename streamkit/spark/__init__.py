"""streamkit for PySpark: the ``streamkit`` data source and typed helpers.

::

    import streamkit.spark
    spark = streamkit.spark.local_session()  # or any SparkSession, then:
    streamkit.spark.register(spark)          # once per SparkSession
    df = (spark.read.format("streamkit")
          .option("kafka.bootstrap.servers", "localhost:9092")
          .option("subscribe", "page_views").load())

Options and columns are those of Spark's Kafka source (see ``streamkit.spark.source``).
``read_topic`` parses JSON values into the typed columns of a pydantic model, and
``read_table`` returns a streams app's table as of now, from its changelog.
"""

from streamkit.spark.helpers import read_table, read_topic, spark_schema
from streamkit.spark.jvm import start_jvm, stop_jvm
from streamkit.spark.session import LocalSession, local_session
from streamkit.spark.source import StreamkitDataSource, record_schema, register

__all__ = ["LocalSession", "StreamkitDataSource", "local_session", "read_table", "read_topic", "record_schema",
           "register", "spark_schema", "start_jvm", "stop_jvm"]
