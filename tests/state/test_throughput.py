"""Restore throughput, with a deliberately loose bound (CI machines vary and are shared);
``restore_bench`` measures it properly."""

from __future__ import annotations

import pytest

from tests.state.conftest import BACKENDS
from tests.state.restore_bench import changelog, measure_restore

RECORDS = changelog(100_000)


@pytest.mark.parametrize("kind", BACKENDS)
def test_restore_throughput(kind: str, capsys: pytest.CaptureFixture[str]) -> None:
    rate = measure_restore(kind, RECORDS, repeats=2)
    with capsys.disabled():
        print(f"\nrestore into {kind}: {rate:,.0f} records/s")
    assert rate > 50_000
