"""The console in a real browser (Debian's chromium through Playwright) against a real broker
process: click through the start page, topics, the message browser, the producer form and a
consumer group whose lag rises and falls."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer, TopicPartition
from playwright.sync_api import expect

from streamkit.console import ConsoleSettings
from streamkit.testing import BrokerProcess
from tests.console.conftest import ConsoleThread, joined_consumer

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def console(broker: BrokerProcess) -> Iterator[str]:
    with ConsoleThread(ConsoleSettings(broker.bootstrap)) as running:
        yield running.url


def _create_topic(page: Any, console: str, name: str, partitions: int) -> None:
    page.goto(f"{console}/topics")
    form = page.locator("#create-topic")
    form.get_by_label("Name", exact=True).fill(name)
    form.get_by_label("Partitions", exact=True).fill(str(partitions))
    form.get_by_role("button", name="Create").click()
    expect(page).to_have_url(re.compile(rf"/topics/{re.escape(name)}\?notice="))


def test_start_page_names_the_broker_and_a_new_topic_gets_its_page(page: Any, console: str,
                                                                    broker: BrokerProcess) -> None:
    page.goto(console)
    expect(page.locator("main")).to_contain_text(f"Connected to {broker.bootstrap}")
    page.get_by_role("link", name="Topics", exact=True).click()
    expect(page).to_have_url(f"{console}/topics")
    _create_topic(page, console, "clicks", 3)
    expect(page.locator("#topic-name")).to_have_text("clicks")
    expect(page.locator("#partitions tbody tr")).to_have_count(3)
    expect(page.get_by_role("status")).to_contain_text("created topic clicks")
    # A name Kafka refuses: its message in the page, never a traceback.
    page.goto(f"{console}/topics")
    page.locator("#create-topic").get_by_label("Name", exact=True).fill("no spaces allowed")
    page.locator("#create-topic").get_by_role("button", name="Create").click()
    expect(page.get_by_role("alert")).to_contain_text("is not a legal topic name")
    # The start page lists it, as a link to its page, and charts the records written.
    page.goto(console)
    page.wait_for_function("Chart.getChart('throughput-chart').data.datasets[0].data.length >= 1")
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for _ in range(200):
        producer.produce("clicks", value=b"click")
    producer.flush(10)
    page.wait_for_function("Chart.getChart('throughput-chart').data.datasets[0].data.some(v => v > 0)",
                           timeout=20_000)
    page.locator("#topic-list").get_by_role("link", name="clicks").click()
    expect(page).to_have_url(f"{console}/topics/clicks")


def test_produce_a_record_and_find_records_by_timestamp(page: Any, console: str, broker: BrokerProcess) -> None:
    _create_topic(page, console, "events", 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i, ts in enumerate((1_000_000, 2_000_000, 3_000_000)):
        producer.produce("events", key=f"k{i}".encode(), value=f'{{"n": {i}}}'.encode(), timestamp=ts)
    producer.flush(10)

    form = page.locator("#produce")
    form.get_by_label("Key", exact=True).fill("typed")
    form.get_by_label("Value", exact=True).fill("hello from the browser")
    form.get_by_label("Headers").fill("origin=console")
    form.get_by_role("button", name="Produce").click()
    expect(page.get_by_role("status")).to_contain_text("produced to partition 0 at offset 3")
    expect(page.locator("#messages tbody tr.message")).to_have_count(1)
    expect(page.locator("#messages")).to_contain_text("hello from the browser")
    expect(page.locator("#messages")).to_contain_text("origin")

    browse = page.locator("#browse")
    browse.get_by_label("Partition", exact=True).select_option(label="all")
    browse.get_by_label("From", exact=True).select_option("timestamp")
    browse.get_by_label("Offset", exact=True).fill("")
    browse.get_by_label("Timestamp", exact=True).fill("1970-01-01T00:33:20Z")  # 2,000,000 ms
    browse.get_by_role("button", name="Show").click()
    rows = page.locator("#messages tbody tr.message")
    expect(rows).to_have_count(3)  # k1, k2 and the one produced now
    expect(rows.nth(0)).to_contain_text("k1")
    expect(rows.nth(0)).to_contain_text('"n": 1')  # JSON, pretty-printed
    expect(rows.nth(1)).to_contain_text("k2")

    browse.get_by_label("Value contains").fill("browser")
    browse.get_by_role("button", name="Show").click()
    expect(rows).to_have_count(1)
    expect(rows.nth(0)).to_contain_text("typed")

    # Live tail, with the same value filter: only new records that hold "browser" appear.
    page.get_by_role("button", name="Live tail").click()
    expect(page.locator("#tail-status")).to_contain_text("tailing")
    producer.produce("events", key=b"live", value=b"not this one")
    producer.produce("events", key=b"live", value=b'{"from": "browser tail"}')
    producer.flush(10)
    tailed = page.locator("#tail tbody tr")
    expect(tailed).to_have_count(1)
    expect(tailed.nth(0)).to_contain_text('"from": "browser tail"')
    page.get_by_role("button", name="Stop tail").click()
    expect(page.locator("#tail-status")).to_have_text("stopped")


def test_a_groups_lag_rises_and_falls_and_its_offsets_reset(page: Any, console: str, broker: BrokerProcess) -> None:
    _create_topic(page, console, "work", 2)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    consumer = joined_consumer(broker.bootstrap, "workers", "work")
    consumer.commit(offsets=[TopicPartition("work", 0, 0), TopicPartition("work", 1, 0)], asynchronous=False)
    try:
        page.goto(f"{console}/groups")
        page.get_by_role("link", name="workers").click()
        expect(page).to_have_url(f"{console}/groups/workers")
        total = page.locator("#total-lag")
        expect(total).to_have_text("0")
        expect(page.locator("#members")).to_contain_text("work-0, work-1")

        for i in range(12):
            producer.produce("work", value=b"job", partition=i % 2)
        producer.flush(10)
        expect(total).to_have_text("12")  # the page refreshes itself
        consumer.commit(offsets=[TopicPartition("work", 0, 6), TopicPartition("work", 1, 4)], asynchronous=False)
        expect(total).to_have_text("2")
        expect(page.locator("#lag tbody tr").nth(1).locator("td.lag")).to_have_text("2")
        # The chart drew a point per refresh: 0, then 12, then 2 among them.
        points = page.evaluate("Chart.getChart('lag-chart').data.datasets[0].data")
        assert {0, 12, 2} <= set(points), points
        # The history is the console's, not the page's: a reloaded page charts the 12 from before.
        page.reload()
        page.wait_for_function("Chart.getChart('lag-chart') !== undefined && "
                               "Chart.getChart('lag-chart').data.datasets[0].data.includes(12)")

        # While the consumer is a member, a reset is refused, with the reason.
        page.on("dialog", lambda dialog: dialog.accept())
        page.locator("#reset-offsets").get_by_role("button", name="Reset").click()
        expect(page.get_by_role("alert")).to_contain_text("stop its consumers")
    finally:
        consumer.close()
    page.goto(f"{console}/groups/workers")
    form = page.locator("#reset-offsets")
    form.get_by_label("To", exact=True).select_option("earliest")
    form.get_by_role("button", name="Reset").click()
    expect(page.get_by_role("status")).to_contain_text("reset offsets")
    expect(page.locator("#total-lag")).to_have_text("12")


def test_deleting_a_topic_asks_first_and_then_its_url_is_not_found(page: Any, console: str) -> None:
    _create_topic(page, console, "doomed", 1)
    answers = iter([False, True])
    page.on("dialog", lambda dialog: dialog.accept() if next(answers) else dialog.dismiss())
    page.get_by_role("button", name="Delete topic").click()
    expect(page).to_have_url(re.compile(r"/topics/doomed"))  # dismissed: nothing happened
    page.goto(f"{console}/topics/doomed")
    expect(page.locator("#topic-name")).to_have_text("doomed")
    page.get_by_role("button", name="Delete topic").click()
    expect(page.get_by_role("status")).to_contain_text("deleted topic doomed")
    page.goto(f"{console}/topics/doomed")
    expect(page.locator("h1")).to_have_text("Not found")
