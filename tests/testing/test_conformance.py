"""Conformance: the same scenarios through AppTestDriver and through a real worker on a real
broker process (``streamkit.testing.conformance``). A test that passes in the driver must
behave the same against a broker: each scenario's outputs, per topic and key, are equal."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from apps import fraud, orders, pageviews, wordcount
from streamkit.testing import BrokerProcess
from streamkit.testing.conformance import Scenario, Send, run_in_driver, run_on_broker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

MINUTE = 60_000
T0 = 1_700_000_000_000 // MINUTE * MINUTE


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path / "broker") as b:
        yield b


def wordcount_scenario(guarantee: str) -> Scenario:
    lines = ["the cat", "the hat", "The cat sat", "on the mat"]
    return Scenario(wordcount.app, [Send("lines", line, timestamp=T0 + i) for i, line in enumerate(lines)],
                    outputs=("word_counts",), config={"processing.guarantee": guarantee, "num.partitions": 2})


def pageviews_scenario() -> Scenario:
    pages = ["/home", "/about", "/home", "/health", "/home", "/about"]
    sends = [Send("page_views", {"user": f"u{i}", "page": p}, key="k", timestamp=T0 + i * 7000)
             for i, p in enumerate(pages)]
    sends.append(Send("page_views", {"user": "late", "page": "/home"}, key="k", timestamp=T0 + 2 * MINUTE))
    sends.append(Send("page_views", {"user": "x", "page": "/home"}, key="k", timestamp=T0 + 30_000))  # late
    return Scenario(pageviews.app, sends, outputs=("page_counts",))


def orders_scenario() -> Scenario:
    # A worker reads a backlog in slices per partition, lowest timestamp first, not record by
    # record across topics: a table update between two orders of one backlog may be applied
    # before both (Kafka Streams' timestamp synchronization is as coarse). So every customer
    # comes before the orders here.
    sends = [
        Send("customers", {"id": "c-1", "name": "Ann", "tier": "gold"}, key="c-1", timestamp=T0),
        Send("customers", {"id": "c-2", "name": "Bob"}, key="c-2", timestamp=T0 + 1),
        Send("orders", {"order_id": "o-1", "customer_id": "c-1", "amount": 5}, key="c-1", timestamp=T0 + 2),
        Send("orders", {"order_id": "o-2", "customer_id": "c-3", "amount": 7}, key="c-3", timestamp=T0 + 3),
        Send("orders", {"order_id": "o-3", "customer_id": "c-1", "amount": 9}, key="c-1", timestamp=T0 + 5),
        Send("orders", {"order_id": "o-4", "customer_id": "c-2", "amount": 1}, key="c-2", timestamp=T0 + 6),
    ]
    return Scenario(orders.app, sends, outputs=("enriched_orders",))


def fraud_scenario() -> Scenario:
    sends = [Send("card_transactions", {"card": "c1", "amount": 300}, key="c1", timestamp=T0 + i * MINUTE)
             for i in range(4)]
    sends += [Send("card_transactions", {"card": "c2", "amount": 5}, key="c2", timestamp=T0 + i * 1000)
              for i in range(6)]
    sends += [Send("card_transactions", {"card": "end", "amount": 1}, key="end", timestamp=T0 + 3_600_000,
                   partition=p) for p in range(4)]
    return Scenario(fraud.app, sends, outputs=("fraud_alerts",))


SCENARIOS = {
    "wordcount": lambda: wordcount_scenario("at_least_once"),
    "wordcount-exactly-once": lambda: wordcount_scenario("exactly_once_v2"),
    "pageviews": pageviews_scenario,
    "orders": orders_scenario,
    "fraud": fraud_scenario,
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_driver_and_broker_agree(name: str, broker: BrokerProcess, tmp_path: Path) -> None:
    scenario = SCENARIOS[name]()
    expected = run_in_driver(scenario)
    assert any(expected.values()), f"scenario {name} produced nothing in the driver"
    actual = asyncio.run(run_on_broker(scenario, broker.bootstrap, tmp_path / "state", expect=expected))
    assert actual == expected
