"""Serving an ASGI app with uvicorn inside the caller's event loop, on a socket bound first
(so port 0 gives a known port before anything starts): Connect's REST API, the schema
registry, the console, the broker's metrics. The process handles signals itself, so
uvicorn's own signal capture is off.

Each can be served over TLS with HTTP basic authentication (``HttpSecurity``), as Kafka
Connect's BasicAuthSecurityRestExtension and Confluent's ``authentication.method=BASIC`` do:
the certificate is a PEM keystore (the private key and the chain in one file, Kafka's KIP-651
form), and the users are a Jetty/Kafka ``PropertyFileLoginModule`` file, ``user:
password[,role...]`` lines, named by a JAAS file's login module (``file="..."``) or directly. A request without valid credentials is answered 401 with a
JSON body (``{"error_code": 401, "message": ...}``) and ``WWW-Authenticate: Basic``.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import hmac
import re
import socket
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import uvicorn

__all__ = [
    "BasicAuth",
    "HttpSecurity",
    "HttpSecurityError",
    "HttpServer",
    "http_client_options",
    "jaas_credentials_file",
    "read_credentials",
    "server_security",
]

_STOP_GRACE_S = 5.0

_Scope = dict[str, Any]
_Receive = Callable[[], Awaitable[dict[str, Any]]]
_Send = Callable[[dict[str, Any]], Awaitable[None]]


class HttpSecurityError(ValueError):
    """A TLS or basic-auth setting of an HTTP server that cannot be used; the message names it."""


def read_credentials(path: Path | str) -> dict[str, str]:
    """Users and passwords of a PropertyFileLoginModule file: ``user: password[,role...]``
    (or ``user=password``) lines, ``#`` comments. Obfuscated (``OBF:``) or hashed
    (``MD5:``, ``CRYPT:``) passwords are refused rather than compared as text."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise HttpSecurityError(f"cannot read the credentials file {path}: {exc.strerror or exc}") from None
    users: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        seps = [i for i in (line.find(":"), line.find("=")) if i > 0]
        if not seps:
            raise HttpSecurityError(f"{path}:{number}: expected 'user: password', got {line!r}")
        user, password = line[:min(seps)].strip(), line[min(seps) + 1:].strip().split(",")[0].strip()
        if password.startswith(("OBF:", "MD5:", "CRYPT:")):
            raise HttpSecurityError(f"{path}:{number}: {password.split(':')[0]} passwords are not supported; "
                                    "write the password itself (keep the file readable by the server only)")
        users[user] = password
    if not users:
        raise HttpSecurityError(f"{path}: no users")
    return users


_JAAS_SECTION = re.compile(r"(\w+)\s*\{(.*?)\}\s*;", re.S)
_JAAS_FILE = re.compile(r'\bfile\s*=\s*"([^"]+)"')


