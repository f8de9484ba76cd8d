"""Key layouts: bytewise order must equal the order range scans promise."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamkit.state import (
    decode_int64,
    encode_int64,
    next_prefix,
    parse_prefix_key,
    parse_window_expiry_key,
    parse_window_key,
    prefix_key,
    prefix_range,
    window_expiry_key,
    window_key,
)
from streamkit.state.serialization import INT64_MAX, INT64_MIN

int64 = st.integers(min_value=INT64_MIN, max_value=INT64_MAX)
EDGE_TIMES = [
    INT64_MIN,
    INT64_MIN + 1,
    -(2**40),
    -1_700_000_000_000,
    -1,
    0,
    1,
    1_700_000_000_000,
    2**53,
    INT64_MAX - 1,
    INT64_MAX,
]


@given(int64, int64)
def test_int64_order_is_numeric_order(a: int, b: int) -> None:
    assert (encode_int64(a) < encode_int64(b)) == (a < b)
    assert decode_int64(encode_int64(a)) == a


@pytest.mark.parametrize("n", [INT64_MIN - 1, INT64_MAX + 1, 2**70])
def test_int64_out_of_range(n: int) -> None:
    with pytest.raises(ValueError):
        encode_int64(n)
    with pytest.raises(ValueError):
        window_key(b"k", n, 0)
    with pytest.raises(ValueError):
        window_expiry_key(b"k", 0, n)


def test_window_keys_order_by_start_with_negative_and_large_timestamps() -> None:
    windows = [(s, e) for s in EDGE_TIMES for e in EDGE_TIMES if s <= e]
    shuffled = sorted(windows, key=lambda w: window_key(b"key", *w))
    assert shuffled == sorted(windows)  # (start, end) numeric order
    for start, end in windows:
        assert parse_window_key(window_key(b"key", start, end)) == (b"key", start, end)


def test_expiry_keys_order_by_end_first() -> None:
    entries = [
        (k, s, e) for k in (b"", b"a", b"b\xff") for s in EDGE_TIMES[::3] for e in EDGE_TIMES
    ]
    by_key = sorted(entries, key=lambda w: window_expiry_key(*w))
    assert [e for _, _, e in by_key] == sorted(e for _, _, e in entries)
    for key, start, end in entries:
        assert parse_window_expiry_key(window_expiry_key(key, start, end)) == (key, start, end)


@given(st.binary(max_size=20), st.binary(max_size=20), int64, int64, int64, int64)
def test_one_keys_windows_are_contiguous(
    k1: bytes, k2: bytes, s1: int, e1: int, s2: int, e2: int
) -> None:
    # Another key never sorts between two windows of the same key, even when one key is a
    # prefix of the other (the length field separates them).
    a, b = sorted([window_key(k1, s1, e1), window_key(k1, s2, e2)])
    other = window_key(k2, s1, e2)
    if k1 != k2:
        assert not (a < other < b)


@given(st.binary(max_size=8), st.binary(max_size=8), st.binary(max_size=8))
def test_prefix_range_holds_exactly_its_keys(p1: bytes, p2: bytes, key: bytes) -> None:
    lo, hi = prefix_range(p1)
    assert lo <= prefix_key(p1, key) < hi
    assert parse_prefix_key(prefix_key(p1, key)) == (p1, key)
    if p2 != p1:
        assert not (lo <= prefix_key(p2, key) < hi)


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [
        (b"", None),
        (b"\xff\xff", None),
        (b"a", b"b"),
        (b"a\xff", b"b"),
        (b"\x00", b"\x01"),
        (b"ab\xfe", b"ab\xff"),
    ],
)
def test_next_prefix(prefix: bytes, expected: bytes | None) -> None:
    assert next_prefix(prefix) == expected


@given(st.binary(max_size=6), st.binary(max_size=6))
def test_next_prefix_bounds_every_extension(prefix: bytes, tail: bytes) -> None:
    bound = next_prefix(prefix)
    if bound is not None:
        assert prefix + tail < bound
        assert prefix < bound


@pytest.mark.parametrize("data", [b"", b"\x00\x00\x00\x05ab", b"\x00" * 19])
def test_malformed_keys_are_rejected(data: bytes) -> None:
    with pytest.raises(ValueError):
        parse_window_key(data)
    if len(data) < 16:
        with pytest.raises(ValueError):
            parse_window_expiry_key(data)
