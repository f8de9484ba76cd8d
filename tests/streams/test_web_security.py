"""A stream worker's web endpoints over TLS with HTTP basic authentication
(``web.ssl.keystore.location``, ``web.authentication.method=BASIC`` with the users of the
JAAS file's ``web.authentication.realm`` section): two workers of one app, a key lookup
forwarded from one to the other over https with the caller's credentials."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import httpx
import pytest

from streamkit.streams.agent import AgentStream
from streamkit.streams.app import App
from streamkit.streams.runtime import StartupError
from streamkit.streams.topic import partition_for_key
from streamkit.testing_tls import CertificateAuthority, jaas_users

from .conftest import Probe, eventually, running


def build(app: App) -> tuple[Any, Any]:
    topic = app.topic(f"{app.id}-in", value_type=int, partitions=2)
    counts = app.Table("counts", default=int)

    @app.agent(topic)
    async def count(stream: AgentStream) -> None:
        async for event in stream.events():
            counts[event.key] += event.value

    return topic, counts


async def test_https_basic_auth_and_forwarded_lookups(make_app: Any, probe: Probe, tmp_path: Path) -> None:
    ca = CertificateAuthority(tmp_path / "ca")
    cert = ca.issue("worker", "CN=localhost", hosts=["localhost", "127.0.0.1"])
    config = {"web.ssl.keystore.location": str(cert.keystore), "web.ssl.truststore.location": str(ca.cert_path),
              "web.authentication.method": "BASIC",
              "java.security.auth.login.config": str(jaas_users(tmp_path / "auth", "StreamkitWorker",
                                                                {"ops": "ops-secret"}))}
    w1 = make_app(config=config, data_dir=tmp_path / "w1")
    topic, _ = build(w1)
    w2 = make_app(app_id=w1.id, config=config, data_dir=tmp_path / "w2")
    build(w2)
    keys = [next(f"k{i}" for i in range(100) if partition_for_key(f"k{i}".encode(), 2) == p) for p in range(2)]
    verify = ssl.create_default_context(cafile=str(ca.cert_path))
    async with running(w1, web_port=0) as r1, running(w2, web_port=0) as r2:
        await eventually(lambda: all(r.assigned for r in (r1, r2)), "both workers to own a partition", timeout=30)
        await probe.produce_many(topic.name, [(k.encode(), b"1", None) for k in keys])
        await eventually(lambda: probe.caught_up(w1.id, [topic.name]), "the records to be committed")
        url = f"https://127.0.0.1:{r1.web.port}"
        async with httpx.AsyncClient(base_url=url, verify=verify, timeout=30) as anonymous:
            refused = await anonymous.get("/health")
            assert refused.status_code == 401 and refused.json() == {"error_code": 401,
                                                                      "message": "authentication required"}
            assert refused.headers["www-authenticate"].startswith('Basic realm="StreamkitWorker"')
        async with httpx.AsyncClient(base_url=url, verify=verify, auth=("ops", "ops-secret"), timeout=30) as ops:
            assert (await ops.get("/health")).json()["status"] == "ok"
            # one of the keys lives on the other worker: this one forwards the lookup over https
            for key in keys:
                answer = await ops.get(f"/tables/counts/{key}")
                assert (answer.status_code, answer.json()) == (200, {"key": key, "value": 1}), answer.text


async def test_a_missing_users_file_is_a_start_error(make_app: Any, tmp_path: Path) -> None:
    app = make_app(config={"web.authentication.method": "BASIC"})
    build(app)
    with pytest.raises(StartupError, match=r"needs java\.security\.auth\.login\.config"):
        async with running(app, web_port=0, expect_failure=True):
            pass
