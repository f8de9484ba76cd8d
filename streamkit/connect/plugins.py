"""Finding connector, converter, transform and predicate classes by the names users write.

A connector is found by any of:

- a built-in's module path (``BUILTIN_CONNECTORS``), imported lazily on the first lookup; a
  built-in whose module is not installed (yet) is skipped, not an error;
- its full Python class path (``streamkit.connect.file.FileStreamSourceConnector`` or
  ``package.module:Class``), imported on demand;
- its class name or one of its ``aliases`` (Kafka Connect's and Confluent's Java class
  names, so configs written for Kafka Connect paste in unchanged);
- an entry point in the ``streamkit.connectors`` group, for third-party connectors
  (the entry point's name is one more alias).

Converters, transforms and predicates are found the same way, from fixed tables of
built-ins (keyed by their Apache class names and short names) or a Python class path.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Iterable
from importlib.metadata import entry_points
from typing import Any

from streamkit.connect.connector import Connector, SinkConnector, SourceConnector

__all__ = [
    "BUILTIN_CONNECTORS",
    "ENTRY_POINT_GROUP",
    "PluginError",
    "PluginRegistry",
    "import_class",
    "plugin_type",
]

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "streamkit.connectors"

BUILTIN_CONNECTORS: tuple[str, ...] = (
    "streamkit.connect.file:FileStreamSourceConnector",
    "streamkit.connect.file:FileStreamSinkConnector",
    "streamkit.connect.jdbc.source:JdbcSourceConnector",
    "streamkit.connect.jdbc.sink:JdbcSinkConnector",
    "streamkit.connect.spark:SparkSinkConnector",
)


class PluginError(LookupError):
    """No class goes by this name (the message lists what does)."""


def import_class(path: str) -> Any:
    """``package.module:Class`` or ``package.module.Class``; PluginError when absent."""
    module_name, sep, attr = path.partition(":")
    if not sep:
        module_name, _, attr = path.rpartition(".")
    if not module_name or not attr:
        raise PluginError(f"{path!r} is not a class path (package.module.Class)")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise PluginError(f"cannot import {module_name!r} for {path!r}: {exc}") from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise PluginError(f"module {module_name!r} has no {attr!r}") from None


def _missing_module(exc: ModuleNotFoundError, module_name: str) -> bool:
    """Whether the built-in's own module (or a parent package) is what is missing; a
    missing third-party dependency inside it is a real error worth a warning."""
    return exc.name is not None and (module_name == exc.name or module_name.startswith(exc.name + "."))


def plugin_type(cls: type) -> str:
    if issubclass(cls, SourceConnector):
        return "source"
    if issubclass(cls, SinkConnector):
        return "sink"
    return "unknown"


def _public_name(cls: type) -> str:
    """The name listed by /connector-plugins: the first Java-style alias (what Kafka Connect
    users know), else the Python class path."""
    for alias in getattr(cls, "aliases", ()):
        if "." in alias:
            return str(alias)
    return f"{cls.__module__}.{cls.__qualname__}"


class PluginRegistry:
    """Connector classes by every name they go by; built-ins and entry points load once."""

    def __init__(self, builtins: Iterable[str] = BUILTIN_CONNECTORS,
                 entry_point_group: str | None = ENTRY_POINT_GROUP) -> None:
        self._builtins = tuple(builtins)
        self._group = entry_point_group
        self._by_name: dict[str, type[Connector]] = {}
        self._classes: list[type[Connector]] = []
        self._loaded = False

    def register(self, cls: type[Connector], *names: str) -> None:
        if not (isinstance(cls, type) and issubclass(cls, Connector)):
            raise PluginError(f"{cls!r} is not a Connector class")
        if cls not in self._classes:
            self._classes.append(cls)
        for name in (f"{cls.__module__}.{cls.__qualname__}", f"{cls.__module__}:{cls.__qualname__}",
                     cls.__name__, *cls.aliases, *names):
            self._by_name.setdefault(name, cls)

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        for path in self._builtins:
            module_name = path.partition(":")[0]
            try:
                cls = import_class(path)
            except PluginError as exc:
                cause = exc.__context__
                if isinstance(cause, ModuleNotFoundError) and not _missing_module(cause, module_name):
                    log.warning("built-in connector %s is unavailable: %s", path, exc)
                continue
            except ImportError as exc:
                log.warning("built-in connector %s is unavailable: %s", path, exc)
                continue
            self.register(cls)
        if self._group:
            for ep in entry_points(group=self._group):
                try:
                    self.register(ep.load(), ep.name)
                except Exception as exc:
                    log.warning("connector entry point %s (%s) failed to load: %s", ep.name, ep.value, exc)

    def connector_class(self, name: str) -> type[Connector]:
        self._load()
        cls = self._by_name.get(name)
        if cls is not None:
            return cls
        if "." in name or ":" in name:
            try:
                found = import_class(name)
            except PluginError:
                found = None
            if isinstance(found, type) and issubclass(found, Connector):
                self.register(found)
                return found
        known = ", ".join(sorted({_public_name(c) for c in self._classes})) or "none"
        raise PluginError(f"Failed to find any class that implements Connector and which name "
                          f"matches {name}; available connectors are: {known}")

    def connectors(self) -> list[dict[str, str]]:
        """Kafka Connect's /connector-plugins entries: class, type, version."""
        self._load()
        out = []
        for cls in self._classes:
            try:
                version = cls().version()
            except Exception:
                version = "unknown"
            out.append({"class": _public_name(cls), "type": plugin_type(cls), "version": version})
        return sorted(out, key=lambda e: e["class"])
