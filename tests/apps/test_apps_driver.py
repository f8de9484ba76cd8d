"""The README's tutorial app and the example apps (``apps/``, the demo's apps,
``tests/apps/idle_app``) through ``AppTestDriver``: what users copy when they test their own
apps. test_apps.py runs the same apps as real workers against a real broker."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest

from apps import fraud, orders, pageviews, wordcount
from streamkit.demo import _stream_app as demo_app
from streamkit.demo_pipeline import _app as demo_pipeline_app
from streamkit.testing import AppTestDriver
from tests.apps import idle_app

MINUTE = 60_000
T0 = 1_700_000_000_000 // MINUTE * MINUTE  # a minute boundary, so windows start at T0
DOCS = Path(__file__).resolve().parents[2] / "docs"
TUTORIAL = DOCS / "tutorials" / "first-stream-app.md"
TESTING = DOCS / "how-to" / "testing.md"


def python_blocks(page: Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", page.read_text(), re.S | re.M)


def tutorial_module() -> types.ModuleType:
    """The app of the tutorial "The first stream app", exactly as the page shows it."""
    module = types.ModuleType("my_pageviews")
    sys.modules["my_pageviews"] = module  # pydantic resolves the models' annotations there
    try:
        exec(compile(python_blocks(TUTORIAL)[0], str(TUTORIAL), "exec"), module.__dict__)
    finally:
        del sys.modules["my_pageviews"]
    return module


def window(key: str, start: int, value: object) -> dict[str, object]:
    return {"key": key, "start": start, "end": start + MINUTE, "value": value}


def test_tutorial_app() -> None:
    tutorial = tutorial_module()
    with AppTestDriver(tutorial.app, start_time_ms=T0) as driver:
        views = driver.input("page_views")
        views.send_many([{"value": {"user": "ann", "page": page}, "key": "ann", "timestamp": T0 + i * 1000}
                         for i, page in enumerate(["/home", "/home", "/health", "/docs"])])
        assert driver.table("views_per_page")["/home"] == [{"start": T0, "end": T0 + MINUTE, "value": 2}]
        assert driver.output("my_page_counts").read_all() == []
        views.send({"user": "ann", "page": "/docs"}, key="ann", timestamp=T0 + MINUTE + 10_000)
        finals = [r.value for r in driver.output("my_page_counts").read_all()]
        assert sorted(finals, key=lambda w: str(w["key"])) == [window("/docs", T0, 1), window("/home", T0, 2)]
        views.send({"user": "bob", "page": "/home"}, key="ann", timestamp=T0 + 5000)
        assert [e.value.user for e in driver.late("page-counts")] == ["bob"]
        assert driver.table("views_per_page")["/home"] == [{"start": T0, "end": T0 + MINUTE, "value": 3}]


def test_pageviews() -> None:
    with AppTestDriver(pageviews.app, start_time_ms=T0) as driver:
        views = driver.input("page_views")
        for i, page in enumerate(["/home", "/about", "/home", "/health"]):
            views.send({"user": f"u{i}", "page": page}, key="k", timestamp=T0 + i * 1000)
        # Hopping windows of 1 minute every 30 s: each view counts in two.
        assert driver.table("views_per_page")["/home"] == [
            {"start": T0 - 30_000, "end": T0 + 30_000, "value": 2}, {"start": T0, "end": T0 + MINUTE, "value": 2}]
        with pytest.raises(KeyError):
            driver.table("views_per_page")["/health"]
        views.send({"user": "u9", "page": "/about"}, key="k", timestamp=T0 + MINUTE + 10_000)
        assert {r.key: r.value for r in driver.output("page_counts").read_all()} == {
            "/home": window("/home", T0, 2), "/about": window("/about", T0, 1)}


def test_wordcount() -> None:
    with AppTestDriver(wordcount.app) as driver:
        driver.input("lines").send("Hello world, hello!")
        driver.input("lines").send("don't")
        assert driver.table("word_counts")["hello"] == 2
        assert sorted((r.key, r.value) for r in driver.output("word_counts").read_all()) == [
            ("don", 1), ("hello", 1), ("hello", 2), ("t", 1), ("world", 1)]
        driver.commit()
        driver.restart()
        assert driver.table("word_counts")["hello"] == 2


def test_orders() -> None:
    with AppTestDriver(orders.app) as driver:
        driver.input("customers").send({"id": "c-1", "name": "Ann", "tier": "gold"}, key="c-1")
        driver.input("orders").send({"order_id": "o-1", "customer_id": "c-1", "amount": 12.5}, key="c-1")
        driver.input("orders").send({"order_id": "o-2", "customer_id": "c-2", "amount": 3}, key="c-2")
        driver.input("customers").send(None, key="c-1")  # deleted: later orders go out without it
        driver.input("orders").send({"order_id": "o-3", "customer_id": "c-1", "amount": 1}, key="c-1")
        out = [(r.key, r.value.order.order_id, r.value.customer) for r in driver.output("enriched_orders").read_all()]
        assert out == [("c-1", "o-1", orders.Customer(id="c-1", name="Ann", tier="gold")),
                       ("c-2", "o-2", None), ("c-1", "o-3", None)]
        with pytest.raises(KeyError):
            driver.table("customers")["c-1"]


def test_fraud() -> None:
    with AppTestDriver(fraud.app, start_time_ms=T0) as driver:
        payments = driver.input("card_transactions")
        payments.send_many([{"value": {"card": "card-1", "amount": 10}, "key": "card-1", "timestamp": T0 + i * 60_000}
                            for i in range(5)])  # five, a minute apart: one session
        payments.send({"card": "card-2", "amount": 2000}, key="card-2", timestamp=T0)
        payments.send({"card": "card-3", "amount": 1}, key="card-3", timestamp=T0)
        # Far later, on every partition: every session above is over.
        for p in range(driver.log.partitions("card_transactions") or 0):
            payments.send({"card": "later", "amount": 1}, key="later", timestamp=T0 + 3_600_000, partition=p)
        alerts = sorted((r.value.card, r.value.count, r.value.total, r.value.start, r.value.end)
                        for r in driver.output("fraud_alerts").read_all())
        assert alerts == [("card-1", 5, 50.0, T0, T0 + 4 * 60_000), ("card-2", 1, 2000.0, T0, T0)]


def test_demo_app(tmp_path: Path) -> None:
    app = demo_app("unused:9092", tmp_path)
    with AppTestDriver(app, start_time_ms=T0) as driver:
        views = driver.input("demo_page_views")
        for i, page in enumerate(["/a", "/b", "/a", "/health"]):
            views.send({"user": "u", "page": page}, timestamp=T0 + i)
        assert driver.table("views_per_page")["/a"] == 2
        assert driver.table("views_per_page")["/health"] == 1  # the agent counts every view
        views.send({"user": "u", "page": "/c"}, timestamp=T0 + 2 * MINUTE)
        assert {r.key: r.value["value"] for r in driver.output("page_counts").read_all()} == {"/a": 2, "/b": 1}


def test_demo_pipeline_app(tmp_path: Path) -> None:
    app = demo_pipeline_app("unused:9092", tmp_path, registry_url=None)  # page_counts as JSON
    with AppTestDriver(app) as driver:
        views = driver.input("page_views")
        # Event time comes from the value's ts (the topic's timestamp extractor).
        views.send({"user": "u", "page": "/a", "ts": T0 + 5})
        views.send({"user": "u", "page": "/a", "ts": T0 + MINUTE + 10_000})
        w = window("/a", T0, 1)
        assert [r.value.model_dump() for r in driver.output("page_counts").read_all()] == [
            {"page": w["key"], "window_start": w["start"], "window_end": w["end"], "views": w["value"]}]


def test_idle_app_closes_windows_by_wall_clock() -> None:
    with AppTestDriver(idle_app.app, start_time_ms=T0) as driver:
        driver.input("idle_events").send("x", key="k", timestamp=T0)
        driver.input("idle_events").send("y", key="k", timestamp=T0 + 500)
        assert driver.output("idle_counts").read_all() == []
        driver.advance_time(3)  # window.idle.close.ms=300: the input is idle, time moves on
        assert [r.value for r in driver.output("idle_counts").read_all()] == [
            {"key": "k", "start": T0, "end": T0 + 2000, "value": 2}]


def test_the_docs_driver_examples_run() -> None:
    """The tutorial's own test and the AppTestDriver example of "Test your apps", run as the
    pages show them (tests/docs runs them too, with the other blocks of their pages)."""
    tutorial = types.ModuleType("my_pageviews")
    sys.modules["my_pageviews"] = tutorial
    try:
        for block in python_blocks(TUTORIAL)[:2]:
            exec(compile(block, str(TUTORIAL), "exec"), tutorial.__dict__)
    finally:
        del sys.modules["my_pageviews"]
    assert "test_views_per_minute" in tutorial.__dict__
    scope: dict[str, object] = {"__name__": "testing_page"}
    exec(compile(python_blocks(TESTING)[0], str(TESTING), "exec"), scope)
    assert "test_clicks" in scope
