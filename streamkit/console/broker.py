"""What the console asks the cluster, over the Kafka protocol: the brokers, topics with
their partitions, configs and offsets, and consumer groups with their lag.

The heavy lifting is ``streamkit.clients.admin`` (the CLI's admin commands); this module
adds the views a page needs in one round of requests, and turns client errors into the
console's: an unreachable broker is 503, a Kafka error code is 400 with its message."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from aiokafka import AIOKafkaConsumer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment
from aiokafka.errors import KafkaError
from aiokafka.protocol.metadata import MetadataRequest
from aiokafka.protocol.offset import OffsetRequest
from aiokafka.structs import TopicPartition

from streamkit.clients import admin
from streamkit.clients.consumer_groups import describe_modern_groups
from streamkit.clients.errors import BrokerUnreachable, ClientError
from streamkit.clients.lifecycle import start_client
from streamkit.clients.security import command_security
from streamkit.clients.share import alter_share_group_offsets, describe_share_group
from streamkit.console.errors import BadInput, Conflict, NotFound, Unavailable

__all__ = [
    "AdminPool", "GroupSummary", "GroupView", "Overview", "TopicSummary", "alter_topic", "committed_totals",
    "create_topic", "delete_topic", "group", "groups", "kafka_errors", "overview", "partitions_of", "records_written",
    "reset_group",
    "topic", "topic_ends",
]


_T = TypeVar("_T")
# How long the cluster's metadata and group list answer every page: a page load asks for
# them once however many requests (and the lag sampler) ask meanwhile. The console's own
# topic changes forget them at once; another client's show within this time.
FRESH_S = 1.0
_MAX_CACHED = 256  # answers kept: the metadata, the group list, leaders by topic set


@contextlib.contextmanager
def kafka_errors() -> Iterator[None]:
    try:
        yield
    except BrokerUnreachable as exc:
        raise Unavailable(str(exc)) from None
    except ClientError as exc:
        raise BadInput(str(exc)) from None
    except KafkaError as exc:
        raise Unavailable(f"the broker did not answer: {exc}") from None


@dataclass(frozen=True, slots=True)
class TopicSummary:
    name: str
    partitions: int
    internal: bool
    under_replicated: int
    offline: int


@dataclass(frozen=True, slots=True)
class Overview:
    bootstrap: str
    cluster_id: str | None
    controller: int
    brokers: list[dict[str, Any]]
    topics: list[TopicSummary]
    under_replicated: list[tuple[str, int]]
    offline: list[tuple[str, int]]


class AdminPool:
    """One admin client kept open for the pages that every visit asks for (the overview, the
    topic and group lists): each new client would first fetch the whole cluster's metadata
    to bootstrap. A client that failed is closed, and the next request opens another."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self._client: AIOKafkaAdminClient | None = None
        self._lock = asyncio.Lock()
        self._cache: dict[str, tuple[float, Any]] = {}
        self._fetching: dict[str, asyncio.Lock] = {}

    async def cached(self, key: str, fetch: Callable[[], Awaitable[_T]], max_age_s: float = FRESH_S) -> _T:
        """``fetch()``'s answer, shared: requests that come while it runs wait for it rather
        than ask again, and it answers those of the next ``max_age_s`` seconds too."""
        lock = self._fetching.setdefault(key, asyncio.Lock())
        async with lock:
            hit = self._cache.get(key)
            if hit is not None and time.monotonic() - hit[0] < max_age_s:
                answer: _T = hit[1]
                return answer
            started = time.monotonic()
            fetched = await fetch()
            if len(self._cache) >= _MAX_CACHED:  # the oldest answer goes
                self._cache.pop(min(self._cache, key=lambda k: self._cache[k][0]))
            self._cache[key] = (started, fetched)
            return fetched

    def forget(self, key: str | None = None) -> None:
        """Drop one cached answer (all with None): the next request fetches it afresh."""
        if key is None:
            self._cache.clear()
        else:
            self._cache.pop(key, None)

    @contextlib.asynccontextmanager
    async def admin(self) -> AsyncIterator[AIOKafkaAdminClient]:
        async with self._lock:
            if self._client is None:
                client = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=10000,
                                             **command_security())
                await start_client(client)
                self._client = client
            client = self._client
        try:
            yield client
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        async with self._lock:
            client, self._client = self._client, None
        if client is not None:
            await client.close()


