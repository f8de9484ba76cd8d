"""``streamkit worker``: load an app by path, apply command-line settings, lock its state
directory, start an embedded broker when it names none, and run it until SIGINT/SIGTERM."""

from __future__ import annotations

import asyncio
import errno
import gc
import importlib
import logging
import os
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from streamkit.dirlock import DataDirectoryError, DirectoryLock
from streamkit.streams.app import App
from streamkit.streams.runtime import DeliveryError, StartupError
from streamkit.streams.settings import SettingsError
from streamkit.streams.table import NotCoPartitionedError

__all__ = ["AppLoadError", "WorkerStartError", "apply_settings", "load_app", "run_worker"]

log = logging.getLogger(__name__)

# Errors whose message already says what happened (no need to name the type).
StreamsError = (DeliveryError, StartupError, NotCoPartitionedError)

# Settings read while the app module is imported (table partition counts, topic names):
# changed afterwards they would split one app into two inconsistent halves.
_BIND_ERRORS = (errno.EADDRINUSE, errno.EADDRNOTAVAIL, errno.EACCES)


class AppLoadError(ValueError):
    pass


class WorkerStartError(RuntimeError):
    """The worker could not start (a port in use, an unusable directory); one line."""


def _where() -> str:
    return f"(from the working directory {Path.cwd()}; run the worker from your project's root)"


def _missing(module_name: str, exc: ModuleNotFoundError) -> str:
    """Where to look: the app's own package (the working directory), or a dependency of it."""
    own = exc.name is None or module_name == exc.name or module_name.startswith(f"{exc.name}.")
    return _where() if own else f"(a module that {module_name} imports is not installed)"


def load_app(path: str) -> App:
    """``package.module:app`` or ``package.module.app`` (the attribute defaults to ``app``,
    or to the module's only App)."""
    if ":" in path:
        module_name, _, attr = path.partition(":")
    else:
        module_name, attr = path, ""
    if not module_name:
        raise AppLoadError(f"-A {path!r} names no module: give package.module or package.module:app")
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if ":" in path or "." not in path or exc.name != module_name:
            raise AppLoadError(f"cannot import {module_name!r}: {exc} {_missing(module_name, exc)}") from None
        first_error = exc
        module_name, _, attr = path.rpartition(".")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc2:
            raise AppLoadError(f"cannot import {path!r}: {exc2} {_missing(module_name, exc2)}") from None
        if not hasattr(module, attr):
            origin = getattr(module, "__file__", None) or module_name
            raise AppLoadError(f"cannot import {path!r} ({first_error}), and module {module_name!r} "
                               f"({origin}) has no attribute {attr!r} {_where()}") from None
    except SettingsError:
        raise
    except Exception as exc:
        raise AppLoadError(f"importing {module_name!r} failed: {type(exc).__name__}: {exc}") from exc
    apps = sorted(name for name, v in vars(module).items() if isinstance(v, App))
    found = ", ".join(apps) if apps else "none"
    origin = getattr(module, "__file__", None) or module_name
    if attr:
        if not hasattr(module, attr):
            raise AppLoadError(f"{path!r} does not name a streamkit.App: module {module_name!r} ({origin}) "
                               f"has no attribute {attr!r} (App objects in it: {found})")
        app = getattr(module, attr)
        if not isinstance(app, App):
            raise AppLoadError(f"{path!r} does not name a streamkit.App: {module_name}:{attr} is a "
                               f"{type(app).__name__} (App objects in {module_name}: {found})")
        return app
    candidate = getattr(module, "app", None)
    if isinstance(candidate, App):
        return candidate
    if len(apps) == 1:
        return getattr(module, apps[0])  # type: ignore[no-any-return]
    if not apps:
        raise AppLoadError(f"module {module_name!r} ({origin}) defines no streamkit.App "
                           f"(give package.module:name if the app lives elsewhere)")
    raise AppLoadError(f"module {module_name!r} defines {len(apps)} apps ({found}): "
                       f"choose one with -A {module_name}:NAME")


def apply_settings(app: App, overrides: Mapping[str, str]) -> None:
    """``worker --set key=value``: the app's own ``configure`` (one-line ``SettingsError``
    with a did-you-mean for a typo)."""
    if overrides:
        app.configure(overrides)


async def _start_embedded_broker(app: App, port: int) -> Any:
    """The broker of a worker that names none, on ``port`` (0: any free one)."""
    from streamkit.broker.config import BrokerConfig
    from streamkit.broker.server import Broker

    # The app is the broker's only user: its session timeout must be accepted (Kafka's
    # group.min.session.timeout.ms of 6 s refuses an app that asks for less).
    config = BrokerConfig.from_kafka({
        "group.initial.rebalance.delay.ms": "0",
        "group.min.session.timeout.ms": str(min(6000, app.settings.session_timeout_ms)),
        "num.partitions": str(app.settings.num_partitions)})
    broker = Broker(app.data_dir / "broker", config, "127.0.0.1", port)
    try:
        await broker.start()
    except DataDirectoryError:
        raise
    except OSError as exc:
        if exc.filename is not None:
            raise WorkerStartError(f"cannot use {exc.filename}: {_reason(exc)}") from None
        raise WorkerStartError(f"cannot start the embedded broker on 127.0.0.1:{port}: "
                               f"{_reason(exc)} (choose another --broker-port)") from None
    print(f"embedded broker listening on {broker.bootstrap} (data in {app.data_dir / 'broker'}); "
          f"other clients connect with -b {broker.bootstrap}", file=sys.stderr, flush=True)
    return broker


