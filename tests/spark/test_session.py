"""``local_session()``: a SparkSession to use directly or in ``with``, stopped with its JVM,
and quiet; ``register()`` says what it takes; a missing topic is one plain error."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from pyspark.sql import SparkSession

from streamkit.analytics.planning import PlanError
from streamkit.spark import read_table, read_topic, register
from streamkit.testing import BrokerThread
from tests.apps.harness import REPO
from tests.spark.local_session_run import WORKER_LINE
from tests.sparkutil import SPARK_NOISE


@pytest.mark.integration
@pytest.mark.timeout(240)
def test_local_session_is_a_session_and_a_context_manager_that_stop_the_jvm_quietly() -> None:
    done = subprocess.run([sys.executable, "-m", "tests.spark.local_session_run"], cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=200)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    assert report == {"direct_is_session": True, "direct_rows": 5, "direct_jvm_exit": 0,
                      "with_rows": 3, "with_jvm_exit": 0, "with_session_left": False}
    output = (done.stdout + done.stderr).splitlines()
    assert not [line for line in output if SPARK_NOISE.search(line)], done.stderr
    # Quiet, not deaf: what the JVM passes on from Spark's Python workers still shows.
    assert WORKER_LINE in output, done.stderr


def test_register_says_what_it_takes(spark: SparkSession) -> None:
    with pytest.raises(TypeError, match=r"^register\(\) takes a SparkSession \(e\.g\. SparkSession\.builder\."
                                        r"getOrCreate\(\) or streamkit\.spark\.local_session\(\)\), not "
                                        r"pyspark\.core\.context\.SparkContext$"):
        register(spark.sparkContext)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"not str$"):
        register("local[2]")  # type: ignore[arg-type]


def test_a_missing_topic_is_one_plain_error(spark: SparkSession, broker: BrokerThread) -> None:
    with pytest.raises(PlanError) as raised:
        read_topic(spark, "nosuch_topic", bootstrap=broker.bootstrap)
    assert str(raised.value) == "topic(s) nosuch_topic do not exist"
    with pytest.raises(PlanError) as raised:
        read_table(spark, "no-app", "counts", bootstrap=broker.bootstrap)
    assert str(raised.value) == "topic(s) no-app-counts-changelog do not exist"
