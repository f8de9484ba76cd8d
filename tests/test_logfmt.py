"""Log lines show partitions as ranges and settings as key=value, never Python reprs."""

from __future__ import annotations

from streamkit.logfmt import assignment, key_values, ranges


def test_runs_of_partitions_collapse_into_ranges() -> None:
    assert ranges([0, 1, 2, 5]) == "0-2,5"
    assert ranges({7, 3, 8, 4, 0}) == "0,3-4,7-8"
    assert ranges([2]) == "2"
    assert ranges([1, 1, 2]) == "1-2"  # duplicates count once
    assert ranges([]) == "none"


def test_an_assignment_is_topics_with_their_partition_ranges() -> None:
    tps = {("page_views", p) for p in range(4)} | {("my-pageviews-by_page-repartition", p) for p in range(4)}
    assert assignment(tps) == "my-pageviews-by_page-repartition[0-3], page_views[0-3]"
    assert assignment([("t", 5), ("t", 0), ("t", 1), ("t", 2)]) == "t[0-2,5]"
    assert assignment([]) == "none"


def test_settings_are_key_value_pairs_in_order() -> None:
    assert key_values({"cleanup.policy": "compact", "segment.bytes": 104857600}) == (
        "cleanup.policy=compact, segment.bytes=104857600")
    assert key_values({}) == ""
