"""Each listener's security settings, resolved as Kafka does: ``listener.name.NAME.<setting>``
overrides the global ``<setting>`` (NAME in lower case), and a SASL mechanism's JAAS line is
``listener.name.NAME.<mechanism>.sasl.jaas.config``.

Pure: setting text in, a checked ``ListenerSecurity`` out (files are read when the broker
starts, not here); each bad value raises ConfigError naming the setting.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from streamkit.broker.security.jaas import JaasEntry, parse_jaas
from streamkit.log.errors import ConfigError

__all__ = ["CLIENT_AUTH", "MECHANISMS", "ListenerSecurity", "int_setting", "is_security_setting", "listener_security"]

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
CLIENT_AUTH = ("none", "requested", "required")
TLS_PROTOCOLS = ("SSL", "SASL_SSL")
SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
_LOGIN_MODULES = {"PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
                  "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
                  "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
                  "OAUTHBEARER": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"}
# OAUTHBEARER with signed tokens (streamkit.broker.security.jwks).
OAUTH_SETTINGS = ("sasl.oauthbearer.jwks.endpoint.url", "sasl.oauthbearer.jwks.endpoint.refresh.ms",
                  "sasl.oauthbearer.expected.audience", "sasl.oauthbearer.expected.issuer",
                  "sasl.oauthbearer.sub.claim.name", "sasl.oauthbearer.scope.claim.name",
                  "sasl.oauthbearer.clock.skew.seconds")
# The settings streamkit acts on (globally or per listener); Kafka's other ssl.* / sasl.*
# names stay "no effect here".
ACTED_ON = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.key", "ssl.keystore.certificate.chain",
    "ssl.key.password", "ssl.keystore.password", "ssl.truststore.type", "ssl.truststore.location",
    "ssl.truststore.certificates", "ssl.client.auth", "ssl.enabled.protocols", "ssl.cipher.suites",
    "sasl.enabled.mechanisms", "sasl.jaas.config", "connection.failed.authentication.delay.ms",
    "sasl.server.max.receive.size", "connections.max.reauth.ms",
    *OAUTH_SETTINGS,
})
_PER_LISTENER = re.compile(r"^listener\.name\.([A-Za-z0-9_-]+)\.(.+)$")
_PER_MECHANISM = re.compile(r"^([A-Za-z0-9-]+)\.sasl\.jaas\.config$")


def is_security_setting(name: str) -> bool:
    """A setting that ``listener_security`` reads (global or per listener)."""
    m = _PER_LISTENER.match(name)
    rest = m.group(2) if m else name
    mechanism = _PER_MECHANISM.match(rest)
    return rest in ACTED_ON or (m is not None and mechanism is not None and mechanism.group(1).upper() in MECHANISMS)


@dataclass(frozen=True, slots=True)
class ListenerSecurity:
    """What one listener needs to secure its connections (already checked)."""

    name: str
    protocol: str
    settings: Mapping[str, str] = field(default_factory=dict)  # effective ssl.* values
    mechanisms: tuple[str, ...] = ()
    jaas: Mapping[str, JaasEntry] = field(default_factory=dict)  # mechanism -> its JAAS entry
    failed_authentication_delay_ms: int = 100
    # The largest request accepted before authentication (Kafka's sasl.server.max.receive.size).
    max_receive_size: int = 524288
    # connections.max.reauth.ms (KIP-368): a SASL session's lifetime; 0: unlimited.
    max_reauth_ms: int = 0
    # The sasl.oauthbearer.* settings: with a JWKS endpoint, OAUTHBEARER takes signed tokens.
    oauth: Mapping[str, str] = field(default_factory=dict)

    @property
    def jwks(self) -> bool:
        return "OAUTHBEARER" in self.mechanisms and bool(self.oauth.get("sasl.oauthbearer.jwks.endpoint.url"))

    @property
    def tls(self) -> bool:
        return self.protocol in TLS_PROTOCOLS

    @property
    def sasl(self) -> bool:
        return self.protocol in SASL_PROTOCOLS

    def get(self, name: str, default: str = "") -> str:
        return self.settings.get(name, default)

    @property
    def client_auth(self) -> str:
        return self.get("ssl.client.auth", "none").strip().lower()


def _effective(name: str, settings: Mapping[str, str]) -> dict[str, str]:
    """Globals, then this listener's overrides (Kafka's prefix: the name in lower case)."""
    out = {k: v for k, v in settings.items() if not k.startswith("listener.name.")}
    for key, value in settings.items():
        m = _PER_LISTENER.match(key)
        if m and m.group(1).upper() == name:
            out[m.group(2)] = value
    return out


def listener_security(name: str, protocol: str, settings: Mapping[str, str]) -> ListenerSecurity:
    """The checked security of listener ``name`` from the broker's security settings."""
    eff = _effective(name, settings)
    prefix = f"listener.name.{name.lower()}."
    ssl = {k: v for k, v in eff.items() if k.startswith("ssl.")}
    out = ListenerSecurity(name, protocol, ssl)
    delay_ms = int_setting(eff, "connection.failed.authentication.delay.ms", 100)
    max_receive = int_setting(eff, "sasl.server.max.receive.size", 524288)
    reauth_ms = int_setting(eff, "connections.max.reauth.ms", 0)
    if out.tls:
        _check_tls(name, ssl)
    if not out.sasl:
        return ListenerSecurity(name, protocol, ssl, failed_authentication_delay_ms=delay_ms)
    mechanisms = tuple(m.strip().upper() for m in eff.get("sasl.enabled.mechanisms", "").split(",") if m.strip())
    if not mechanisms:
        raise ConfigError(f"listener {name} ({protocol}) needs sasl.enabled.mechanisms (or "
                          f"{prefix}sasl.enabled.mechanisms): one or more of {', '.join(MECHANISMS)}")
    jaas: dict[str, JaasEntry] = {}
    for mechanism in mechanisms:
        if mechanism not in MECHANISMS:
            raise ConfigError(f"sasl.enabled.mechanisms of listener {name}: {mechanism} is not supported "
                              f"(supported: {', '.join(MECHANISMS)})")
        key = f"{mechanism.lower()}.sasl.jaas.config"
        text = eff.get(key) or eff.get("sasl.jaas.config", "")
        if not text:
            if mechanism == "PLAIN":
                raise ConfigError(f"listener {name} enables PLAIN but has no {prefix}{key} "
                                  "(PlainLoginModule required ... user_NAME=\"password\";)")
            continue  # SCRAM's users are in the credential store; its (and OAUTHBEARER's) line is optional
        entry = parse_jaas(text, f"{prefix}{key}")
        if entry.login_module != _LOGIN_MODULES[mechanism]:
            raise ConfigError(f"{prefix}{key}: {mechanism} needs {_LOGIN_MODULES[mechanism]}, "
                              f"not {entry.login_module}")
        jaas[mechanism] = entry
    oauth = {k: v for k, v in eff.items() if k in OAUTH_SETTINGS}
    url = oauth.get("sasl.oauthbearer.jwks.endpoint.url", "")
    if url and not url.startswith(("http://", "https://")):
        raise ConfigError(f"sasl.oauthbearer.jwks.endpoint.url of listener {name} must be an http(s) URL, "
                          f"not {url!r}")
    return ListenerSecurity(name, protocol, ssl, mechanisms, jaas, delay_ms, max_receive, reauth_ms, oauth)


