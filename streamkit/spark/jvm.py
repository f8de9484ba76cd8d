"""PySpark's gateway JVM, started quietly and stopped completely.

``start_jvm(conf)`` launches the JVM that every SparkSession of this process then uses,
the way PySpark does on the first ``getOrCreate()``, but without the noise a user cannot act
on:

* Spark logs through ``log4j2.properties`` (next to this module): errors only, and no
  "Setting default log level" banner (the gateway's logger is configured, so Spark keeps
  its level instead of announcing WARN);
* the JVM's stderr passes through a thread that drops the JVM's own start-up notice
  ("WARNING: Using incubator modules", which no log setting controls) and forwards every
  other line, Spark's errors and its Python workers' output included, to ``sys.stderr``;
* this process ignores pyspark's FutureWarning about pandas 3, which pyspark repeats on
  every Arrow use (a warnings filter; Spark's Python workers do not print it).

``stop_jvm()`` ends it after ``SparkSession.stop()``, which alone leaves the JVM running
until the Python process exits.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import IO

from pyspark import SparkConf, SparkContext
from pyspark.java_gateway import launch_gateway

__all__ = ["LOG4J2_PROPERTIES", "PANDAS_WARNING", "start_jvm", "stop_jvm"]

LOG4J2_PROPERTIES = Path(__file__).with_name("log4j2.properties")
# The start of pyspark's warning (a warnings filter matches the start of a message).
PANDAS_WARNING = "PySpark does not yet fully support pandas"
_JVM_NOTICES = (b"WARNING: Using incubator modules:",)
_forwarder: threading.Thread | None = None  # copies the running JVM's stderr


def start_jvm(conf: Mapping[str, str] | None = None) -> bool:
    """Launch the gateway JVM with ``conf`` (passed to ``spark-submit``, so driver settings
    such as ``spark.driver.memory`` apply) unless one runs already; True if this call
    launched it. Sessions created afterwards (``SparkSession.builder.getOrCreate()``) use it."""
    global _forwarder
    warnings.filterwarnings("ignore", message=PANDAS_WARNING, category=FutureWarning)
    with SparkContext._lock:
        if SparkContext._gateway is not None:
            return False
        spark_conf = SparkConf(loadDefaults=False).setAll(list(_quiet_conf(conf or {}).items()))
        gateway = launch_gateway(spark_conf, popen_kwargs={"stderr": subprocess.PIPE})  # type: ignore[no-untyped-call]
        SparkContext._gateway = gateway
        SparkContext._jvm = gateway.jvm
    proc: subprocess.Popen[bytes] | None = getattr(gateway, "proc", None)
    if proc is not None and proc.stderr is not None:
        _forwarder = threading.Thread(target=_forward, args=(proc.stderr,), name="spark-jvm-stderr", daemon=True)
        _forwarder.start()
    return True


def _quiet_conf(conf: Mapping[str, str]) -> dict[str, str]:
    """``conf`` plus the log4j2 configuration, unless the caller names one."""
    out = dict(conf)
    java_options = out.get("spark.driver.extraJavaOptions", "")
    if "log4j2.configurationFile" not in java_options:
        out["spark.driver.extraJavaOptions"] = (
            f"{java_options} -Dlog4j2.configurationFile=file:{LOG4J2_PROPERTIES}".strip())
    return out


def _forward(stream: IO[bytes]) -> None:
    """Copy the JVM's stderr to ``sys.stderr`` line by line, without its start-up notices,
    until the JVM closes it."""
    with stream:
        for line in stream:
            if line.startswith(_JVM_NOTICES):
                continue
            try:
                sys.stderr.write(line.decode(errors="replace"))
                sys.stderr.flush()
            except (OSError, ValueError):  # stderr closed (interpreter exit): keep draining the pipe
                pass


def stop_jvm(timeout_s: float = 60) -> None:
    """End the gateway JVM that PySpark started (after ``SparkSession.stop()``), once its
    last words are on stderr."""
    global _forwarder
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
    if _forwarder is not None:
        _forwarder.join(timeout_s)
        _forwarder = None

