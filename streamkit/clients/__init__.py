"""Kafka-protocol client tools behind the CLI (topics, produce, consume, groups).

They use aiokafka and nothing streamkit-specific on the wire, so they work against any
Kafka-compatible broker, Apache Kafka included."""