def int_setting(settings: Mapping[str, str], name: str, default: int) -> int:
    """An integer setting (at least 0), ConfigError naming it otherwise."""
    raw = settings.get(name, str(default))
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"invalid value {raw!r} for {name}: expected int") from None
    if value < 0:
        raise ConfigError(f"invalid value {raw!r} for {name}: must be at least 0")
    return value


def _check_tls(name: str, ssl: Mapping[str, str]) -> None:
    prefix = f"listener.name.{name.lower()}."
    for kind in ("ssl.keystore.type", "ssl.truststore.type"):
        value = ssl.get(kind, "PEM").upper()
        if value != "PEM":
            raise ConfigError(f"{kind}={value} for listener {name}: streamkit reads PEM only "
                              "(KIP-651; convert with openssl pkcs12 -nodes)")
    if not ssl.get("ssl.keystore.location") and not ssl.get("ssl.keystore.key"):
        raise ConfigError(f"listener {name} uses TLS but has no key: set ssl.keystore.location (a PEM file with "
                          f"the private key and certificate chain) or ssl.keystore.key and "
                          f"ssl.keystore.certificate.chain (or their {prefix} forms)")
    if ssl.get("ssl.keystore.key") and not ssl.get("ssl.keystore.certificate.chain"):
        raise ConfigError(f"listener {name}: ssl.keystore.key needs ssl.keystore.certificate.chain")
    auth = ssl.get("ssl.client.auth", "none").lower()
    if auth not in CLIENT_AUTH:
        raise ConfigError(f"invalid ssl.client.auth {auth!r} for listener {name} (one of {', '.join(CLIENT_AUTH)})")
    if auth != "none" and not (ssl.get("ssl.truststore.location") or ssl.get("ssl.truststore.certificates")):
        raise ConfigError(f"listener {name}: ssl.client.auth={auth} needs ssl.truststore.location (the CA "
                          "certificates that sign client certificates)")
