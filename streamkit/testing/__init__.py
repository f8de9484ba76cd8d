"""Test helpers for users' apps and for streamkit's own tests: real brokers on port 0.

Three ways to run one, all real (the Kafka protocol on a loopback socket):

- ``async with embedded_broker(tmp_path) as broker``: in the caller's asyncio loop.
- ``with BrokerThread(tmp_path) as broker``: on a background thread with its own loop, for
  synchronous tests and clients (confluent-kafka, kafka-python).
- ``with BrokerProcess(tmp_path) as broker``: a separate ``streamkit broker`` process, which a
  test can SIGKILL (``broker.kill()``) and start again on the same data directory.

``with SchemaRegistryProcess(broker.bootstrap, log_file) as registry`` runs
``streamkit schema-registry`` on it (``registry.url``).

``await http_get(port, "/tables/NAME/KEY")`` asks a running worker's web endpoints.

Each exposes ``bootstrap`` ("127.0.0.1:PORT"). Settings use Kafka's broker names; the
defaults here make groups rebalance at once (``group.initial.rebalance.delay.ms=0``) and
allow short sessions (``group.min.session.timeout.ms=1000``) so tests run quickly.

For clusters: ``with ZooKeeperServer(tmp_path / "zk") as zk`` runs a real ZooKeeper on a
free port; ``streamkit.testing_cluster`` starts brokers on it, ``streamkit.testing_netns``
puts processes on separate network namespaces to partition them, and
``streamkit.testing_history`` checks a recorded history of produces and reads.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from streamkit.broker.config import BrokerConfig
from streamkit.broker.server import Broker

if TYPE_CHECKING:
    from kazoo.client import KazooClient

__all__ = [
    "TEST_SETTINGS", "BrokerProcess", "BrokerThread", "ChildProcess", "SchemaRegistryProcess", "ZooKeeperServer",
    "embedded_broker",
    "free_port", "http_get", "log_tail", "metric_value", "zookeeper_available",
]

TEST_SETTINGS: dict[str, str] = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "offsets.topic.num.partitions": "4",
    "transaction.state.log.num.partitions": "4",
    "share.coordinator.state.topic.num.partitions": "4",
}


def _settings(overrides: Mapping[str, Any] | None) -> dict[str, str]:
    merged = dict(TEST_SETTINGS)
    merged.update({k: str(v) for k, v in (overrides or {}).items()})
    return merged


@contextlib.asynccontextmanager
async def embedded_broker(data_dir: Path | str | None = None, settings: Mapping[str, Any] | None = None,
                          host: str = "127.0.0.1") -> AsyncIterator[Broker]:
    """A broker on a free port in the running event loop; stopped cleanly on exit."""
    with contextlib.ExitStack() as stack:
        directory = Path(data_dir) if data_dir else Path(stack.enter_context(tempfile.TemporaryDirectory()))
        broker = Broker(directory, BrokerConfig.from_kafka(_settings(settings)), host, 0)
        await broker.start()
        try:
            yield broker
        finally:
            await broker.stop()


async def http_get(port: int, path: str, host: str = "127.0.0.1", timeout: float = 10) -> tuple[int, Any]:
    """GET ``path`` from a worker's web endpoints (``--web-port``): (status, body), a JSON
    body decoded, any other as text."""
    import json

    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        await writer.drain()
        data = await asyncio.wait_for(reader.read(), timeout)
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    if b"application/json" in head.lower():
        return status, json.loads(body)
    return status, body.decode()


def metric_value(text: str, name: str, **labels: str) -> float | None:
    """The value of sample ``name`` with exactly ``labels`` in a worker's ``/metrics`` text
    (Prometheus exposition format), or None when there is no such sample."""
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    return None


class BrokerThread:
    """A broker on its own thread and event loop (for synchronous code)."""

    def __init__(self, data_dir: Path | str, settings: Mapping[str, Any] | None = None,
                 host: str = "127.0.0.1") -> None:
        self.broker = Broker(Path(data_dir), BrokerConfig.from_kafka(_settings(settings)), host, 0)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="streamkit-broker", daemon=True)

    @property
    def bootstrap(self) -> str:
        """``host:port`` of the broker, for clients' ``bootstrap.servers``."""
        return self.broker.bootstrap

    def start(self) -> BrokerThread:
        """Start the broker on its thread; returns once it listens."""
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.broker.start(), self._loop).result(30)
        return self

    def stop(self) -> None:
        """Stop the broker cleanly and end its thread (a no-op once stopped)."""
        if not self._thread.is_alive():
            return
        asyncio.run_coroutine_threadsafe(self.broker.stop(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def __enter__(self) -> BrokerThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class ChildProcess:
    """The signals a test sends a helper's child process (``process``), and its log."""

    process: subprocess.Popen[bytes] | None
    log_file: Path

    @property
    def alive(self) -> bool:
        """Whether the process was started and has not exited."""
        return self.process is not None and self.process.poll() is None

    def terminate(self) -> None:
        """SIGTERM (and SIGCONT, so a paused process handles it) without waiting."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.send_signal(signal.SIGCONT)

    def stop(self, timeout_s: float = 30) -> int:
        """``terminate`` and wait: the exit code (0 for a broker's clean shutdown, 143 for
        ZooKeeper's JVM)."""
        self.terminate()
        return self.wait(timeout_s)

    def wait(self, timeout_s: float = 30) -> int:
        """Wait for the process to exit: its exit code (0 if never started)."""
        return self.process.wait(timeout_s) if self.process is not None else 0

    def kill(self) -> None:
        """SIGKILL (paused or not): no flush, no clean shutdown."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def pause(self) -> None:
        """SIGSTOP: the process freezes (a long GC pause, a hung host); its sockets stay
        open, so peers see it slow, not gone, until their timeouts. Returns once stopped."""
        self._signal(signal.SIGSTOP, stopped=True)

    def resume(self) -> None:
        """SIGCONT after ``pause``; returns once running again."""
        self._signal(signal.SIGCONT, stopped=False)

    @property
    def paused(self) -> bool:
        """Whether the process is stopped (by ``pause``), as the kernel shows it."""
        if not self.alive:
            return False
        assert self.process is not None
        # /proc/PID/stat is "pid (comm) STATE ...": comm may hold spaces, the state follows
        # the last ")".
        stat = Path(f"/proc/{self.process.pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] == "T"

    def _signal(self, sig: signal.Signals, stopped: bool) -> None:
        """Send ``sig`` and wait until the kernel shows the process stopped (or not):
        signals are delivered asynchronously."""
        if not self.alive:
            raise RuntimeError(f"cannot send {sig.name}: the process is not running")
        assert self.process is not None
        self.process.send_signal(sig)
        deadline = time.monotonic() + 10
        while self.paused != stopped:
            if time.monotonic() > deadline:
                raise TimeoutError(f"process {self.process.pid} did not take {sig.name} within 10s")
            time.sleep(0.005)

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of its log (stdout and stderr)."""
        return log_tail(self.log_file, lines)

    def _await_ready_file(self, ready: Path, timeout_s: float, what: str) -> list[str]:
        """The words the started process writes to ``ready`` once it serves (the file is
        removed); killed if it does not within ``timeout_s``."""
        assert self.process is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if ready.exists() and ready.read_text().strip():
                words = ready.read_text().split()
                ready.unlink()
                return words
            if self.process.poll() is not None:
                raise RuntimeError(f"{what} exited with {self.process.returncode}; see {self.log_file}:\n"
                                   f"{log_tail(self.log_file, 20)}")
            time.sleep(0.02)
        self.kill()
        raise TimeoutError(f"{what} did not start within {timeout_s}s; see {self.log_file}")


class BrokerProcess(ChildProcess):
    """``streamkit broker`` as a child process on a free port.

    ``command_prefix`` runs it under another command, e.g. ``Host.prefix`` of
    ``streamkit.testing_netns`` (``ip netns exec NS``) to put it on its own network.
    With ``listeners`` in ``settings`` the broker binds what that says (``--host``/``--port``
    are not passed); either way the bound port is learned from the ready file, and a start
    after a stop or kill binds the port learned before, so a bootstrap list stays valid.
    """

    def __init__(self, data_dir: Path | str, settings: Mapping[str, Any] | None = None,
                 host: str = "127.0.0.1", port: int = 0, log_file: Path | None = None,
                 command_prefix: Sequence[str] = ()) -> None:
        self.data_dir = Path(data_dir)
        self.settings = _settings(settings)
        self.host = host
        self.port = port
        self.log_file = log_file or self.data_dir.parent / f"{self.data_dir.name}-broker.log"
        self.command_prefix = list(command_prefix)
        self.process: subprocess.Popen[bytes] | None = None
        self._ready: Path | None = None
        self.metrics_port: int | None = None  # with metrics.listener set
        self.listener_ports: dict[str, int] = {}  # listener name -> bound port
        self.schema_registry_port: int | None = None  # with schema.registry.listeners set
        self.console_port: int | None = None  # with console.listeners set

    def address(self, listener: str) -> str:
        """host:port of one of its listeners (``listeners``), e.g. ``address("SASL_SSL")``;
        with a single listener, its port."""
        port = self.listener_ports[listener.upper()] if self.listener_ports else self.port
        return f"{self.host}:{port}"

    @property
    def bootstrap(self) -> str:
        """``host:port`` of its first listener, for clients' ``bootstrap.servers``."""
        return f"{self.host}:{self.port}"

    def command(self, ready_file: Path | str = "READY") -> list[str]:
        """The command line ``start`` runs (with ``ready_file`` as ``--ready-file``)."""
        args = [*self.command_prefix, sys.executable, "-m", "streamkit", "broker",
                "--data-dir", str(self.data_dir), "--ready-file", str(ready_file)]
        if "listeners" not in self.settings:
            args += ["--host", self.host, "--port", str(self.port)]
        for key, value in self.settings.items():
            args += ["--set", f"{key}={value}"]
        return args

    def start(self, timeout_s: float = 30) -> BrokerProcess:
        """Start the process and wait until it listens (``launch`` then ``wait_ready``)."""
        self.launch()
        return self.wait_ready(timeout_s)

    def launch(self) -> None:
        """Start the process and return at once; ``wait_ready`` waits until it listens
        (to start several brokers side by side)."""
        ready = Path(tempfile.mkstemp(prefix="streamkit-ready-")[1])
        ready.unlink()
        self._ready = ready
        self.process = _spawn(self.command(ready), self.log_file)

    def wait_ready(self, timeout_s: float = 30) -> BrokerProcess:
        """Wait until the launched broker listens, and learn its port."""
        assert self._ready is not None, "launch() first"
        words = self._await_ready_file(self._ready, timeout_s, "broker")
        ports = [int(w) for w in words if "=" not in w]
        named = dict(w.split("=", 1) for w in words if "=" in w)
        self.port = ports[0]
        self.metrics_port = ports[1] if len(ports) > 1 else None
        self.schema_registry_port = int(named["schema-registry"]) if "schema-registry" in named else None
        self.console_port = int(named["console"]) if "console" in named else None
        self.listener_ports = {n: int(p) for n, p in named.items() if n not in ("schema-registry", "console")}
        self._ready = None
        return self

    def __enter__(self) -> BrokerProcess:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is None:
            self.stop()
        else:
            self.kill()


class SchemaRegistryProcess(ChildProcess):
    """``streamkit schema-registry`` as a child process on a free port, its store on
    ``bootstrap``. A start after a stop or kill binds the port learned before, so clients
    keep their URL; ``settings`` use Confluent's names."""

    def __init__(self, bootstrap: str, log_file: Path, settings: Mapping[str, Any] | None = None,
                 host: str = "127.0.0.1") -> None:
        self.bootstrap = bootstrap
        self.log_file = log_file
        self.settings = {k: str(v) for k, v in (settings or {}).items()}
        self.host = host
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        # served over https when given a keystore (ssl.keystore.location)
        self.scheme = "https" if self.settings.get("ssl.keystore.location") else "http"

    @property
    def url(self) -> str:
        """The registry's base URL (``http://`` or ``https://`` with a keystore)."""
        return f"{self.scheme}://{self.host}:{self.port}"

    def start(self, timeout_s: float = 60) -> SchemaRegistryProcess:
        """Start the registry and wait until it serves; returns with ``port`` and ``url`` set."""
        ready = Path(tempfile.mkstemp(prefix="streamkit-registry-ready-")[1])
        ready.unlink()
        settings = {"kafkastore.bootstrap.servers": self.bootstrap, "listeners": f"{self.scheme}://{self.host}:{self.port}",
                    **self.settings}
        args = [sys.executable, "-m", "streamkit", "schema-registry", "--ready-file", str(ready)]
        for key, value in settings.items():
            args += ["--set", f"{key}={value}"]
        self.process = _spawn(args, self.log_file)
        self.port = int(self._await_ready_file(ready, timeout_s, "schema registry")[0])
        return self

    def __enter__(self) -> SchemaRegistryProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def log_tail(path: Path, lines: int = 40) -> str:
    """The last ``lines`` lines of a child's log file, for assertion messages."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return f"(no log at {path})"


# Every child a helper started, SIGKILLed if still running when this interpreter exits (a
# test run stopped midway must not leave brokers or a paused ZooKeeper behind).
_children: weakref.WeakSet[subprocess.Popen[bytes]] = weakref.WeakSet()


@atexit.register
def _kill_children() -> None:
    for child in list(_children):
        if child.poll() is None:
            child.kill()


def _spawn(args: Sequence[str], log_file: Path, cwd: Path | None = None) -> subprocess.Popen[bytes]:
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with open(log_file, "ab") as log:  # the child keeps its own copy of the descriptor
        child = subprocess.Popen(list(args), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 cwd=cwd)
    _children.add(child)
    return child


ZOOKEEPER_CLASSPATH: tuple[str, ...] = tuple(
    f"/usr/share/java/{jar}.jar" for jar in ("zookeeper", "zookeeper-jute", "slf4j-api", "slf4j-simple"))
_ZOOKEEPER_MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"
# A small heap, the serial collector and the C1 compiler only: a test server starts in well
# under a second and leaves the two cores to the brokers.
_ZOOKEEPER_JVM = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.net.preferIPv4Stack=true",
                  "-Dorg.slf4j.simpleLogger.showDateTime=true",
                  "-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd HH:mm:ss,SSS")
_PORT_ATTEMPTS = 5


def zookeeper_available(classpath: Sequence[str] = ZOOKEEPER_CLASSPATH) -> bool:
    """Whether ``ZooKeeperServer`` can run here: a ``java`` and Debian's ``zookeeper`` jars."""
    import shutil

    return shutil.which("java") is not None and all(Path(jar).is_file() for jar in classpath)


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now (bind port 0, read it, close). Only for servers that
    cannot bind port 0 themselves: another process may take it before they bind, so retry."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class ZooKeeperServer(ChildProcess):
    """A real, standalone Apache ZooKeeper (Debian's ``zookeeper`` package) on a free port.

    ::

        with ZooKeeperServer(tmp_path / "zk") as zk:
            connect = zk.connect_string("/streamkit")   # "127.0.0.1:PORT/streamkit"
            zk.pause(); zk.resume()                      # SIGSTOP / SIGCONT
            zk.kill(); zk.start()                        # same port, same data
            zk.four_letter("srvr")                       # "Zookeeper version: ...Mode: standalone"

    ``base_dir`` holds ``zoo.cfg``, ``data/`` and ``zookeeper.log``. ``tickTime`` is 500 ms
    (``tick_time_ms``), so sessions may be as short as 1 s (ZooKeeper's minSessionTimeout is
    2 ticks, its maxSessionTimeout 20 ticks) and an expired broker is noticed quickly.
    Four-letter-word commands are enabled, the admin server is off, and writes are not
    fsynced (``forceSync=no``: a killed process keeps what it wrote in the page cache).
    ``settings`` adds or overrides zoo.cfg lines.

    ZooKeeper cannot bind port 0, so ``start`` picks a free port and tries another when
    that one was taken meanwhile; a later ``start`` (after ``stop``/``kill``) keeps the
    port, as clients' connect strings name it. ``command_prefix`` runs the JVM under another
    command (``Host.prefix`` of ``streamkit.testing_netns``, with ``host`` its address).
    """

    def __init__(self, base_dir: Path | str, host: str = "127.0.0.1", tick_time_ms: int = 500,
                 settings: Mapping[str, Any] | None = None, command_prefix: Sequence[str] = (),
                 classpath: Sequence[str] = ZOOKEEPER_CLASSPATH) -> None:
        self.base_dir = Path(base_dir)
        self.host = host
        self.port = 0
        self.tick_time_ms = tick_time_ms
        self.settings = {k: str(v) for k, v in (settings or {}).items()}
        self.command_prefix = list(command_prefix)
        self.classpath = list(classpath)
        self.log_file = self.base_dir / "zookeeper.log"
        self.data_dir = self.base_dir / "data"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        """``host:port``, for ``zookeeper.connect``."""
        return f"{self.host}:{self.port}"

    def connect_string(self, chroot: str = "") -> str:
        """``host:port/chroot`` (``chroot`` "" or starting with "/")."""
        if chroot and not chroot.startswith("/"):
            raise ValueError(f"a ZooKeeper chroot starts with '/', got {chroot!r}")
        return self.address + chroot

    def config(self) -> dict[str, str]:
        """The zoo.cfg lines ``start`` writes."""
        return {
            "tickTime": str(self.tick_time_ms),
            "minSessionTimeout": str(2 * self.tick_time_ms),
            "maxSessionTimeout": str(20 * self.tick_time_ms),
            "dataDir": str(self.data_dir),
            "clientPort": str(self.port),
            "clientPortAddress": self.host,
            "4lw.commands.whitelist": "*",
            "admin.enableServer": "false",
            "forceSync": "no",
            **self.settings,
        }

    def command(self) -> list[str]:
        """The ``java`` command line that runs this server."""
        return [*self.command_prefix, "java", *_ZOOKEEPER_JVM, "-cp", ":".join(self.classpath),
                _ZOOKEEPER_MAIN, str(self.base_dir / "zoo.cfg")]

    def start(self, timeout_s: float = 30) -> ZooKeeperServer:
        """Start and wait until it serves requests; on a free port the first time."""
        if self.alive:
            raise RuntimeError(f"ZooKeeper is already running on {self.address}")
        if not zookeeper_available(self.classpath):
            raise RuntimeError("ZooKeeper needs java and Debian's zookeeper package "
                               f"(apt-get install zookeeper): missing one of {self.classpath}")
        keep_port = self.port != 0
        for _ in range(1 if keep_port else _PORT_ATTEMPTS):
            if not keep_port:
                # Under a command prefix (another network namespace) the host's address is
                # not one of ours: any port free here will do, that namespace is new.
                self.port = free_port("0.0.0.0" if self.command_prefix else self.host)
            if self._start_once(timeout_s):
                return self
        raise RuntimeError(f"ZooKeeper could not bind {self.address}: address in use; see {self.log_file}")

    def _start_once(self, timeout_s: float) -> bool:
        """Start on ``self.port``: True once it serves, False if the port was taken."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.base_dir / "zoo.cfg").write_text("".join(f"{k}={v}\n" for k, v in self.config().items()))
        log_start = self.log_file.stat().st_size if self.log_file.exists() else 0
        self.process = _spawn(self.command(), self.log_file, cwd=self.base_dir)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                with open(self.log_file, "rb") as log:
                    log.seek(log_start)
                    if b"Address already in use" in log.read():
                        return False
                raise RuntimeError(f"ZooKeeper exited with {self.process.returncode}; see {self.log_file}:\n"
                                   f"{log_tail(self.log_file, 20)}")
            if self._serving():
                return True
            time.sleep(0.05)
        self.kill()
        raise TimeoutError(f"ZooKeeper did not serve within {timeout_s}s; see {self.log_file}")

    def _serving(self) -> bool:
        """``conf`` answers with our data directory once this server (not another one on
        the port) serves; before that it says it is not serving requests."""
        try:
            answer = self.four_letter("conf", timeout_s=1)
        except OSError:
            return False
        return f"dataDir={self.data_dir}/version-2\n" in answer

    @contextlib.contextmanager
    def client(self, chroot: str = "", timeout_s: float = 10) -> Iterator[KazooClient]:
        """A connected ``kazoo`` client (session timeout ``timeout_s``) under ``chroot``,
        which is created when missing (as a broker does), closed on exit; it reconnects
        as a broker's does (``kazoo_client``)::

            with zk.client("/streamkit") as client:
                client.get_children("/brokers/ids")
        """
        from streamkit.broker.cluster.zk import kazoo_client

        hosts = self.connect_string(chroot)
        if chroot:
            with self.client() as root:
                root.ensure_path(chroot)
        client = kazoo_client(hosts, int(timeout_s * 1000))
        client.start(timeout=30)
        try:
            yield client
        finally:
            client.stop()
            client.close()

    def four_letter(self, word: str, timeout_s: float = 5) -> str:
        """Send a four-letter-word command (``ruok``, ``srvr``, ``stat``, ``cons``, ``mntr``,
        ...) and return the answer."""
        import socket

        with socket.create_connection((self.host, self.port), timeout=timeout_s) as sock:
            sock.sendall(word.encode())
            chunks = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        return b"".join(chunks).decode(errors="replace")

    def restart(self, timeout_s: float = 30) -> ZooKeeperServer:
        """``stop`` then ``start`` on the same port and data."""
        self.stop(timeout_s)
        return self.start(timeout_s)

    def __enter__(self) -> ZooKeeperServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.kill()


# The app test driver (in memory, no broker): imported last, it builds on the streams runtime.
from streamkit.testing.connect import ConnectorTestDriver  # noqa: E402
from streamkit.testing.driver import (  # noqa: E402
    AppTestDriver,
    DriverError,
    InputTopic,
    OutputRecord,
    OutputTopic,
    TableView,
)

__all__ += ["AppTestDriver", "ConnectorTestDriver", "DriverError", "InputTopic", "OutputRecord", "OutputTopic",
            "TableView"]
