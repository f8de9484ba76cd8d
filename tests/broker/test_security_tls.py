"""The TLS principal and the context built from PEM settings, over a real loopback TLS
handshake (in-process server, stdlib client)."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import pytest

from streamkit.broker.security.settings import listener_security
from streamkit.broker.security.tls import TlsContext, _openssl_cipher, ssl_principal
from streamkit.log.errors import ConfigError
from streamkit.testing_tls import CertificateAuthority


async def _principal_of(server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext) -> str:
    seen: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.set_result(ssl_principal(writer.get_extra_info("ssl_object")))
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=server_ctx)
    port = server.sockets[0].getsockname()[1]
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client_ctx, server_hostname="localhost")
    principal = await asyncio.wait_for(seen, 10)
    writer.close()
    server.close()
    await server.wait_closed()
    return principal


def _settings(ca: CertificateAuthority, keystore: Path, auth: str) -> dict[str, str]:
    return {"ssl.keystore.location": str(keystore), "ssl.truststore.location": str(ca.cert_path),
            "ssl.client.auth": auth}


async def test_the_principal_is_the_certificate_subject_as_kafka_writes_it(tmp_path: Path) -> None:
    ca = CertificateAuthority(tmp_path)
    broker = ca.issue("broker", "CN=localhost", hosts=["localhost"])
    alice = ca.issue("alice", "CN=alice,OU=eng,O=Acme,C=US")  # RFC 4514: the DER order is C, O, OU, CN
    ctx = TlsContext(listener_security("SSL", "SSL", _settings(ca, broker.keystore, "required"))).current()
    client = ssl.create_default_context(cafile=str(ca.cert_path))
    client.load_cert_chain(alice.cert_path, alice.key_path)
    # RFC 2253 order (the most specific RDN first), as Java's X500Principal.getName() gives it
    assert await _principal_of(ctx, client) == "User:CN=alice,OU=eng,O=Acme,C=US"
    anonymous = ssl.create_default_context(cafile=str(ca.cert_path))
    optional = TlsContext(listener_security("SSL", "SSL", _settings(ca, broker.keystore, "requested"))).current()
    assert await _principal_of(optional, anonymous) == "User:ANONYMOUS"


async def test_inline_pem_and_protocol_settings(tmp_path: Path) -> None:
    ca = CertificateAuthority(tmp_path)
    broker = ca.issue("broker", "CN=localhost", hosts=["localhost"])
    sec = listener_security("SSL", "SSL", {"ssl.keystore.key": broker.key_pem,
                                           "ssl.keystore.certificate.chain": broker.cert_pem,
                                           "ssl.enabled.protocols": "TLSv1.2",
                                           "ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"})
    ctx = TlsContext(sec).current()
    assert (ctx.minimum_version, ctx.maximum_version) == (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_2)
    client = ssl.create_default_context(cafile=str(ca.cert_path))
    assert await _principal_of(ctx, client) == "User:ANONYMOUS"
    assert [c["name"] for c in ctx.get_ciphers() if c["protocol"] == "TLSv1.2"] == ["ECDHE-ECDSA-AES256-GCM-SHA384"]


def test_iana_cipher_names_become_openssl_names() -> None:
    assert _openssl_cipher("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256") == "ECDHE-RSA-AES128-GCM-SHA256"
    assert _openssl_cipher("TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256") == "ECDHE-ECDSA-CHACHA20-POLY1305"
    assert _openssl_cipher("DHE-RSA-AES256-GCM-SHA384") == "DHE-RSA-AES256-GCM-SHA384"


def test_bad_tls_settings_are_named(tmp_path: Path) -> None:
    ca = CertificateAuthority(tmp_path)
    broker = ca.issue("broker", "CN=localhost")
    with pytest.raises(ConfigError, match=r"ssl\.enabled\.protocols of listener SSL: TLSv1 is not supported"):
        TlsContext(listener_security("SSL", "SSL", {"ssl.keystore.location": str(broker.keystore),
                                                    "ssl.enabled.protocols": "TLSv1"}))
    with pytest.raises(ConfigError, match=r"ssl\.cipher\.suites of listener SSL: none of NOPE is available"):
        TlsContext(listener_security("SSL", "SSL", {"ssl.keystore.location": str(broker.keystore),
                                                    "ssl.cipher.suites": "NOPE"}))
    with pytest.raises(ConfigError, match="listener SSL: cannot load the keystore"):
        TlsContext(listener_security("SSL", "SSL", {"ssl.keystore.location": str(broker.cert_path)}))
