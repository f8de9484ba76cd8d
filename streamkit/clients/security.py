"""Kafka's client security settings, translated to aiokafka's arguments: the one place where
streamkit's own clients (stream workers, the CLI) learn how to reach a TLS or SASL listener.

The names are librdkafka's, as users write them for confluent-kafka and kcat:

=========================== ===================================================================
``security.protocol``       PLAINTEXT (default), SSL, SASL_PLAINTEXT or SASL_SSL
``sasl.mechanism``          PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
``sasl.username``           the user
``sasl.password``           its password
``sasl.jaas.config``        Java clients' line instead of the two above:
                            ``...PlainLoginModule required username="u" password="p";``
``ssl.ca.location``         PEM file of the CAs that signed the broker's certificate
                            (Kafka's ``ssl.truststore.location`` with ``ssl.truststore.type=PEM``)
``ssl.certificate.location`` PEM client certificate, for mutual TLS
``ssl.key.location``        PEM private key of that certificate
=========================== ===================================================================

A Java properties file (``--command-config`` of Kafka's tools) holds the same names:
``read_client_properties`` reads one. The CLI sets a command's client settings once, where it
parses its options (``use_client_config``); the clients of ``streamkit.clients`` read them
where they are built (``command_security``), so every command takes them alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import re
import ssl
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from streamkit.clients.errors import ClientError

__all__ = ["SECURITY_SETTINGS", "aiokafka_security", "client_config_scope", "command_client_config", "command_security",
           "command_settings", "librdkafka_config", "login_refused",
           "read_client_properties", "use_client_config"]

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")

# Every name this module reads; ssl.truststore.location is Kafka's name of ssl.ca.location.
SECURITY_SETTINGS = ("security.protocol", "sasl.mechanism", "sasl.username", "sasl.password", "sasl.jaas.config",
                     "ssl.ca.location", "ssl.truststore.location", "ssl.truststore.type",
                     "ssl.certificate.location", "ssl.key.location")

# The client settings of the running CLI command, by Kafka name: those of its
# --command-config file, and its -X options (which win).
_file_config: contextvars.ContextVar[dict[str, str]] = contextvars.ContextVar(
    "streamkit_command_config", default={})  # noqa: B039  # never mutated: replaced
_option_config: contextvars.ContextVar[dict[str, str]] = contextvars.ContextVar(
    "streamkit_client_options", default={})  # noqa: B039  # never mutated: replaced

_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def _jaas_credentials(line: str) -> tuple[str, str]:
    """username and password of a PlainLoginModule / ScramLoginModule JAAS line."""
    if "PlainLoginModule" not in line and "ScramLoginModule" not in line:
        raise ClientError("sasl.jaas.config: only PlainLoginModule and ScramLoginModule lines are understood")
    options = dict(_JAAS_OPTION.findall(line))
    if "username" not in options or "password" not in options:
        raise ClientError('sasl.jaas.config needs username="..." and password="..."')
    return options["username"], options["password"]


def _readable(name: str, value: str) -> str:
    if not Path(value).is_file():
        raise ClientError(f"{name}={value}: no such file")
    return value


def aiokafka_security(settings: Mapping[str, Any]) -> dict[str, Any]:
    """aiokafka keyword arguments (``security_protocol``, ``sasl_*``, ``ssl_context``) for the
    security settings in ``settings`` (other names are ignored); {} when none is set.
    Bad values raise ``ClientError`` naming the setting."""
    config = {k: str(v).strip() for k, v in settings.items() if k in SECURITY_SETTINGS and v is not None}
    protocol = config.get("security.protocol", "PLAINTEXT").upper()
    if protocol not in PROTOCOLS:
        raise ClientError(f"security.protocol={protocol}: expected one of {', '.join(PROTOCOLS)}")
    out: dict[str, Any] = {}
    if protocol != "PLAINTEXT":
        out["security_protocol"] = protocol
    if protocol.startswith("SASL_"):
        mechanism = config.get("sasl.mechanism", "PLAIN").upper()
        if mechanism not in MECHANISMS:
            raise ClientError(f"sasl.mechanism={mechanism}: streamkit's clients speak {', '.join(MECHANISMS)}")
        username, password = config.get("sasl.username"), config.get("sasl.password")
        if "sasl.jaas.config" in config and username is None:
            username, password = _jaas_credentials(config["sasl.jaas.config"])
        if not username or password is None:
            raise ClientError(f"security.protocol={protocol} needs sasl.username and sasl.password "
                              "(or sasl.jaas.config)")
        out |= {"sasl_mechanism": mechanism, "sasl_plain_username": username, "sasl_plain_password": password}
    if protocol in ("SSL", "SASL_SSL"):
        from aiokafka.helpers import create_ssl_context

        if config.get("ssl.truststore.type", "PEM").upper() != "PEM":
            raise ClientError("ssl.truststore.type: streamkit's clients read PEM files only")
        ca = config.get("ssl.ca.location") or config.get("ssl.truststore.location")
        cert, key = config.get("ssl.certificate.location"), config.get("ssl.key.location")
        if (cert is None) != (key is None):
            raise ClientError("mutual TLS needs both ssl.certificate.location and ssl.key.location")
        out["ssl_context"] = create_ssl_context(
            cafile=_readable("ssl.ca.location", ca) if ca else None,
            certfile=_readable("ssl.certificate.location", cert) if cert else None,
            keyfile=_readable("ssl.key.location", key) if key else None)
    return out


def read_client_properties(path: Path) -> dict[str, str]:
    """A Java properties file of client settings (``--command-config`` of Kafka's tools)."""
    from streamkit.broker.config import read_properties
    from streamkit.log.errors import ConfigError

    try:
        return read_properties(path)
    except ConfigError as exc:
        raise ClientError(str(exc)) from None


async def login_refused(bootstrap: str, security: Mapping[str, Any], timeout_s: float = 10.0) -> str | None:
    """Why the first broker of ``bootstrap`` refuses a connection with ``security`` (a failed
    SASL login, a TLS handshake that fails), or None when it does not. aiokafka only logs
    such reasons and says "Unable to bootstrap"; retrying does not change them."""
    from aiokafka.conn import create_conn
    from aiokafka.errors import (
        AuthenticationFailedError,
        SaslAuthenticationFailed,
        UnsupportedSaslMechanismError,
    )

    from streamkit.clients.lifecycle import bootstrap_addresses

    host, port = bootstrap_addresses(bootstrap)[0]
    try:
        conn = await asyncio.wait_for(create_conn(host, port, client_id="streamkit-login-check",
                                                  request_timeout_ms=int(timeout_s * 1000), **security), timeout_s)
    except (SaslAuthenticationFailed, UnsupportedSaslMechanismError, AuthenticationFailedError) as exc:
        return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    except ssl.SSLError as exc:
        return f"TLS handshake failed: {exc.reason or exc}"
    except (OSError, TimeoutError, Exception):  # unreachable: the caller's own probe says why
        return None
    conn.close()
    return None


def use_client_config(settings: Mapping[str, str], *, from_file: bool) -> None:
    """Add ``settings`` (Kafka names) to the client settings of this command; the CLI calls
    it while it parses ``--command-config`` (``from_file``) and ``-X`` (which win)."""
    var = _file_config if from_file else _option_config
    var.set({**var.get(), **settings})


@contextlib.contextmanager
def client_config_scope(settings: Mapping[str, str]) -> Iterator[None]:
    """Within it (and in the tasks started within it), ``settings`` are the client settings:
    a server acting for one cluster (the web console) sets them for each request, as the CLI
    does for a command."""
    file_token = _file_config.set({})
    option_token = _option_config.set(dict(settings))
    try:
        yield
    finally:
        _option_config.reset(option_token)
        _file_config.reset(file_token)


def _command_config() -> dict[str, str]:
    return {**_file_config.get(), **_option_config.get()}


def command_settings() -> dict[str, str]:
    """Every setting of this command (Kafka's and, for a schema registry, Confluent's names)."""
    return _command_config()


def command_client_config() -> dict[str, str]:
    """The client settings of this command for librdkafka ({} when none was given)."""
    return librdkafka_config(_command_config())


def librdkafka_config(settings: Mapping[str, str]) -> dict[str, str]:
    """``settings`` for librdkafka: the Java clients' ``ssl.truststore.location`` (PEM) and
    ``sasl.jaas.config`` (Plain/Scram login module) become librdkafka's names."""
    from streamkit.schemas.client import REGISTRY_CLIENT_SETTINGS

    # a schema registry's client settings (-X basic.auth.user.info=...) are not librdkafka's
    out = {k: v for k, v in settings.items() if k not in REGISTRY_CLIENT_SETTINGS}
    if "ssl.truststore.location" in out:
        out.setdefault("ssl.ca.location", out.pop("ssl.truststore.location"))
    out.pop("ssl.truststore.type", None)
    if "sasl.jaas.config" in out:
        username, password = _jaas_credentials(out.pop("sasl.jaas.config"))
        out.setdefault("sasl.username", username)
        out.setdefault("sasl.password", password)
    return out


def command_security() -> dict[str, Any]:
    """aiokafka's security arguments for this command's client settings."""
    return aiokafka_security(_command_config())