async def _start_app(app: App, broker: str, web_port: int | None) -> Any:
    try:
        return await app.start(broker=broker, web_port=web_port)
    except DataDirectoryError:
        raise
    except OSError as exc:
        if exc.filename is not None:
            raise WorkerStartError(f"cannot use {exc.filename}: {_reason(exc)}") from None
        port = web_port if web_port is not None else app.settings.web_port
        if port is not None and exc.errno in _BIND_ERRORS:
            raise WorkerStartError(f"cannot serve the web endpoints on 127.0.0.1:{port}: "
                                   f"{_reason(exc)} (choose another --web-port, or 0 for any)") from None
        raise WorkerStartError(f"the worker could not start: {_reason(exc)}") from None


def _reason(exc: OSError) -> str:
    return os.strerror(exc.errno) if exc.errno else str(exc)


async def _run(app: App, broker: str | None, web_port: int | None, broker_port: int) -> int:
    embedded = None
    if broker is None:
        embedded = await _start_embedded_broker(app, broker_port)
        broker = embedded.bootstrap
    try:
        return await _serve(app, broker, web_port)
    finally:
        if embedded is not None:
            await embedded.stop()


# The worker process's cyclic GC: a young collection every this many container allocations
# (Python's default is 700), a middle one every 20 of those, a full one every 50 middle ones.
# Each fetch batch allocates thousands of short-lived records, dicts and events that hold no
# cycles; by the default the collector walks them every few hundred allocations and promotes
# the ones still queued, which then make the full collections (a walk of the whole heap) come
# around far more often: a quarter of the agent path's CPU in the streams benchmark.
# Reference counting frees them as before; only garbage cycles wait longer.
_GC_THRESHOLDS = (50_000, 20, 50)
# The young generation's count is container allocations less deallocations, so a fetch batch
# raises it by what the batch holds while it is processed (its records, events, header lists,
# and the values: a pydantic model and its fields set, or a value's nested lists and dicts)
# and lowers it again when the batch is freed. A threshold below that makes every batch cross
# it: each young collection then walks a whole live batch and promotes it. Room for this many
# containers per record of a full batch (max.poll.records) keeps the collections between
# batches, where they find the few objects that outlive one.
_GC_OBJECTS_PER_RECORD = 20


def young_gc_threshold(max_poll_records: int = 0) -> int:
    """The young-generation threshold a worker runs with: ``_GC_THRESHOLDS``' young one,
    raised to hold a full fetch batch of ``max_poll_records`` (``_GC_OBJECTS_PER_RECORD``)."""
    return max(_GC_THRESHOLDS[0], _GC_OBJECTS_PER_RECORD * max_poll_records)


def _tune_gc(max_poll_records: int = 0) -> None:
    """The collector's settings for a process that runs one worker: what start-up loaded
    (modules, the app, its clients) moves out of the collector's walks for good
    (``gc.freeze``), and the thresholds of ``_GC_THRESHOLDS`` with the young one of
    ``young_gc_threshold``."""
    gc.freeze()
    gc.set_threshold(young_gc_threshold(max_poll_records), *_GC_THRESHOLDS[1:])


async def _serve(app: App, broker: str, web_port: int | None) -> int:
    runtime = await _start_app(app, broker, web_port)
    _tune_gc(app.settings.max_poll_records)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    stopped = asyncio.ensure_future(runtime.stopped.wait())
    asked = asyncio.ensure_future(stop.wait())
    await asyncio.wait([stopped, asked], return_when=asyncio.FIRST_COMPLETED)
    asked.cancel()
    if not runtime.stopped.is_set():
        log.info("stopping (signal)")
        await runtime.stop()
    stopped.cancel()
    if runtime.failure is None:
        return 0
    # The log above has the details (a traceback for an agent's own error); the last line
    # says in one line why the worker stopped.
    print(f"error: the worker stopped: {_one_line(runtime.failure)}", file=sys.stderr)
    return 1


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    if isinstance(exc, StreamsError):
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def run_worker(app_path: str, broker: str | None, data_dir: Path | None, web_port: int | None,
               overrides: Mapping[str, str] | None = None, broker_port: int = 0) -> int:
    """Load, configure, lock and run one worker; its exit code. Start-up problems raise
    ``AppLoadError``, ``SettingsError``, ``DataDirectoryError`` or ``WorkerStartError``."""
    app = load_app(app_path)
    if data_dir is not None:
        app.data_dir = data_dir
    apply_settings(app, overrides or {})
    # Two workers on one state directory would open the same RocksDB stores and changelog
    # checkpoints; the lock refuses the second one with the first one's pid.
    with DirectoryLock(app.state_dir):
        return asyncio.run(_run(app, broker or app.broker, web_port, broker_port))
