"""SCRAM users through the Admin API (AlterUserScramCredentials and
DescribeUserScramCredentials, KIP-554), as ``kafka-configs.sh --entity-type users`` does.

It uses librdkafka (confluent-kafka), which salts and hashes the password on the client
(only the salted password crosses the wire) and speaks every security protocol, so the
same command manages users of a TLS / SASL listener given ``client_config`` (librdkafka's
names: security.protocol, sasl.mechanism, sasl.username, ssl.ca.location ...)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from streamkit.clients.errors import ClientError
from streamkit.clients.security import command_client_config

__all__ = ["MECHANISMS", "UserCredentials", "create_user", "delete_user", "describe_users"]

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
_TIMEOUT_S = 15.0


@dataclass(frozen=True, slots=True)
class UserCredentials:
    user: str
    mechanisms: dict[str, int]  # mechanism -> iterations


def _admin(bootstrap: str, client_config: Mapping[str, str]) -> Any:
    try:
        from confluent_kafka.admin import AdminClient
    except ImportError:  # pragma: no cover - confluent-kafka is a dependency
        raise ClientError("streamkit users needs confluent-kafka (pip install confluent-kafka)") from None
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": int(_TIMEOUT_S * 1000),
                        "log_level": 0, **command_client_config(), **client_config})


def _mechanism(name: str) -> Any:
    from confluent_kafka.admin import ScramMechanism  # type: ignore[attr-defined]  # re-exported, untyped

    if name.upper() not in MECHANISMS:
        raise ClientError(f"unknown SCRAM mechanism {name!r} (one of {', '.join(MECHANISMS)})")
    return ScramMechanism[name.upper().replace("-", "_")]


def _wait(future: Any, what: str) -> Any:
    from confluent_kafka import KafkaException

    try:
        return future.result(timeout=_TIMEOUT_S)
    except KafkaException as exc:
        error = exc.args[0]
        # librdkafka 2.x reads a per-user error message of DescribeUserScramCredentials one
        # byte too far (a control character at its end): printable characters only.
        message = "".join(c for c in error.str() if c.isprintable())
        raise ClientError(f"{what}: {message} ({error.name()})") from None
    except TimeoutError:
        raise ClientError(f"{what}: no answer within {_TIMEOUT_S:.0f}s") from None


def _alter(bootstrap: str, alterations: list[Any], what: str, client_config: Mapping[str, str]) -> None:
    admin = _admin(bootstrap, client_config)  # held until the answers are in: its end fails them
    futures = admin.alter_user_scram_credentials(alterations, request_timeout=_TIMEOUT_S)
    for future in futures.values():
        _wait(future, what)


def create_user(bootstrap: str, user: str, password: str, mechanism: str = "SCRAM-SHA-256",
                iterations: int = 4096, client_config: Mapping[str, str] | None = None) -> None:
    """Create or update ``user``'s credential for ``mechanism``."""
    from confluent_kafka.admin import ScramCredentialInfo, UserScramCredentialUpsertion  # type: ignore[attr-defined]  # re-exported, untyped

    if not password:
        raise ClientError("the password must not be empty")
    info = ScramCredentialInfo(_mechanism(mechanism), iterations)
    _alter(bootstrap, [UserScramCredentialUpsertion(user, info, password.encode())],
           f"cannot set {mechanism.upper()} credentials of {user}", client_config or {})


def delete_user(bootstrap: str, user: str, mechanisms: list[str] | None = None,
                client_config: Mapping[str, str] | None = None) -> list[str]:
    """Delete ``user``'s credentials (of ``mechanisms``, else all it has); the mechanisms deleted."""
    from confluent_kafka.admin import UserScramCredentialDeletion  # type: ignore[attr-defined]  # re-exported, untyped

    if not mechanisms:
        mechanisms = list(describe_users(bootstrap, [user], client_config)[0].mechanisms)
    _alter(bootstrap, [UserScramCredentialDeletion(user, _mechanism(m)) for m in mechanisms],
           f"cannot delete credentials of {user}", client_config or {})
    return [m.upper() for m in mechanisms]


def describe_users(bootstrap: str, users: list[str] | None = None,
                   client_config: Mapping[str, str] | None = None) -> list[UserCredentials]:
    """The SCRAM mechanisms (and iterations) of ``users``, or of every user."""
    admin = _admin(bootstrap, client_config or {})
    if users:
        futures = admin.describe_user_scram_credentials(users, request_timeout=_TIMEOUT_S)
        found = {u: _wait(f, f"cannot describe user {u}") for u, f in futures.items()}
    else:
        found = _wait(admin.describe_user_scram_credentials(request_timeout=_TIMEOUT_S), "cannot describe users")
    return [UserCredentials(user, {i.mechanism.name.replace("_", "-"): i.iterations
                                   for i in description.scram_credential_infos})
            for user, description in sorted(found.items())]
