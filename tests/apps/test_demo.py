"""``make demo`` (``python -m streamkit.demo``) end to end: the whole pipeline (file source
connector -> stream app -> Spark sink connector -> Spark) runs, its top pages equal a batch
computation of the input it generated, its summary's numbers are those of that input, and
the terminal shows none of the JVM's and Spark's start-up noise; the three tours (``--tour
all``) still show their exact results, and explain them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from streamkit.connect.spark import committed_files
from tests.apps.harness import REPO
from tests.sparkutil import SPARK_NOISE

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

WINDOW_MS, GRACE_MS = 60_000, 10_000


def _run_demo(*args: str, timeout: float = 200) -> subprocess.CompletedProcess[str]:
    """The demo as a user runs it: its own process (and its own SparkSession, not the tests')."""
    return subprocess.run([sys.executable, "-m", "streamkit.demo", *args], cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
                          timeout=timeout)


def _demo(*args: str, timeout: float = 200) -> str:
    done = _run_demo(*args, timeout=timeout)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    return out


def _batch_counts(jsonl: Path) -> dict[tuple[str, int], int]:
    """Views per (page, minute) for the windows the input closes (stream time past the end
    plus grace), health checks filtered: what the demo's app must emit."""
    views = [json.loads(line) for line in jsonl.read_text().splitlines()]
    stream_time = max(v["ts"] for v in views)
    counts: Counter[tuple[str, int]] = Counter()
    for v in views:
        start = v["ts"] - v["ts"] % WINDOW_MS
        if v["page"] != "/health" and start + WINDOW_MS + GRACE_MS <= stream_time:
            counts[(v["page"], start)] += 1
    return dict(counts)


def test_demo_runs_the_whole_pipeline_and_spark_top_pages_equal_a_batch_computation(tmp_path: Path) -> None:
    out = _demo(str(tmp_path / "demo"))
    assert "streamkit demo: the whole pipeline" in out
    assert re.search(r"web console: http://127\.0\.0\.1:\d+ ", out), out
    assert not [line for line in out.splitlines() if SPARK_NOISE.search(line)], out
    root = tmp_path / "demo" / "pipeline"
    jsonl = root / "input" / "page_views.jsonl"
    views = [json.loads(line) for line in jsonl.read_text().splitlines()]
    rows, closing_ts = len(views), max(v["ts"] for v in views)
    closing = sum(1 for v in views if v["ts"] == closing_ts)
    health = sum(1 for v in views if v["page"] == "/health")
    assert (rows, closing, health) == (300_040, 40, 12_000)  # the README's numbers
    assert (f"generated {rows:,} page views (JSON Lines) in {jsonl}: {rows - closing:,} over 60 minutes of event "
            f"time on {closing} pages, every 25th a /health check, then {closing} ten minutes later, one per page, "
            "to close the last windows") in out
    expected = _batch_counts(jsonl)
    for bar, done in (("ingestion", rows), ("processing", len(expected)), ("export", len(expected))):
        assert re.search(rf"{bar}\s.*\s{done}/{done}\s", out), out

    totals: Counter[str] = Counter()
    for (page, _start), n in expected.items():
        totals[page] += n
    top = sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
    printed = re.findall(r"│ (/\S+)\s+│\s+([\d,]+) │\s+(\d+) │\s+([\d,]+) │\s+([\d,]+) │", out)
    assert [(page, int(views.replace(",", ""))) for page, views, *_ in printed] == top, out
    assert "top pages match the batch computation of the input (0 late records)" in out
    assert f"{rows:,} page views ingested -> {len(expected):,} windowed counts -> {len(expected):,} rows" in out
    assert (f"micro-batches, {sum(expected.values()):,} views (the {health:,} /health checks filtered; the closing "
            "views' windows stay open)") in out

    # The exported table, read without Spark: exactly one row per closed window, exact counts.
    table = pq.ParquetDataset([str(p) for p in committed_files(root / "tables" / "page_counts")]).read()
    exported = {(r["page"], r["window_start"]): r["views"] for r in table.to_pylist()}
    assert table.num_rows == len(expected) and exported == expected


@pytest.mark.timeout(420)
def test_the_secured_demo_runs_against_a_sasl_ssl_broker_with_acls(tmp_path: Path) -> None:
    """``--secure``: the broker has only a SASL_SSL listener and ACLs; Connect and the app log
    in as their own users, Connect's REST API and the app's web endpoints are https with
    basic auth; the result is the same exact one."""
    out = _demo(str(tmp_path / "demo"), "--secure", timeout=400)
    assert "ACLs on: connect and pipeline may use only their topics and groups" in out, out
    assert re.search(r"Connect worker on https://127\.0\.0\.1:\d+ ", out), out
    assert "top pages match the batch computation of the input (0 late records)" in out, out
    root = tmp_path / "demo" / "pipeline"
    expected = _batch_counts(root / "input" / "page_views.jsonl")
    table = pq.ParquetDataset([str(p) for p in committed_files(root / "tables" / "page_counts")]).read()
    assert {(r["page"], r["window_start"]): r["views"] for r in table.to_pylist()} == expected


def test_a_demo_past_its_timeout_says_how_far_each_stage_got_in_one_line_and_exits_1(tmp_path: Path) -> None:
    """``--timeout 1``: the pipeline cannot export 300,040 views' counts in a second. The demo
    says so in one line (how far ingestion, processing and export got), exits 1, and goes
    on neither to Spark's summary (no error of Spark's on an empty or partial table) nor
    to a traceback."""
    done = _run_demo(str(tmp_path / "demo"), "--timeout", "1")
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, out
    assert re.fullmatch(r"error: the pipeline did not finish within its timeout of 1 s: ingested [\d,]+/300,040 "
                        r"page views, processed [\d,]+/2,400 final counts, exported [\d,]+/2,400 rows "
                        r"\(a loaded machine may need longer: --timeout SECONDS\)", errors[0]), out
    assert "Traceback" not in out, out
    assert "top pages" not in out and "UNRESOLVED_COLUMN" not in out, out
    assert not [line for line in out.splitlines() if SPARK_NOISE.search(line) or "ERROR" in line], out


def test_demo_tours_show_stream_processing_results(tmp_path: Path) -> None:
    out = _demo(str(tmp_path / "demo"), "--tour", "all")
    for tour in ("the broker", "stream processing", "the partition log"):
        assert f"streamkit demo: {tour}" in out
    # Final windowed counts per page and minute (every 10th view is a filtered /health check).
    for page, n in (("/home", 200), ("/cart", 200), ("/checkout", 200), ("/search", 100), ("/help", 200)):
        assert re.search(rf"{re.escape(page)}\s+minute 0: {n}\s+minute 1: {n}\s+minute 2: {n}\n", out), out
    assert "windowed counts match the counts computed from the input (0 late records)" in out
    # The views that close the windows, and the window they open, are explained.
    assert ("produced 3,000 page views over 3 minutes of event time (every 10th a /health check), then 5 at "
            "minute 10, one per page: they move each page's stream time past the first windows' end and grace "
            "period, so those windows close") in out
    # Interactive queries over HTTP: the agent's table and the windowed aggregation's state.
    assert ("GET /tables/views_per_page/%2Fcart -> 200 {'key': '/cart', 'value': 601} (every view of /cart, the "
            "one at minute 10 included)") in out
    assert ("GET /tables/page_counts/%2Fcart -> 200, 4 windows: 3 closed (kept until they expire, an hour later), "
            "and 1 still open, the closing view's: [0, 60000) ms: 200, [60000, 120000) ms: 200, "
            "[120000, 180000) ms: 200, [600000, 660000) ms: 1") in out
