"""What Confluent's Schema Registry converters share: ``schema.registry.url`` and
``auto.register.schemas``, a schema's id under the TopicNameStrategy subject
(``{topic}-value`` / ``{topic}-key``, cached), the wire format's header (magic byte 0,
4-byte schema id), and the writer's schema text by id."""

from __future__ import annotations

from collections.abc import Mapping

from streamkit.connect.errors import ConfigError, DataError
from streamkit.schemas.client import RegistryClient, RegistryClientError

__all__ = ["HEADER_LEN", "RegistryConverterBase"]

HEADER_LEN = 5


class RegistryConverterBase:
    schema_type = ""
    format_name = ""

    def __init__(self) -> None:
        self.client: RegistryClient | None = None
        self.is_key = False
        self.auto_register = True
        self._ids: dict[tuple[str, str], int] = {}

    def configure(self, configs: Mapping[str, str], is_key: bool) -> None:
        url = str(configs.get("schema.registry.url", "")).split(",")[0].strip()
        if not url:
            raise ConfigError({"schema.registry.url": ["Missing required configuration \"schema.registry.url\" "
                                                       "which has no default value."]})
        try:
            # the converter's basic.auth.user.info, schema.registry.ssl.ca.location (Confluent's names)
            self.client = RegistryClient(url, settings=configs)
        except RegistryClientError as exc:
            raise ConfigError({"schema.registry.url": [str(exc)]}) from None
        self.is_key = is_key
        self.auto_register = str(configs.get("auto.register.schemas", "true")).lower() == "true"

    def header(self, topic: str, text: str) -> bytes:
        """The wire-format header for ``text``, registered (or looked up) once per subject."""
        assert self.client is not None
        subject = f"{topic}-{'key' if self.is_key else 'value'}"
        schema_id = self._ids.get((subject, text))
        if schema_id is None:
            try:
                schema_id = (self.client.register(subject, text, self.schema_type) if self.auto_register
                             else self.client.lookup(subject, text, self.schema_type))
            except RegistryClientError as exc:
                raise DataError(f"Failed to serialize {self.format_name} data for subject {subject}: {exc}") from None
            self._ids[(subject, text)] = schema_id
        return b"\x00" + schema_id.to_bytes(4, "big")

    def writer_schema(self, topic: str, data: bytes) -> tuple[int, str]:
        """The schema id in ``data``'s header and that schema's text."""
        if len(data) < HEADER_LEN or data[0] != 0:
            raise DataError(f"Failed to deserialize data for topic {topic} to {self.format_name}: Unknown magic byte!")
        schema_id = int.from_bytes(data[1:HEADER_LEN], "big")
        assert self.client is not None
        try:
            return schema_id, self.client.by_id(schema_id)[1]
        except RegistryClientError as exc:
            raise DataError(f"Failed to deserialize data for topic {topic}: schema {schema_id}: {exc}") from None
