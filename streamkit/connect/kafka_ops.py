"""The few admin calls the Connect runtime makes over the Kafka protocol (aiokafka):
a sink connector's consumer-group offsets, and the cluster id for ``GET /``. Each takes the
worker's config, for its bootstrap servers and its clients' security settings."""

from __future__ import annotations

from collections.abc import Mapping

from aiokafka import AIOKafkaConsumer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import for_code
from aiokafka.protocol.admin import DeleteGroupsRequest
from aiokafka.structs import OffsetAndMetadata, TopicPartition

from streamkit.connect.errors import ConnectError
from streamkit.connect.runner import start_client, stop_client
from streamkit.connect.worker_config import WorkerConfig

__all__ = ["alter_group_offsets", "cluster_id", "delete_group", "group_offsets"]

_GROUP_ID_NOT_FOUND = 69


async def _admin(worker: WorkerConfig) -> AIOKafkaAdminClient:
    admin = AIOKafkaAdminClient(bootstrap_servers=worker.bootstrap_servers,
                                **{"request_timeout_ms": 10000, **worker.client_kwargs("admin")})
    await start_client(admin)
    return admin


async def cluster_id(worker: WorkerConfig) -> str | None:
    admin = await _admin(worker)
    try:
        found = (await admin.describe_cluster()).get("cluster_id")
        return str(found) if found is not None else None
    finally:
        await stop_client(admin)


async def group_offsets(worker: WorkerConfig, group: str) -> dict[tuple[str, int], int]:
    admin = await _admin(worker)
    try:
        offsets = await admin.list_consumer_group_offsets(group)
    finally:
        await stop_client(admin)
    return {(tp.topic, tp.partition): meta.offset for tp, meta in offsets.items() if meta.offset >= 0}


async def alter_group_offsets(worker: WorkerConfig, group: str, offsets: Mapping[tuple[str, int], int]) -> None:
    """Commit ``offsets`` for ``group`` (which must have no active members)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=worker.bootstrap_servers, group_id=group, enable_auto_commit=False,
                                **worker.client_kwargs("consumer"))
    await start_client(consumer)
    try:
        consumer.assign([TopicPartition(*tp) for tp in offsets])
        await consumer.commit({TopicPartition(*tp): OffsetAndMetadata(off, "") for tp, off in offsets.items()})
    finally:
        await stop_client(consumer)


async def delete_group(worker: WorkerConfig, group: str) -> None:
    """Delete ``group`` and its committed offsets (absent already is fine)."""
    admin = await _admin(worker)
    try:
        node = await admin.find_coordinator(group)
        response = await admin._send_request_to_node(node, DeleteGroupsRequest([group]))
    finally:
        await stop_client(admin)
    for _name, code in response.results:
        if code and code != _GROUP_ID_NOT_FOUND:
            raise ConnectError(f"cannot delete the offsets of group {group}: {for_code(code).__name__}")