def jaas_credentials_file(path: Path | str, section: str) -> Path:
    """The ``file="..."`` of the PropertyFileLoginModule in ``section`` of a JAAS file
    (``KafkaConnect { ...PropertyFileLoginModule required file="/etc/connect.password"; };``)."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise HttpSecurityError(f"cannot read the JAAS file {path}: {exc.strerror or exc}") from None
    sections = {name: body for name, body in _JAAS_SECTION.findall(text)}
    if section not in sections:
        raise HttpSecurityError(f"{path}: no {section} {{ ... }}; section (found: {', '.join(sections) or 'none'})")
    body = sections[section]
    found = _JAAS_FILE.search(body)
    if "PropertyFileLoginModule" not in body or found is None:
        raise HttpSecurityError(f'{path}: the {section} section needs a PropertyFileLoginModule with file="..."')
    return Path(found.group(1))


@dataclass(frozen=True)
class HttpSecurity:
    """TLS (a PEM keystore) and/or basic authentication (users) of one HTTP server."""

    keystore: Path | None = None  # PEM: the private key and the certificate chain (KIP-651)
    key_password: str | None = None
    users: Mapping[str, str] = field(default_factory=dict)  # empty: no authentication
    realm: str = "streamkit"

    @property
    def scheme(self) -> str:
        return "https" if self.keystore is not None else "http"

    def check(self) -> None:
        """A keystore that cannot be loaded fails here, naming the file, not at the first request."""
        if self.keystore is None:
            return
        import ssl

        try:
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(
                self.keystore, None, self.key_password)
        except (OSError, ssl.SSLError) as exc:
            raise HttpSecurityError(f"cannot load the TLS keystore {self.keystore}: "
                                    f"{getattr(exc, 'strerror', None) or exc}") from None


def server_security(settings: Mapping[str, Any], listener: str, *, tls_prefixes: tuple[str, ...],
                    basic_auth: bool, jaas_section: str, realm: str) -> HttpSecurity:
    """The ``HttpSecurity`` of a server whose first listener is ``listener``, under Kafka's
    and Confluent's names: with an ``https://`` listener, ``ssl.keystore.location`` (PEM,
    ``ssl.keystore.type=PEM``) and ``ssl.key.password``, read under the first of
    ``tls_prefixes`` that names a keystore (Connect's ``listeners.https.`` before none); with
    ``basic_auth``, the users of the PropertyFileLoginModule that the ``jaas_section`` of
    the JAAS file ``java.security.auth.login.config`` names."""
    def get(name: str) -> str | None:
        value = settings.get(name)
        return str(value).strip() if value is not None and str(value).strip() else None

    keystore = key_password = None
    if listener.lower().startswith("https://"):
        prefix = next((p for p in tls_prefixes if get(f"{p}ssl.keystore.location")), None)
        if prefix is None:
            raise HttpSecurityError(f"listeners={listener} needs {tls_prefixes[0]}ssl.keystore.location "
                                    "(a PEM file with the private key and the certificate chain)")
        kind = (get(f"{prefix}ssl.keystore.type") or "PEM").upper()
        if kind != "PEM":
            raise HttpSecurityError(f"{prefix}ssl.keystore.type={kind}: only PEM keystores are read")
        keystore, key_password = Path(str(get(f"{prefix}ssl.keystore.location"))), get(f"{prefix}ssl.key.password")
    elif not listener.lower().startswith("http://"):
        raise HttpSecurityError(f"listeners: expected http://HOST:PORT or https://HOST:PORT, got {listener!r}")
    users: dict[str, str] = {}
    if basic_auth:
        jaas = get("java.security.auth.login.config")
        if jaas is None:
            raise HttpSecurityError("basic authentication needs java.security.auth.login.config: a JAAS file whose "
                                    f"{jaas_section} section names a PropertyFileLoginModule file of users")
        users = read_credentials(jaas_credentials_file(jaas, jaas_section))
    security = HttpSecurity(keystore, key_password, users, realm)
    security.check()
    return security


def http_client_options(user_info: str | None = None, ca_location: str | None = None) -> dict[str, Any]:
    """httpx arguments of a client of such a server: ``user_info`` (``USER:PASSWORD``) as
    basic authentication, ``ca_location`` (PEM) the CAs its certificate is verified with
    (the system's when None). Credentials in the URL (``https://user:password@host``) work
    without either: httpx sends them."""
    out: dict[str, Any] = {}
    if user_info:
        user, sep, password = user_info.partition(":")
        if not sep:
            raise HttpSecurityError("basic auth user info: expected USER:PASSWORD")
        out["auth"] = (user, password)
    if ca_location:
        import ssl

        if not Path(ca_location).is_file():
            raise HttpSecurityError(f"{ca_location}: no such CA file")
        out["verify"] = ssl.create_default_context(cafile=ca_location)
    return out


class BasicAuth:
    """ASGI middleware: every HTTP request and websocket needs ``Authorization: Basic`` with
    one of ``users``' passwords (compared in constant time)."""

    def __init__(self, app: Any, users: Mapping[str, str], realm: str) -> None:
        self.app = app
        self._users = {user.encode(): password.encode() for user, password in users.items()}
        self._challenge = f'Basic realm="{realm}", charset="UTF-8"'.encode()

    def _allowed(self, scope: _Scope) -> bool:
        header = next((v for k, v in scope.get("headers", ()) if k == b"authorization"), b"")
        scheme, _, token = header.partition(b" ")
        if scheme.lower() != b"basic":
            return False
        try:
            user, sep, password = base64.b64decode(token.strip(), validate=True).partition(b":")
        except (binascii.Error, ValueError):
            return False
        expected = self._users.get(user)
        # compared even for an unknown user, so that the time taken does not tell users apart
        matches = hmac.compare_digest(password, expected if expected is not None else b"\0" * 64)
        return bool(sep) and expected is not None and matches

    async def __call__(self, scope: _Scope, receive: _Receive, send: _Send) -> None:
        if scope["type"] not in ("http", "websocket") or self._allowed(scope):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        has_header = any(k == b"authorization" for k, _v in scope.get("headers", ()))
        message = "invalid credentials" if has_header else "authentication required"
        body = orjson.dumps({"error_code": 401, "message": message})
        await send({"type": "http.response.start", "status": 401, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
            (b"www-authenticate", self._challenge)]})
        await send({"type": "http.response.body", "body": body})


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class HttpServer:
    def __init__(self, app: Any, host: str, port: int, what: str = "the REST API",
                 security: HttpSecurity | None = None) -> None:
        self.security = security or HttpSecurity()
        self.security.check()
        if self.security.users:
            app = BasicAuth(app, self.security.users, self.security.realm)
        self._sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._sock.bind((host, port))
        except OSError as exc:
            self._sock.close()
            where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
            raise OSError(exc.errno, f"{what} cannot listen on {where}: {exc.strerror}") from exc
        self.host = host
        self.port = int(self._sock.getsockname()[1])
        tls: dict[str, Any] = {}
        if self.security.keystore is not None:
            tls = {"ssl_certfile": str(self.security.keystore), "ssl_keyfile_password": self.security.key_password}
        config = uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False, **tls)
        self._server = _Server(config)
        self._task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        """Where a local client reaches it (a wildcard bind is reached on the loopback)."""
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        host = f"[{host}]" if ":" in host else host
        return f"{self.security.scheme}://{host}:{self.port}"

    async def start(self) -> None:
        self._task = asyncio.create_task(self._server.serve(sockets=[self._sock]), name="http-server")
        while not self._server.started:
            if self._task.done():
                self._task.result()
                raise RuntimeError("the HTTP server stopped while starting")
            await asyncio.sleep(0.02)

    async def stop(self) -> None:
        self._server.should_exit = True
        if self._task is not None:
            # An idle TLS connection closes only once its client answers the close_notify (or
            # after asyncio's 30 s): a client that keeps an idle pooled connection without
            # reading it would hold the stop, so the rest are dropped after a grace period.
            await asyncio.wait({self._task}, timeout=_STOP_GRACE_S)
            self._server.force_exit = True
            await self._task
        self._sock.close()
