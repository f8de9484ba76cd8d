"""``make demo`` (``python -m streamkit.demo``) end to end: it runs, within about a minute,
and shows a stream app's results, exact, next to the broker and log tours."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.apps.harness import REPO

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def test_demo_shows_stream_processing_results(tmp_path: Path) -> None:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "streamkit.demo", str(tmp_path / "demo")], cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=150)
    elapsed = time.monotonic() - started
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert elapsed < 90, f"the demo took {elapsed:.0f}s"
    for tour in ("the broker", "stream processing", "the partition log"):
        assert f"streamkit demo: {tour}" in out
    # Final windowed counts per page and minute (every 10th view is a filtered /health check).
    for page, n in (("/home", 200), ("/cart", 200), ("/checkout", 200), ("/search", 100), ("/help", 200)):
        assert re.search(rf"{re.escape(page)}\s+minute 0: {n}\s+minute 1: {n}\s+minute 2: {n}\n", out), out
    assert "windowed counts match the counts computed from the input (0 late records)" in out
    # Interactive queries over HTTP: the agent's table and the windowed aggregation's state.
    assert "GET /tables/views_per_page/%2Fcart -> 200 {'key': '/cart', 'value': 601}" in out
    assert re.search(r"GET /tables/page_counts/%2Fcart -> 200, 4 windows .*\[0, 60000\) ms: 200", out), out
