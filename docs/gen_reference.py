"""Writes the reference pages from the code while ``mkdocs build`` runs (mkdocs-gen-files),
and copies the shipped connector configs so that pages can link to them."""

from __future__ import annotations

from pathlib import Path

import mkdocs_gen_files

from streamkit.docs_reference import PAGES

ROOT = Path(__file__).resolve().parents[1]

for path, page in PAGES.items():
    with mkdocs_gen_files.open(path, "w") as out:
        out.write(page())

for config in sorted((ROOT / "connectors").iterdir()):
    with mkdocs_gen_files.open(f"connectors/{config.name}", "w") as out:
        out.write(config.read_text())
