"""File source and sink connectors, like Kafka's FileStreamSource/FileStreamSink, plus JSON
Lines and CSV.

The source tails a growing file: each complete line (ended by a newline) becomes a record;
a partial last line waits for its newline. Its source partition is ``{"filename": path}``
and its offset ``{"position": byte offset after the line}`` (Kafka's keys), so a restart
resumes at the next unread line. ``format``:

- ``lines`` (default): the line's text, schema ``string`` (Kafka's FileStreamSource);
- ``jsonl``: each line parsed as JSON, schemaless (a bad line is a DataError);
- ``csv``: the first line is the header; each row is a struct of optional strings.

The sink appends each record's value to ``file``: as text (``lines``: strings as they are,
other values as JSON), JSON Lines, or CSV (header from the first record's fields, written
once). ``flush`` fsyncs, so the runtime commits offsets only for what is on disk.
"""

from __future__ import annotations

import csv
import io
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import ClassVar, Literal

import orjson
from pydantic import Field as PField

from streamkit.connect.connector import (
    ConnectorConfig,
    SinkConnector,
    SinkTask,
    SourceConnector,
    SourceTask,
    TopicPartition,
)
from streamkit.connect.data import Field, Schema, SinkRecord, SourceRecord
from streamkit.connect.errors import ConnectError, DataError

__all__ = [
    "FileStreamSinkConfig",
    "FileStreamSinkConnector",
    "FileStreamSinkTask",
    "FileStreamSourceConfig",
    "FileStreamSourceConnector",
    "FileStreamSourceTask",
]

Format = Literal["lines", "jsonl", "csv"]
_POLL_WAIT_S = 1.0


class FileStreamSourceConfig(ConnectorConfig):
    file: str = PField(min_length=1, description="The file to read (and follow as it grows).")
    topic: str = PField(min_length=1, description="The topic to publish data to.")
    batch_size: int = PField(2000, alias="batch.size", ge=1, description="Most records one poll returns.")
    format: Format = PField("lines", description="lines, jsonl or csv.")


class FileStreamSinkConfig(ConnectorConfig):
    file: str = PField(min_length=1, description="The file to append records' values to.")
    format: Format = PField("lines", description="lines, jsonl or csv.")


class FileStreamSourceConnector(SourceConnector):
    config_model: ClassVar[type[ConnectorConfig]] = FileStreamSourceConfig
    aliases = ("org.apache.kafka.connect.file.FileStreamSourceConnector", "FileStreamSource")

    def start(self, config: ConnectorConfig) -> None:
        assert isinstance(config, FileStreamSourceConfig)
        self._config = config

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        c = self._config
        return [{"file": c.file, "topic": c.topic, "batch.size": str(c.batch_size), "format": c.format}]

    @classmethod
    def task_class(cls) -> type[SourceTask]:
        return FileStreamSourceTask


class FileStreamSinkConnector(SinkConnector):
    config_model: ClassVar[type[ConnectorConfig]] = FileStreamSinkConfig
    aliases = ("org.apache.kafka.connect.file.FileStreamSinkConnector", "FileStreamSink")

    def start(self, config: ConnectorConfig) -> None:
        assert isinstance(config, FileStreamSinkConfig)
        self._config = config

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        # one writer per file: more tasks would interleave lines
        return [{"file": self._config.file, "format": self._config.format}]

    @classmethod
    def task_class(cls) -> type[SinkTask]:
        return FileStreamSinkTask


