"""The registry inside the broker process (``schema.registry.listeners`` on
``streamkit broker``): one process serves both, and its schemas outlive a restart."""

from __future__ import annotations

import json
from pathlib import Path

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from streamkit.testing import BrokerProcess

SCHEMA = json.dumps({"type": "record", "name": "Reading", "fields": [{"name": "celsius", "type": "double"}]})


def test_registry_in_the_broker_process(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "data", {"schema.registry.listeners": "http://127.0.0.1:0"}) as broker:
        assert broker.schema_registry_port is not None
        url = f"http://127.0.0.1:{broker.schema_registry_port}"
        sid = SchemaRegistryClient({"url": url}).register_schema("readings-value", Schema(SCHEMA, "AVRO"))
        # the schemas are in the broker's own _schemas topic, so a restart keeps them
        broker.stop()
        broker.start()
        registry = SchemaRegistryClient({"url": f"http://127.0.0.1:{broker.schema_registry_port}"})
        assert json.loads(registry.get_schema(sid).schema_str) == json.loads(SCHEMA)
        assert registry.get_subjects() == ["readings-value"]
