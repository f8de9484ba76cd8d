"""A stream app against a broker that only speaks SASL_SSL: every client the worker creates
(producers, transactional ones under exactly-once, the group consumer, the admin client, the
changelog reader of a restore) logs in with the app's security settings (librdkafka's names).

The broker process has a PLAINTEXT listener for the test's own setup (creating the SCRAM
user, reading results) and a SASL_SSL listener with SCRAM-SHA-256 that the app uses.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from streamkit.streams.agent import AgentStream
from streamkit.streams.app import App
from streamkit.streams.runtime import StartupError
from streamkit.testing import BrokerProcess
from streamkit.testing_tls import CertificateAuthority, SecuredBroker, scram_broker

from .conftest import FAST_GROUP, Probe, eventually, running, unique


@pytest.fixture(scope="module")
def secured_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredBroker]:
    with scram_broker(tmp_path_factory.mktemp("secured"), {"streams": "streams-secret"}) as broker:
        yield broker


@pytest.fixture(scope="module")
def ca(secured_broker: SecuredBroker) -> CertificateAuthority:
    return secured_broker.ca


@pytest.fixture(scope="module")
def secured(secured_broker: SecuredBroker) -> BrokerProcess:
    return secured_broker.process


def secured_app(broker: BrokerProcess, ca: CertificateAuthority, data_dir: Path, *, app_id: str,
                password: str = "streams-secret", **config: Any) -> App:
    return App(app_id, broker=broker.address("SASL_SSL"), data_dir=data_dir, config={
        **FAST_GROUP, "processing.guarantee": "exactly_once_v2",
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "streams", "sasl.password": password, "ssl.ca.location": str(ca.cert_path),
        **config})


def counting(app: App) -> tuple[Any, Any]:
    topic = app.topic(f"{app.id}-in", value_type=str, partitions=2)
    counts = app.Table("counts", default=int)

    @app.agent(topic)
    async def count(stream: AgentStream) -> None:
        async for event in stream.events():
            counts[event.value] += 1

    return topic, counts


async def test_an_exactly_once_app_with_a_table_runs_over_sasl_ssl(secured: BrokerProcess, ca: CertificateAuthority,
                                                                   tmp_path: Path) -> None:
    app_id = unique("secured-count")
    probe = Probe(secured.address("PLAINTEXT"))
    await probe.start()
    try:
        app = secured_app(secured, ca, tmp_path / "first", app_id=app_id)
        topic, counts = counting(app)
        async with running(app) as runtime:
            for word in ("a", "b", "a"):
                await topic.send(word, key=word)
            await eventually(lambda: runtime.metrics.commits > 0 and counts.get("a") == 2, "two a's counted")
            await runtime.commit()
        assert await probe.latest(counts.changelog.name, read_committed=True) == {b"a": b"2", b"b": b"1"}

        # A fresh state directory: the table is restored from its changelog, over SASL_SSL.
        again = secured_app(secured, ca, tmp_path / "second", app_id=app_id)
        topic, counts = counting(again)
        async with running(again) as runtime:
            await topic.send("a", key="a")
            await eventually(lambda: counts.get("a") == 3, "the restored count to go on")
            await runtime.commit()
        assert (await probe.latest(counts.changelog.name, read_committed=True))[b"a"] == b"3"
    finally:
        await probe.close()


async def test_a_wrong_password_is_a_one_line_start_error(secured: BrokerProcess, ca: CertificateAuthority,
                                                          tmp_path: Path) -> None:
    app = secured_app(secured, ca, tmp_path, app_id=unique("secured-wrong"), password="wrong")
    counting(app)
    with pytest.raises(StartupError) as raised:
        await asyncio.wait_for(app.start(), 30)
    message = str(raised.value)
    address = secured.address("SASL_SSL")
    assert message.startswith(f"cannot connect to {address} over SASL_SSL as streams (SCRAM-SHA-256): "), message
    assert "\n" not in message


def test_sasl_without_a_user_is_a_settings_error(tmp_path: Path) -> None:
    from streamkit.streams.settings import AppSettings, SettingsError

    settings = AppSettings.build({"application.id": "x", "security.protocol": "SASL_SSL"})
    with pytest.raises(SettingsError, match=r"needs sasl\.username and sasl\.password"):
        settings.client_security()
    jaas = AppSettings.build({"application.id": "x", "security.protocol": "SASL_PLAINTEXT",
                              "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config":
                              'org.apache.kafka.common.security.scram.ScramLoginModule required '
                              'username="alice" password="alice-secret";'})
    assert jaas.client_security() == {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-512",
                                      "sasl_plain_username": "alice", "sasl_plain_password": "alice-secret"}
