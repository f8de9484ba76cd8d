"""Markdown tables of a connector's settings, made from its config model, so that the
Connect tutorial's tables (docs/tutorials/connect.md) say what the code reads and cannot
drift from it.

A table lives in a Markdown file between two markers that name the model::

    <!-- settings: streamkit.connect.jdbc.config.JdbcSourceConfig -->
    | setting | default | description |
    ...
    <!-- end settings -->

``python -m streamkit.connect.settings_doc docs/tutorials/connect.md`` rewrites every such
table; ``rewrite(text)`` is what it writes (tests/connect/test_settings_doc.py checks the
page is up to date). A field marked ``json_schema_extra={"internal": True}`` (a key the
runtime sets in task configs) is left out.
"""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

__all__ = ["rewrite", "settings_table"]

_TABLE = re.compile(r"(<!-- settings: (?P<model>[\w.]+) -->\n)(?P<table>.*?)(<!-- end settings -->)", re.S)


def _default(info: FieldInfo) -> str:
    if info.is_required():
        return "required"
    value: Any = info.get_default(call_default_factory=True)
    if isinstance(value, bool):
        value = "true" if value else "false"
    elif isinstance(value, tuple | list):
        value = ",".join(value)
    return "(none)" if value is None or value == "" else f"`{value}`"


def _internal(info: FieldInfo) -> bool:
    extra = info.json_schema_extra
    return isinstance(extra, dict) and bool(extra.get("internal"))


def settings_table(model: type[BaseModel]) -> str:
    """The model's settings as a Markdown table: key, default, description."""
    rows = ["| setting | default | description |", "|---|---|---|"]
    for name, info in model.model_fields.items():
        if not _internal(info):
            description = (info.description or "").replace("|", "\\|")
            rows.append(f"| `{info.alias or name}` | {_default(info)} | {description} |")
    return "\n".join(rows) + "\n"


def _model(path: str) -> type[BaseModel]:
    module, _, name = path.rpartition(".")
    found = getattr(importlib.import_module(module), name)
    if not (isinstance(found, type) and issubclass(found, BaseModel)):
        raise TypeError(f"{path} is not a pydantic model")
    return found


def rewrite(text: str) -> str:
    """``text`` with every marked settings table made anew from its model."""
    return _TABLE.sub(lambda m: m.group(1) + settings_table(_model(m.group("model"))) + m.group(4), text)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m streamkit.connect.settings_doc FILE.md", file=sys.stderr)
        return 2
    path = Path(argv[0])
    path.write_text(rewrite(path.read_text()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