class FileStreamSourceTask(SourceTask):
    def start(self, config: Mapping[str, str]) -> None:
        c = FileStreamSourceConfig.model_validate(config)
        self.path = c.file
        self.topic = c.topic
        self.batch_size = c.batch_size
        self.format: Format = c.format
        self.partition = {"filename": self.path}
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        stored = self.context.offset(self.partition) if self.context is not None else None
        self.position = int(stored.get("position", 0)) if stored else 0
        self.header: list[str] | None = None
        self.schema: Schema | None = None
        self._file: io.BufferedReader | None = None

    def _open(self) -> io.BufferedReader | None:
        if self._file is None:
            try:
                self._file = open(self.path, "rb")  # noqa: SIM115 - kept open while tailing
            except FileNotFoundError:
                return None
            if os.fstat(self._file.fileno()).st_size < self.position:
                # the file was truncated or replaced: start it over, as Kafka's connector does
                self.position = 0
            self._file.seek(self.position)
        return self._file

    def _read_header(self, f: io.BufferedReader) -> bool:
        """CSV: (re)read the header line from the start of the file."""
        if self.header is not None:
            return True
        here = f.tell()
        f.seek(0)
        line = f.readline()
        if not line.endswith(b"\n"):
            f.seek(here)
            return False
        self.header = next(csv.reader([line.decode().rstrip("\r\n")]))
        self.schema = Schema("struct", fields=tuple(Field(n, Schema("string", optional=True)) for n in self.header))
        if here == 0 or self.position == 0:
            self.position = len(line)
        f.seek(self.position)
        return True

    def poll(self) -> Sequence[SourceRecord]:
        with self._lock:
            out = [] if self._stopped.is_set() else self._read()
        if not out:
            self._stopped.wait(_POLL_WAIT_S)
        return out

    def _read(self) -> list[SourceRecord]:
        f = self._open()
        if f is None or (self.format == "csv" and not self._read_header(f)):
            return []
        out: list[SourceRecord] = []
        while len(out) < self.batch_size:
            line = f.readline()
            if not line:
                break
            if not line.endswith(b"\n"):
                f.seek(self.position)  # a partial line: wait for the rest of it
                break
            self.position += len(line)
            text = line.decode("utf-8", errors="replace").rstrip("\r\n")
            if self.format != "lines" and not text.strip():
                continue
            out.append(self._record(text))
        return out

    def _record(self, text: str) -> SourceRecord:
        offset = {"position": self.position}
        if self.format == "lines":
            return SourceRecord(self.partition, offset, self.topic, text, value_schema=Schema("string"))
        if self.format == "jsonl":
            try:
                value = orjson.loads(text)
            except orjson.JSONDecodeError as exc:
                raise DataError(f"{self.path}: line ending at byte {self.position} is not JSON: {exc}") from exc
            return SourceRecord(self.partition, offset, self.topic, value)
        assert self.header is not None
        row = next(csv.reader([text]))
        value = {name: (row[i] if i < len(row) else None) for i, name in enumerate(self.header)}
        return SourceRecord(self.partition, offset, self.topic, value, value_schema=self.schema)

    def stop(self) -> None:
        self._stopped.set()
        with self._lock:
            f, self._file = getattr(self, "_file", None), None
            if f is not None:
                f.close()


class FileStreamSinkTask(SinkTask):
    def start(self, config: Mapping[str, str]) -> None:
        c = FileStreamSinkConfig.model_validate(config)
        self.path = Path(c.file)
        self.format: Format = c.format
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._out = open(self.path, "ab")  # noqa: SIM115 - kept open between puts
        self._header: list[str] | None = None
        if self.format == "csv" and self.path.stat().st_size > 0:
            with open(self.path, "rb") as existing:
                first = existing.readline().decode().rstrip("\r\n")
            self._header = next(csv.reader([first])) if first else None

    def _line(self, record: SinkRecord) -> bytes:
        value = record.value
        if self.format == "lines":
            text = value if isinstance(value, str) else (
                value.decode("utf-8", errors="replace") if isinstance(value, bytes)
                else orjson.dumps(value, default=str).decode())
            return text.encode() + b"\n"
        if self.format == "jsonl":
            return orjson.dumps(value, default=str) + b"\n"
        if not isinstance(value, Mapping):
            raise DataError(f"the csv format needs struct or map values, got {type(value).__name__}")
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        if self._header is None:
            self._header = [str(k) for k in value]
            writer.writerow(self._header)
        writer.writerow(["" if value.get(k) is None else value.get(k) for k in self._header])
        return buffer.getvalue().encode()

    def put(self, records: Sequence[SinkRecord]) -> None:
        for record in records:
            if record.value is None and self.format != "lines":
                continue
            self._out.write(self._line(record) if record.value is not None else b"null\n")

    def flush(self, offsets: Mapping[TopicPartition, int]) -> None:
        try:
            self._out.flush()
            os.fsync(self._out.fileno())
        except OSError as exc:
            raise ConnectError(f"cannot write {self.path}: {exc}") from exc

    def stop(self) -> None:
        out = getattr(self, "_out", None)
        if out is not None and not out.closed:
            out.flush()
            out.close()