async def overview(pool: AdminPool) -> Overview:
    """Brokers, controller and every topic with its partition health: one Metadata request
    on a client kept open, shared by the requests of the next ``FRESH_S``."""
    return await pool.cached("overview", lambda: _overview(pool))


async def _cluster(pool: AdminPool) -> dict[str, Any]:
    """The cluster's metadata (brokers, controller, every topic with its partitions and their
    leaders), shared for ``FRESH_S``: one Metadata request, where the public describe_cluster
    and describe_topics would fetch (and decode) it twice."""
    async def fetch() -> dict[str, Any]:
        async with pool.admin() as client:
            found: dict[str, Any] = (await client._get_cluster_metadata(topics=None)).to_object()
            return found

    return await pool.cached("metadata", fetch)


async def _overview(pool: AdminPool) -> Overview:
    bootstrap = pool.bootstrap
    with kafka_errors():
        cluster = await _cluster(pool)
        described = cluster["topics"]
    brokers = sorted(({"id": int(b["node_id"]), "host": str(b["host"]), "port": int(b["port"]),
                       "rack": b.get("rack")} for b in cluster.get("brokers", [])), key=lambda b: b["id"])
    live = {b["id"] for b in brokers}
    topics: list[TopicSummary] = []
    under: list[tuple[str, int]] = []
    offline: list[tuple[str, int]] = []
    for t in described:
        if t["error_code"]:
            continue
        t_under = t_offline = 0
        for p in t["partitions"]:
            leader, replicas, isr = int(p["leader"]), p.get("replicas") or (), p.get("isr") or ()
            if leader < 0 or leader not in live:
                offline.append((t["topic"], int(p["partition"])))
                t_offline += 1
            elif len(isr) < len(replicas):
                under.append((t["topic"], int(p["partition"])))
                t_under += 1
        topics.append(TopicSummary(t["topic"], len(t["partitions"]), bool(t.get("is_internal")), t_under, t_offline))
    topics.sort(key=lambda s: s.name)
    return Overview(bootstrap, cluster.get("cluster_id"), int(cluster.get("controller_id", -1)), brokers,
                    topics, sorted(under), sorted(offline))


async def records_written(pool: AdminPool) -> int:
    """How many records the cluster's topics (internal ones left out) have had written, all
    told: the sum of their partitions' end offsets. Its change over time is the rate in."""
    with kafka_errors():
        described = (await _cluster(pool))["topics"]
        tps = [TopicPartition(t["topic"], int(p["partition"])) for t in described
               if not t["error_code"] and not t.get("is_internal") for p in t["partitions"]]
        ends = await _end_offsets(pool, tps) if tps else {}
    return sum(ends.values())


async def topic_ends(pool: AdminPool, names: list[str]) -> dict[str, int]:
    """Each topic's records written so far (the sum of its partitions' end offsets); a
    topic that does not exist is left out."""
    if not names:
        return {}
    with kafka_errors():
        # Every topic's: naming a missing topic could have a broker with
        # auto.create.topics.enable create it.
        cluster = await _cluster(pool)
        wanted = set(names)
        tps = [TopicPartition(t["topic"], int(p["partition"])) for t in cluster["topics"]
               if not t["error_code"] and t["topic"] in wanted for p in t["partitions"]]
        ends = await _end_offsets(pool, tps) if tps else {}
    out: dict[str, int] = {}
    for tp, end in ends.items():
        out[tp.topic] = out.get(tp.topic, 0) + end
    return out


