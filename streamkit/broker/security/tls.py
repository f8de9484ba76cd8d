"""Server-side TLS from PEM, as in Kafka's KIP-651, with certificates reloaded when their
files change (checked at most once a second, on a new connection; no restart).

- ``ssl.keystore.location``: one PEM file with the private key and the certificate chain;
  or ``ssl.keystore.key`` + ``ssl.keystore.certificate.chain`` inline (``ssl.key.password``
  when the key is encrypted);
- ``ssl.truststore.location`` (or inline ``ssl.truststore.certificates``): the CAs that sign
  client certificates; ``ssl.client.auth`` = none | requested | required;
- ``ssl.enabled.protocols`` (TLSv1.2, TLSv1.3) and ``ssl.cipher.suites`` (IANA names as in
  Java, or OpenSSL's). Python's ``ssl`` cannot narrow the TLS 1.3 suites; those are OpenSSL's.
"""

from __future__ import annotations

import logging
import os
import re
import ssl
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from cryptography import x509

from streamkit.broker.security.settings import ListenerSecurity
from streamkit.log.errors import ConfigError

__all__ = ["ANONYMOUS", "TlsContext", "build_context", "ssl_principal"]

log = logging.getLogger(__name__)

ANONYMOUS = "User:ANONYMOUS"
_CHECK_EVERY_S = 1.0
_VERSIONS = {"TLSV1.2": ssl.TLSVersion.TLSv1_2, "TLSV1.3": ssl.TLSVersion.TLSv1_3}
_TLS13_SUITES = {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256",
                 "TLS_AES_128_CCM_SHA256", "TLS_AES_128_CCM_8_SHA256"}
_IANA = re.compile(r"^TLS_(ECDHE|DHE)_(RSA|ECDSA)_WITH_(AES_128|AES_256|CHACHA20_POLY1305)_?(GCM)?_?(SHA256|SHA384)?$")


def _openssl_cipher(name: str) -> str:
    """Java's (IANA) name of a TLS 1.2 suite as OpenSSL spells it; other names as given."""
    m = _IANA.match(name)
    if m is None:
        return name
    kx, auth, bulk, mode, mac = m.groups()
    kx = "EDH" if kx == "DHE" and auth == "ECDSA" else kx
    head = f"{kx}-{auth}" if not (kx == "DHE" and auth == "RSA") else "DHE-RSA"
    if bulk == "CHACHA20_POLY1305":
        return f"{head}-CHACHA20-POLY1305"
    return f"{head}-{bulk.replace('_', '')}-{mode}-{mac}" if mode else f"{head}-{bulk.replace('_', '')}-{mac}"


def build_context(sec: ListenerSecurity) -> ssl.SSLContext:
    """A server SSLContext for listener ``sec``; ConfigError naming what is wrong."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    password = sec.get("ssl.key.password") or sec.get("ssl.keystore.password") or None
    try:
        if location := sec.get("ssl.keystore.location"):
            ctx.load_cert_chain(location, password=password)
        else:
            _load_inline(ctx, sec.get("ssl.keystore.certificate.chain"), sec.get("ssl.keystore.key"), password)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"listener {sec.name}: cannot load the keystore "
                          f"({sec.get('ssl.keystore.location') or 'ssl.keystore.key'}): {exc}") from None
    try:
        if trust := sec.get("ssl.truststore.location"):
            ctx.load_verify_locations(cafile=trust)
        elif certs := sec.get("ssl.truststore.certificates"):
            ctx.load_verify_locations(cadata=certs)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"listener {sec.name}: cannot load the truststore: {exc}") from None
    ctx.verify_mode = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
                       "required": ssl.CERT_REQUIRED}[sec.client_auth]
    _protocols(ctx, sec)
    _ciphers(ctx, sec)
    return ctx


def _load_inline(ctx: ssl.SSLContext, chain: str, key: str, password: str | None) -> None:
    # ssl loads keys from files only: a private temporary file, removed at once.
    fd, path = tempfile.mkstemp(prefix="streamkit-key-", suffix=".pem")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(key.strip() + "\n" + chain.strip() + "\n")
        ctx.load_cert_chain(path, password=password)
    finally:
        os.unlink(path)


def _protocols(ctx: ssl.SSLContext, sec: ListenerSecurity) -> None:
    given = sec.get("ssl.enabled.protocols", "TLSv1.2,TLSv1.3")
    versions = []
    for name in (p.strip() for p in given.split(",") if p.strip()):
        if name.upper() not in _VERSIONS:
            raise ConfigError(f"ssl.enabled.protocols of listener {sec.name}: {name} is not supported "
                              "(TLSv1.2, TLSv1.3)")
        versions.append(_VERSIONS[name.upper()])
    if versions:
        ctx.minimum_version, ctx.maximum_version = min(versions), max(versions)


def _ciphers(ctx: ssl.SSLContext, sec: ListenerSecurity) -> None:
    given = [c.strip() for c in sec.get("ssl.cipher.suites").split(",") if c.strip()]
    tls12 = [_openssl_cipher(c) for c in given if c not in _TLS13_SUITES]
    if not tls12:
        return
    try:
        ctx.set_ciphers(":".join(tls12))
    except ssl.SSLError:
        raise ConfigError(f"ssl.cipher.suites of listener {sec.name}: none of {', '.join(given)} is "
                          "available") from None


class TlsContext:
    """A listener's current SSLContext, rebuilt when one of its files changes. A file
    that cannot be loaded leaves the previous context in place (and is logged)."""

    def __init__(self, sec: ListenerSecurity, clock: Callable[[], float] = time.monotonic) -> None:
        self.sec = sec
        self._clock = clock
        self._files = [Path(p) for p in (sec.get("ssl.keystore.location"), sec.get("ssl.truststore.location")) if p]
        self._stamps = self._stat()
        self._context = build_context(sec)
        self._checked = clock()

    def _stat(self) -> list[tuple[int, int]]:
        out = []
        for path in self._files:
            try:
                st = path.stat()
                out.append((st.st_mtime_ns, st.st_size))
            except OSError:
                out.append((-1, -1))
        return out

    def current(self) -> ssl.SSLContext:
        now = self._clock()
        if now - self._checked >= _CHECK_EVERY_S:
            self._checked = now
            stamps = self._stat()
            if stamps != self._stamps:
                self._stamps = stamps
                try:
                    self._context = build_context(self.sec)
                    log.info("listener %s: reloaded its TLS certificates", self.sec.name)
                except ConfigError as exc:
                    log.error("keeping the previous TLS certificates: %s", exc)
        return self._context


def ssl_principal(ssl_object: ssl.SSLObject | None) -> str:
    """Kafka's default principal of a TLS peer: ``User:`` + the client certificate's
    subject in RFC 2253 form (``User:CN=alice,OU=eng``); ``User:ANONYMOUS`` without one."""
    der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
    if not der:
        return ANONYMOUS
    return "User:" + x509.load_der_x509_certificate(der).subject.rfc4514_string()
