"""A Confluent-compatible Schema Registry (``streamkit schema-registry``): schemas in the
compacted ``_schemas`` topic, Avro, JSON Schema and Protobuf with their compatibility
rules, and Confluent's REST API."""

from streamkit.schemas.config import RegistryConfig, RegistryConfigError
from streamkit.schemas.server import SchemaRegistryServer, run_schema_registry

__all__ = ["RegistryConfig", "RegistryConfigError", "SchemaRegistryServer", "run_schema_registry"]