async def committed_totals(pool: AdminPool, group_ids: list[str]) -> dict[tuple[str, str], int]:
    """(group, topic) -> the sum of the group's committed offsets on the topic's partitions;
    groups that do not exist (yet) are left out."""
    out: dict[tuple[str, str], int] = {}
    with kafka_errors():
        async with pool.admin() as client:
            known = {str(g[0]) for g in await client.list_consumer_groups()}
            for group_id in (g for g in group_ids if g in known):
                for tp, meta in (await client.list_consumer_group_offsets(group_id)).items():
                    if meta.offset >= 0:
                        out[(group_id, tp.topic)] = out.get((group_id, tp.topic), 0) + meta.offset
    return out


async def topic(bootstrap: str, name: str) -> admin.TopicDescription:
    """A topic with its configs and each partition's offsets and replicas; 404 if missing."""
    await topic_exists(bootstrap, name)
    with kafka_errors():
        return await admin.describe_topic(bootstrap, name, offsets=True)


async def create_topic(bootstrap: str, name: str, partitions: int, replication_factor: int,
                       configs: dict[str, str]) -> None:
    with kafka_errors():
        await admin.create_topic(bootstrap, name, partitions, configs, replication_factor=replication_factor)


async def delete_topic(bootstrap: str, name: str) -> None:
    await topic_exists(bootstrap, name)
    with kafka_errors():
        await admin.delete_topic(bootstrap, name)


async def topic_exists(bootstrap: str, name: str) -> None:
    with kafka_errors():
        admin.topic_name(name)
        if name not in await admin.list_topics(bootstrap, include_internal=True):
            raise NotFound(f"topic {name} not found")


async def alter_topic(bootstrap: str, name: str, set_configs: dict[str, str], delete: list[str]) -> None:
    await topic_exists(bootstrap, name)
    with kafka_errors():
        await admin.alter_topic_config(bootstrap, name, set_configs, delete)


@dataclass(frozen=True, slots=True)
class GroupSummary:
    group_id: str
    protocol_type: str
    state: str
    members: int


async def groups(pool: AdminPool) -> list[GroupSummary]:
    """Every consumer group with its state and member count (ListGroups, DescribeGroups)."""
    with kafka_errors():
        async with pool.admin() as client:
            listed = sorted((str(g[0]), str(g[1])) for g in await client.list_consumer_groups())
            # DescribeGroups is the classic protocol's: share groups are described apart
            # (ShareGroupDescribe), and the broker drops a connection that asks it for one.
            # One group a request: aiokafka answers a request naming groups of both
            # protocols with a blank entry in place of the KIP-848 one.
            classic = [g for g, kind in listed if kind != "share"]
            answers = await asyncio.gather(*(client.describe_consumer_groups([g]) for g in classic))
            described = [r for answer in answers for r in answer]
        shared = {g: await describe_share_group(pool.bootstrap, g) for g, kind in listed if kind == "share"}
        modern = await describe_modern_groups(pool.bootstrap, classic)
    states: dict[str, tuple[str, int]] = {}
    for response in described:
        for g in response.groups:  # (error_code, group_id, state, protocol_type, protocol, members, ...)
            if g[1]:
                states[str(g[1])] = (str(g[2]), len(g[5]))
    for g, share in shared.items():
        if share is not None:
            states[g] = (share.state, len(share.members))
    for g, found in modern.items():  # KIP-848 groups: DescribeGroups shows them Dead
        if found is not None:
            states[g] = (found.state, len(found.members))
    return [GroupSummary(gid, kind, *states.get(gid, ("Unknown", 0))) for gid, kind in listed]


async def partitions_of(pool: AdminPool, name: str) -> set[int]:
    """The topic's partitions (NotFound without it): a Metadata request for this topic alone
    on the kept admin client, which may not create it (the message browser's first question,
    cheaper than every topic's metadata in a large cluster)."""
    with kafka_errors():
        admin.topic_name(name)
        async with pool.admin() as client:
            metadata = (await client._send_request(MetadataRequest([name], allow_auto_topic_creation=False))).to_object()
    for t in metadata["topics"]:
        if t["topic"] == name and not t["error_code"]:
            return {int(p["partition"]) for p in t["partitions"]}
    raise NotFound(f"topic {name} not found")


