"""Connect's REST API over TLS with HTTP basic authentication, configured as Kafka Connect's
(``listeners=https://...``, ``listeners.https.ssl.keystore.location``,
``rest.extension.classes=...BasicAuthSecurityRestExtension`` with a JAAS file): httpx and
curl against a real worker, its certificate verified with the test CA."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from streamkit.connect.errors import ConfigError
from streamkit.connect.worker_config import BASIC_AUTH_EXTENSION, load_worker_config
from streamkit.testing import BrokerThread
from streamkit.testing_tls import CertificateAuthority, jaas_users
from tests.connect.conftest import standalone, worker_settings

SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CertificateAuthority:
    return CertificateAuthority(tmp_path_factory.mktemp("ca"))


def secured_rest(ca: CertificateAuthority, directory: Path) -> dict[str, Any]:
    server = ca.issue("connect", "CN=localhost", hosts=["localhost", "127.0.0.1"])
    return {"listeners": "https://127.0.0.1:0", "listeners.https.ssl.keystore.type": "PEM",
            "listeners.https.ssl.keystore.location": str(server.keystore),
            "rest.extension.classes": BASIC_AUTH_EXTENSION,
            "java.security.auth.login.config": str(jaas_users(directory, "KafkaConnect", {"admin": "admin-secret"}))}


async def test_https_with_basic_auth(broker: BrokerThread, ca: CertificateAuthority, tmp_path: Path) -> None:
    settings = worker_settings(broker.bootstrap, tmp_path, **secured_rest(ca, tmp_path / "auth"))
    verify = ssl.create_default_context(cafile=str(ca.cert_path))
    async with standalone(settings) as (worker, _client):
        assert worker.url.startswith("https://127.0.0.1:")
        async with httpx.AsyncClient(base_url=worker.url, verify=verify, timeout=30) as anonymous:
            refused = await anonymous.get("/connectors")
            assert refused.status_code == 401
            assert refused.json() == {"error_code": 401, "message": "authentication required"}
            assert refused.headers["www-authenticate"].startswith('Basic realm="KafkaConnect"')
            wrong = await anonymous.get("/connectors", auth=("admin", "wrong"))
            assert wrong.status_code == 401 and wrong.json()["message"] == "invalid credentials"
            assert (await anonymous.get("/connectors", auth=("nobody", "admin-secret"))).status_code == 401
        async with httpx.AsyncClient(base_url=worker.url, verify=verify, auth=("admin", "admin-secret"),
                                     timeout=30) as admin:
            assert (await admin.get("/")).json()["version"]
            created = await admin.put("/connectors/sink/config", json={
                "connector.class": SINK, "file": str(tmp_path / "out.txt"), "topics": "rest-security"})
            assert created.status_code == 201, created.text
            assert (await admin.get("/connectors")).json() == ["sink"]
        # The certificate is checked: a client trusting another CA refuses it.
        other = CertificateAuthority(tmp_path / "other-ca")
        async with httpx.AsyncClient(base_url=worker.url, timeout=30,
                                     verify=ssl.create_default_context(cafile=str(other.cert_path))) as stranger:
            with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
                await stranger.get("/connectors")
        # curl, as an admin would check it (in a child process: this loop serves the worker)
        curl = ["curl", "-sS", "--cacert", str(ca.cert_path), f"{worker.url}/connectors", "-w", "\n%{http_code}"]
        assert await run(*curl, "-u", "admin:admin-secret") == (["sink"], "200")
        body, code = await run(*curl)
        assert code == "401" and body["error_code"] == 401


async def run(*args: str) -> tuple[Any, str]:
    """curl's JSON body and HTTP status (``-w "\\n%{http_code}"``)."""
    process = await asyncio.create_subprocess_exec(*args, stdout=asyncio.subprocess.PIPE)
    out, _ = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0
    body, code = out.decode().rsplit("\n", 1)
    return orjson.loads(body), code


def test_bad_rest_security_settings_are_config_errors(ca: CertificateAuthority, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"needs listeners\.https\.ssl\.keystore\.location"):
        load_worker_config({"listeners": "https://127.0.0.1:0"})
    with pytest.raises(ConfigError, match="cannot load the TLS keystore"):
        load_worker_config({"listeners": "https://127.0.0.1:0", "ssl.keystore.location": str(ca.cert_path)})
    with pytest.raises(ConfigError, match=r"java\.security\.auth\.login\.config"):
        load_worker_config({"rest.extension.classes": BASIC_AUTH_EXTENSION})
    jaas = jaas_users(tmp_path, "SchemaRegistry", {"a": "b"})
    with pytest.raises(ConfigError, match="no KafkaConnect"):
        load_worker_config({"rest.extension.classes": BASIC_AUTH_EXTENSION, "java.security.auth.login.config": str(jaas)})
    with pytest.raises(ConfigError, match="unknown REST extension"):
        load_worker_config({"rest.extension.classes": "com.example.Other"})
