"""The Spark sink's commit log: which data files and Kafka offsets a table holds.

Modelled on Spark's own file sink log (``_spark_metadata``): a table directory gets data
files and, beside them, one manifest per committed micro-batch::

    <path>/part-0000000007-00000.parquet       committed data
    <path>/_streamkit_commits/7.json           batch 7: its files, rows, schema, next offsets
    <path>/_streamkit_staging/8/...            batch 8 being written (not committed)

A batch is written in three steps:

1. its data files go to ``_streamkit_staging/N/`` (nothing outside staging changes);
2. the manifest ``_streamkit_commits/N.json`` is written to a temporary file, fsynced and
   renamed into place: this rename is the commit point, for the rows and the offsets;
3. the staged files are published: renamed into the table directory (Parquet) or appended
   to a Delta table as its idempotent transaction ``N``.

A crash before 2 leaves a staging directory that ``recover`` deletes; a crash after 2 leaves
a committed batch that ``recover`` publishes. So the table only ever shows committed
batches, and a restart resumes from the offsets of the last manifest: exactly once.
Names starting with ``_`` are hidden from Spark's file listing, so even a plain
``spark.read.parquet(path)`` never sees staged files.

Manifests carry the table's schema as Spark's JSON (``StructType.json()``) and the next
offset per topic partition (cumulative, so the last manifest alone gives every partition's
position).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

__all__ = ["COMMITS_DIR", "STAGING_DIR", "Batch", "CommitLog"]

COMMITS_DIR = "_streamkit_commits"
STAGING_DIR = "_streamkit_staging"
_TMP_SUFFIX = ".tmp"

TP = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Batch:
    """One committed micro-batch, as its manifest says."""

    id: int
    files: tuple[str, ...]
    rows: int
    offsets: Mapping[TP, int]
    schema: Mapping[str, Any] | None
    format: str = "parquet"
    committed_ms: int = field(default=0, compare=False)

    def to_json(self) -> bytes:
        offsets: dict[str, dict[str, int]] = {}
        for (topic, partition), offset in sorted(self.offsets.items()):
            offsets.setdefault(topic, {})[str(partition)] = offset
        return orjson.dumps({"version": 1, "batch": self.id, "format": self.format, "files": list(self.files),
                             "rows": self.rows, "offsets": offsets, "schema": self.schema,
                             "committed_ms": self.committed_ms}, option=orjson.OPT_INDENT_2)

    @staticmethod
    def from_json(data: bytes) -> Batch:
        doc = orjson.loads(data)
        offsets = {(topic, int(p)): int(o) for topic, parts in doc["offsets"].items() for p, o in parts.items()}
        return Batch(int(doc["batch"]), tuple(doc["files"]), int(doc["rows"]), offsets, doc.get("schema"),
                     doc.get("format", "parquet"), int(doc.get("committed_ms", 0)))


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _hidden(name: str) -> bool:
    return name.startswith(("_", "."))


class CommitLog:
    """The manifests of one table directory. Not thread-safe: one writer (one task)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path).absolute()
        self.commits = self.path / COMMITS_DIR
        self.staging = self.path / STAGING_DIR

    def batches(self) -> list[Batch]:
        """Every committed batch, oldest first (temporary manifests are not committed)."""
        if not self.commits.is_dir():
            return []
        ids = sorted(int(p.stem) for p in self.commits.glob("*.json") if p.stem.isdigit())
        return [Batch.from_json((self.commits / f"{i}.json").read_bytes()) for i in ids]

    def latest(self) -> Batch | None:
        if not self.commits.is_dir():
            return None
        ids = [int(p.stem) for p in self.commits.glob("*.json") if p.stem.isdigit()]
        return Batch.from_json((self.commits / f"{max(ids)}.json").read_bytes()) if ids else None

    def stage_dir(self, batch_id: int) -> Path:
        return self.staging / str(batch_id)

    def committed_files(self) -> list[Path]:
        """Where each committed data file is now: in the table, or still staged (a batch
        committed but not yet published)."""
        out = []
        for batch in self.batches():
            for name in batch.files:
                final = self.path / name
                staged = self.stage_dir(batch.id) / name
                out.append(final if final.exists() or not staged.exists() else staged)
        return out

    def commit(self, batch: Batch) -> None:
        """Make ``batch`` committed: its manifest appears atomically, or not at all."""
        self.commits.mkdir(parents=True, exist_ok=True)
        target = self.commits / f"{batch.id}.json"
        if target.exists():
            raise FileExistsError(f"{target} exists: another writer is using {self.path}")
        tmp = self.commits / f"{batch.id}.json{_TMP_SUFFIX}"
        with open(tmp, "wb") as f:
            f.write(batch.to_json())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
        _fsync_dir(self.commits)

    def publish_files(self, batch: Batch) -> None:
        """Parquet's publish step: move the batch's staged files into the table (idempotent)."""
        stage = self.stage_dir(batch.id)
        for name in batch.files:
            staged = stage / name
            if staged.exists():
                os.replace(staged, self.path / name)
        _fsync_dir(self.path)
        shutil.rmtree(stage, ignore_errors=True)

    def recover(self, publish: Callable[[Batch], None] | None = None, delete_strays: bool = True) -> Batch | None:
        """After a crash: publish committed batches still staged, delete uncommitted staging
        and temporary manifests and (``delete_strays``) data files no manifest lists.
        Returns the last committed batch."""
        publish = publish or self.publish_files
        batches = self.batches()
        for batch in batches:
            if self.stage_dir(batch.id).exists():
                publish(batch)
        if self.staging.is_dir():
            # what is left is uncommitted (newer than the last manifest) or already published
            for stage in self.staging.iterdir():
                shutil.rmtree(stage, ignore_errors=True)
        if self.commits.is_dir():
            for tmp in self.commits.glob(f"*{_TMP_SUFFIX}"):
                with contextlib.suppress(FileNotFoundError):
                    tmp.unlink()
        if delete_strays and self.path.is_dir():
            listed = {name for batch in batches for name in batch.files}
            for entry in self.path.iterdir():
                if entry.is_file() and not _hidden(entry.name) and entry.name not in listed:
                    entry.unlink()
        return batches[-1] if batches else None

