"""``make demo`` (``python -m streamkit.demo``) end to end: the whole pipeline (file source
connector -> stream app -> Spark sink connector -> Spark) runs within about a minute and a
half and its top pages equal a batch computation of the input it generated; the three tours
(``--tour all``) still show their exact results."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from streamkit.connect.spark import committed_files
from tests.apps.harness import REPO

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

WINDOW_MS, GRACE_MS = 60_000, 10_000


def _demo(*args: str) -> tuple[str, float]:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "streamkit.demo", *args], cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=200)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    return out, time.monotonic() - started


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
    out, elapsed = _demo(str(tmp_path / "demo"))
    assert elapsed < 90, f"the demo took {elapsed:.0f}s"
    assert "streamkit demo: the whole pipeline" in out
    root = tmp_path / "demo" / "pipeline"
    jsonl = root / "input" / "page_views.jsonl"
    rows = len(jsonl.read_text().splitlines())
    assert rows > 200_000
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

    # The exported table, read without Spark: exactly one row per closed window, exact counts.
    table = pq.ParquetDataset([str(p) for p in committed_files(root / "tables" / "page_counts")]).read()
    exported = {(r["page"], r["window_start"]): r["views"] for r in table.to_pylist()}
    assert table.num_rows == len(expected) and exported == expected


def test_demo_tours_show_stream_processing_results(tmp_path: Path) -> None:
    out, _elapsed = _demo(str(tmp_path / "demo"), "--tour", "all")
    for tour in ("the broker", "stream processing", "the partition log"):
        assert f"streamkit demo: {tour}" in out
    # Final windowed counts per page and minute (every 10th view is a filtered /health check).
    for page, n in (("/home", 200), ("/cart", 200), ("/checkout", 200), ("/search", 100), ("/help", 200)):
        assert re.search(rf"{re.escape(page)}\s+minute 0: {n}\s+minute 1: {n}\s+minute 2: {n}\n", out), out
    assert "windowed counts match the counts computed from the input (0 late records)" in out
    # Interactive queries over HTTP: the agent's table and the windowed aggregation's state.
    assert "GET /tables/views_per_page/%2Fcart -> 200 {'key': '/cart', 'value': 601}" in out
    assert re.search(r"GET /tables/page_counts/%2Fcart -> 200, 4 windows .*\[0, 60000\) ms: 200", out), out
