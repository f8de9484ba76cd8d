"""``streamkit worker``: load an app by path and run it until SIGINT/SIGTERM."""

from __future__ import annotations

import asyncio
import importlib
import logging
import signal
import sys
from pathlib import Path

from streamkit.streams.app import App
from streamkit.streams.runtime import DeliveryError, StartupError
from streamkit.streams.settings import SettingsError
from streamkit.streams.table import NotCoPartitionedError

__all__ = ["AppLoadError", "load_app", "run_worker"]

log = logging.getLogger(__name__)

# Errors whose message already says what happened (no need to name the type).
StreamsError = (DeliveryError, StartupError, NotCoPartitionedError)


class AppLoadError(ValueError):
    pass


def load_app(path: str) -> App:
    """``package.module:app`` or ``package.module.app`` (the attribute defaults to ``app``)."""
    if ":" in path:
        module_name, _, attr = path.partition(":")
    else:
        module_name, attr = path, ""
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if ":" in path or "." not in path:
            raise AppLoadError(f"cannot import {module_name!r}: {exc}") from None
        module_name, _, attr = path.rpartition(".")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc2:
            raise AppLoadError(f"cannot import {path!r}: {exc2}") from None
    except SettingsError:
        raise
    except Exception as exc:
        raise AppLoadError(f"importing {module_name!r} failed: {type(exc).__name__}: {exc}") from exc
    app = getattr(module, attr or "app", None)
    if app is None and not attr:
        candidates = [v for v in vars(module).values() if isinstance(v, App)]
        app = candidates[0] if len(candidates) == 1 else None
    if not isinstance(app, App):
        raise AppLoadError(f"{path!r} does not name a streamkit.App (found {type(app).__name__})")
    return app


async def _run(app: App, broker: str | None, web_port: int | None) -> int:
    runtime = await app.start(broker=broker, web_port=web_port)
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


def run_worker(app_path: str, broker: str | None, data_dir: Path | None, web_port: int | None) -> int:
    app = load_app(app_path)
    if data_dir is not None:
        app.data_dir = data_dir
    return asyncio.run(_run(app, broker, web_port))
