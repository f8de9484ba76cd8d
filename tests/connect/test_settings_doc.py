"""The Connect guide documents the connectors' settings and configs as the code has them."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel, Field

from streamkit.connect.jdbc.config import JdbcSinkConfig, JdbcSourceConfig
from streamkit.connect.settings_doc import rewrite, settings_table

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "tutorials" / "connect.md"


class _Example(BaseModel):
    path: str = Field(description="Where it goes.")
    batch_size: int = Field(10, alias="batch.size", description="Rows | per batch.")
    tags: tuple[str, ...] = Field(("a", "b"), description="Labels.")
    user: str | None = Field(None, description="Who.")
    flag: bool = Field(False, alias="flag.enable")
    tables: str = Field("", json_schema_extra={"internal": True})


def test_a_settings_table_lists_each_key_with_its_default_and_description() -> None:
    assert settings_table(_Example) == (
        "| setting | default | description |\n"
        "|---|---|---|\n"
        "| `path` | required | Where it goes. |\n"
        "| `batch.size` | `10` | Rows \\| per batch. |\n"
        "| `tags` | `a,b` | Labels. |\n"
        "| `user` | (none) | Who. |\n"
        "| `flag.enable` | `false` |  |\n")


def test_the_guide_tables_are_generated_from_the_jdbc_config_models() -> None:
    text = GUIDE.read_text()
    for model in (JdbcSourceConfig, JdbcSinkConfig):
        assert f"<!-- settings: {model.__module__}.{model.__name__} -->\n" in text
    assert rewrite(text) == text, "run: python -m streamkit.connect.settings_doc docs/tutorials/connect.md"
    for key in ("`connection.attempts`", "`connection.backoff.ms`", "`key.mode`", "`pk.mode`"):
        assert key in text
    assert "`tables`" not in text  # internal: set by the connector in its task configs


def test_every_shipped_config_is_linked_from_the_guide() -> None:
    linked = set(re.findall(r"\]\(\.\./(connectors/[^)]+)\)", GUIDE.read_text()))
    shipped = {f"connectors/{p.name}" for p in (ROOT / "connectors").iterdir()}
    assert shipped <= linked, sorted(shipped - linked)