async def _end_offsets(pool: AdminPool, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
    """Each partition's end offset (high watermark): ListOffsets to the leaders over the
    pool's admin client, one request a leader. The leaders come from a Metadata request for
    just these topics that may not create them (not the whole cluster's, whose decoding costs
    more than the rest of a group page), shared for ``FRESH_S``. A partition whose leader
    does not answer it (moved meanwhile) is asked again by a consumer of its own."""
    out: dict[TopicPartition, int] = {}
    topics = sorted({tp.topic for tp in partitions})

    async def fetch_leaders() -> dict[tuple[str, int], int]:
        async with pool.admin() as client:
            metadata = (await client._send_request(
                MetadataRequest(topics, allow_auto_topic_creation=False))).to_object()
        return {(t["topic"], int(p["partition"])): int(p["leader"]) for t in metadata["topics"]
                if not t["error_code"] for p in t["partitions"]}

    leaders = await pool.cached("leaders " + " ".join(topics), fetch_leaders)
    async with pool.admin() as client:
        by_node: dict[int, dict[str, list[int]]] = {}
        for tp in partitions:
            leader = leaders.get((tp.topic, tp.partition), -1)
            if leader >= 0:
                by_node.setdefault(leader, {}).setdefault(tp.topic, []).append(tp.partition)
        answers = await asyncio.gather(*(
            client._send_request_to_node(node, OffsetRequest(-1, 0, [(t, [(p, -1) for p in ps])
                                                                     for t, ps in sorted(wanted.items())]))
            for node, wanted in sorted(by_node.items())))
    for answer in answers:
        for t in answer.to_object()["topics"]:
            for p in t["partitions"]:
                if not p["error_code"]:
                    offset = p["offset"] if "offset" in p else (p.get("offsets") or [-1])[0]
                    out[TopicPartition(t["topic"], int(p["partition"]))] = int(offset)
    missing = [tp for tp in partitions if tp not in out and (tp.topic, tp.partition) in leaders]
    if missing:
        out |= await _end_offsets_by_consumer(pool.bootstrap, missing)
    return out


async def _end_offsets_by_consumer(bootstrap: str, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
    """A consumer for one request, not kept: a consumer keeps refreshing the metadata of the
    topics it has looked at, and a broker with auto.create.topics.enable would re-create
    such a topic after its deletion. retry_backoff_ms: it learns a topic's leader after one
    backoff."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, retry_backoff_ms=10,
                                **command_security())
    await start_client(consumer)
    try:
        return dict(await consumer.end_offsets(partitions))
    finally:
        await consumer.stop()


async def _share_group(bootstrap: str, group_id: str) -> GroupView:
    """A share group (KIP-932): its members, and per partition the share start offset and
    the records not yet delivered and settled (shown as committed and lag)."""
    shared = await describe_share_group(bootstrap, group_id)
    if shared is None:
        raise NotFound(f"share group {group_id} not found")
    members = [admin.GroupMember(m.member_id, m.client_id, m.host, [TopicPartition(t, p) for t, p in m.assignment])
               for m in shared.members]
    lags = [admin.PartitionLag(lag.topic, lag.partition, lag.start_offset, lag.start_offset + lag.lag)
            for lag in shared.lags]
    return GroupView(group_id, shared.state, "share", members, lags)


def _member(fields: tuple[Any, ...]) -> admin.GroupMember:
    """A DescribeGroups member: (member_id, [group_instance_id from v4,] client_id,
    client_host, member_metadata, member_assignment)."""
    member_id, *middle, _metadata, assignment = fields
    client_id, host = middle[-2], middle[-1]
    decoded: Any = ConsumerProtocolMemberAssignment.decode(assignment) if assignment else None
    partitions = [TopicPartition(t, p) for t, ps in decoded.assignment for p in ps] if decoded else []
    return admin.GroupMember(str(member_id), str(client_id), str(host), partitions)


@dataclass(frozen=True, slots=True)
class GroupView:
    """A consumer group as its page shows it; ``protocol`` is classic or consumer (KIP-848)."""

    group_id: str
    state: str
    protocol: str
    members: list[admin.GroupMember]
    lags: list[admin.PartitionLag]


async def group(pool: AdminPool, group_id: str) -> GroupView:
    """A group's state, members and per-partition lag; 404 for a group the cluster does not
    know. On the pool's admin client: no new connection, no bootstrap. A KIP-848 group's
    state and members come from ConsumerGroupDescribe (DescribeGroups shows it empty)."""
    with kafka_errors():
        known = await _group_kinds(pool)
        if group_id not in known:  # perhaps new since the list was fetched
            pool.forget("groups")
            known = await _group_kinds(pool)
        if group_id not in known:
            raise NotFound(f"consumer group {group_id} not found")
        if known[group_id] == "share":
            return await _share_group(pool.bootstrap, group_id)
        async with pool.admin() as client:
            described, offsets = await asyncio.gather(client.describe_consumer_groups([group_id]),
                                                      client.list_consumer_group_offsets(group_id))
        ends = await _end_offsets(pool, list(offsets)) if offsets else {}
        state, members, error = "Dead", [], 0
        for response in described:
            for error_code, _gid, group_state, _protocol_type, _protocol, group_members, *_rest in response.groups:
                error, state = int(error_code), str(group_state)
                members = [_member(tuple(m)) for m in group_members]
        # A KIP-848 group is Dead (or an error) to DescribeGroups: only then is it asked
        # with ConsumerGroupDescribe, on connections of its own.
        modern = None
        if error or state == "Dead":
            modern = (await describe_modern_groups(pool.bootstrap, [group_id]))[group_id]
    if error and modern is None:
        raise BadInput(f"cannot describe group {group_id}: error {error}")
    protocol = "classic"
    if modern is not None:
        state, protocol = modern.state, "consumer"
        members = [admin.GroupMember(m.member_id, m.client_id, m.client_host,
                                     [TopicPartition(t, p) for t, p in m.assignment]) for m in modern.members]
    lags = [admin.PartitionLag(tp.topic, tp.partition, meta.offset, ends.get(tp, -1))
            for tp, meta in sorted(offsets.items(), key=lambda item: (item[0].topic, item[0].partition))]
    return GroupView(group_id, state, protocol, members, lags)


async def _group_kinds(pool: AdminPool) -> dict[str, str]:
    """Every group's protocol type (consumer, share...): ListGroups, shared for ``FRESH_S``."""
    async def fetch() -> dict[str, str]:
        async with pool.admin() as client:
            return {str(g[0]): str(g[1]) for g in await client.list_consumer_groups()}

    return await pool.cached("groups", fetch)


async def reset_group(pool: AdminPool, group_id: str, topic_name: str, to: str,
                      value: int | None) -> list[admin.OffsetReset]:
    """Move a group's committed offsets on ``topic_name``; only while it has no members
    (409 otherwise), as kafka-consumer-groups.sh --reset-offsets requires."""
    if to not in ("earliest", "latest", "offset", "timestamp"):
        raise BadInput(f"reset to must be earliest, latest, offset or timestamp, not {to!r}")
    bootstrap = pool.bootstrap
    found = await group(pool, group_id)
    if found.members:
        raise Conflict(f"{'share' if found.protocol == 'share' else 'consumer'} group {group_id} is {found.state} "
                       f"with {len(found.members)} member(s): stop its consumers before resetting offsets")
    await topic_exists(bootstrap, topic_name)
    with kafka_errors():
        if found.protocol != "share":
            return await admin.reset_offsets(bootstrap, group_id, topic_name, to, value, execute=True)
        # A share group has a share start offset per partition (KIP-932), set with
        # AlterShareGroupOffsets; the targets are computed as for a consumer group.
        planned = await admin.reset_offsets(bootstrap, group_id, topic_name, to, value, execute=False)
        starts = {(lag.topic, lag.partition): lag.committed for lag in found.lags}
        rows = [admin.OffsetReset(r.topic, r.partition, starts.get((r.topic, r.partition), -1), r.new, r.earliest,
                                  r.latest) for r in planned]
        try:
            await alter_share_group_offsets(bootstrap, group_id, topic_name, {r.partition: r.new for r in rows})
        except ValueError as exc:
            raise BadInput(str(exc)) from None
        return rows
