"""Share groups (KIP-932) on the wire: ShareGroupHeartbeat, ShareGroupDescribe, ShareFetch,
ShareAcknowledge and Describe/Alter/DeleteShareGroupOffsets, translated to and from the
share coordinator (``streamkit.broker.share``).

ShareFetch reads the log like Fetch does (stored batches, never re-encoded) and says which
offsets of them this member acquired; the client delivers only those. Control batches and,
under read_committed, aborted transactional batches are archived, never acquired.

Each request first asks whether this broker coordinates the share group (``share_error``:
a cluster member coordinates the groups of the ``__share_group_state`` partitions it leads)
and is answered once the state changes it made are replicated.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import Any
from weakref import WeakKeyDictionary

from streamkit.broker.codec import Request
from streamkit.broker.errors import ErrorCode
from streamkit.broker.handlers.cluster import ensure_share_state_topic
from streamkit.broker.handlers.common import (
    LEADER_EPOCH,
    NO_OPERATIONS,
    Reply,
    field,
    high_watermark_stale,
    share_error,
)
from streamkit.broker.share.coordinator import ShareCoordinator
from streamkit.broker.share.partition import InvalidAcknowledgement, SharePartition
from streamkit.broker.state import BrokerState, ClientInfo
from streamkit.broker.waiters import Deadline
from streamkit.log.batch import iter_batch_spans, parse_header
from streamkit.log.errors import LogError
from streamkit.log.partition import PartitionLog

__all__ = [
    "alter_share_group_offsets",
    "delete_share_group_offsets",
    "describe_share_group_offsets",
    "share_acknowledge",
    "share_fetch",
    "share_group_describe",
    "share_group_heartbeat",
]

log = logging.getLogger(__name__)

_ASSIGNOR = "simple"
_LATEST = -1
_EARLIEST = -2
# How much log one ShareFetch reads to find the batches it may acquire: the records it
# returns are read again, bounded by what was acquired.
_CLASSIFY_BYTES = 1 << 20


def _ms(value: Any) -> int:
    return int(value.total_seconds() * 1000)


def _partitions_of(state: BrokerState, topic: str) -> int | None:
    info = state.topics.get(topic)
    return None if info is None or info.internal else info.partitions


def _topic_id_of(state: BrokerState, topic: str) -> str | None:
    info = state.topics.get(topic)
    return None if info is None else str(info.topic_id)


def _topic_partitions(state: BrokerState, assignment: dict[str, tuple[int, ...]]) -> list[dict[str, Any]]:
    out = []
    for topic, parts in sorted(assignment.items()):
        info = state.topics.get(topic)
        if info is not None and parts:
            out.append({"topic_id": info.topic_id, "topic_name": topic, "partitions": list(parts)})
    return out


# -- ShareGroupHeartbeat / ShareGroupDescribe ------------------------------------------------


async def share_group_heartbeat(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    body = req.body
    interval = state.share.settings_for(body.group_id).heartbeat_interval_ms
    error = share_error(state, body.group_id)
    if state.cluster is not None and not await ensure_share_state_topic(state, state.cluster):
        error = ErrorCode.coordinator_not_available
    if error != ErrorCode.none:
        return {"throttle_time": 0, "error_code": error, "error_message": None, "member_id": body.member_id,
                "member_epoch": -1, "heartbeat_interval": interval}
    mark = state.coordinators.share_mark(body.group_id)
    if state.share.group(body.group_id) is None and state.coordinator.get(body.group_id) is not None:
        # a classic (or consumer) group already has this id: one id, one kind of group
        return {"throttle_time": 0, "error_code": ErrorCode.inconsistent_group_protocol,
                "error_message": f"group {body.group_id} exists and is not a share group",
                "member_id": body.member_id, "member_epoch": -1, "heartbeat_interval": interval}
    subscribed = field(body, "subscribed_topic_names")
    result = state.share.heartbeat(
        body.group_id, body.member_id, int(body.member_epoch),
        None if subscribed is None else tuple(subscribed), field(body, "rack_id"),
        client.client_id, client.host, lambda t: _partitions_of(state, t), lambda t: _topic_id_of(state, t))
    reply: dict[str, Any] = {"throttle_time": 0, "error_code": result.error, "error_message": result.message,
                             "member_id": body.member_id, "member_epoch": result.member_epoch,
                             "heartbeat_interval": interval, "assignment": None}
    if result.assignment is not None:
        reply["assignment"] = {"topic_partitions": _topic_partitions(state, result.assignment)}
    durable = await state.coordinators.share_writes_since(body.group_id, mark)
    if durable != ErrorCode.none:
        reply.update(error_code=durable, assignment=None)
    return reply


async def share_group_describe(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    body = req.body
    groups = []
    for group_id in body.group_ids:
        error = share_error(state, group_id)
        if error != ErrorCode.none:
            groups.append({"error_code": error, "group_id": group_id, "error_message": None,
                           "group_state": "", "group_epoch": -1, "assignment_epoch": -1,
                           "assignor_name": "", "members": [], "authorized_operations": NO_OPERATIONS})
            continue
        group = state.share.group(group_id)
        if group is None and group_id not in state.share.group_ids():
            groups.append({"error_code": ErrorCode.group_id_not_found, "group_id": group_id,
                           "error_message": f"share group {group_id} does not exist",
                           "group_state": "Dead", "group_epoch": -1, "assignment_epoch": -1,
                           "assignor_name": "", "members": [], "authorized_operations": NO_OPERATIONS})
            continue
        members = [] if group is None else [
            {"member_id": m.member_id, "rack_id": m.rack_id, "member_epoch": m.epoch,
             "client_id": m.client_id, "client_host": m.client_host,
             "subscribed_topic_names": list(m.subscribed),
             "assignment": {"topic_partitions": _topic_partitions(state, m.assignment)}}
            for m in group.members.values()]
        groups.append({"error_code": ErrorCode.none, "group_id": group_id,
                       "group_state": "Empty" if group is None else group.state,
                       "group_epoch": 0 if group is None else group.epoch,
                       "assignment_epoch": 0 if group is None else group.assignment_epoch,
                       "assignor_name": _ASSIGNOR, "members": members,
                       "authorized_operations": NO_OPERATIONS})
    return {"throttle_time": 0, "groups": groups}


# -- ShareFetch / ShareAcknowledge -----------------------------------------------------------


def _initial_offset(state: BrokerState, plog: PartitionLog, topic: str, index: int, reset: str) -> int | None:
    """Where a new share-partition starts; None for "latest" while this broker is a new
    leader whose high watermark may be below what the previous leader had committed
    (``high_watermark_stale``): starting there would deliver records from before the group
    asked for the latest ones. Kafka's SharePartition fails its initialization then with
    OffsetNotAvailableException (ShareFetchUtils.offsetForLatestTimestamp: ListOffsets'
    rule, KIP-207) and the ShareFetch answers the partition OFFSET_NOT_AVAILABLE."""
    if reset == "earliest":
        return plog.log_start_offset
    return None if high_watermark_stale(state, topic, index) else plog.high_watermark


def _share_partition(state: BrokerState, group_id: str, topic: str, index: int) -> SharePartition | ErrorCode:
    """The share-partition (initialized on first use), or the error that answers it."""
    info = state.topics.get(topic)
    plog = state.topics.partition(topic, index)
    if info is None or plog is None:
        return ErrorCode.unknown_topic_or_partition
    sp = state.share.partition((group_id, topic, index), str(info.topic_id),
                               lambda reset: _initial_offset(state, plog, topic, index, reset))
    if sp is None:
        log.debug("share-partition %s of %s-%d not initialized: the high watermark %d is below the start of "
                  "this leader's epoch; OFFSET_NOT_AVAILABLE", group_id, topic, index, plog.high_watermark)
        return ErrorCode.offset_not_available
    sp.move_start(plog.log_start_offset)
    return sp


def _acknowledge(state: BrokerState, group_id: str, member_id: str, topic: str, index: int,
                 batches: Any) -> tuple[ErrorCode, str | None]:
    sp = _share_partition(state, group_id, topic, index)
    if isinstance(sp, ErrorCode):
        return sp, None
    try:
        for b in batches:
            sp.acknowledge(member_id, int(b.first_offset), int(b.last_offset),
                           tuple(int(t) for t in b.acknowledge_types))
    except InvalidAcknowledgement as exc:
        state.share.persist((group_id, topic, index))  # the batches before the bad one stand
        _serve_parked(state, group_id, topic, index)
        return ErrorCode.invalid_record_state, str(exc)
    state.share.persist((group_id, topic, index))
    _serve_parked(state, group_id, topic, index)
    return ErrorCode.none, None


# ShareFetches waiting for records, per share-partition: what an acknowledgement settles
# first goes to them (Kafka completes its delayed share fetches before the acknowledging
# request's own fetch), else a member that acknowledges and fetches in one request would
# take every freed batch of a full in-flight window, and the others would starve.
_parked: WeakKeyDictionary[ShareCoordinator, dict[tuple[str, str, int], list[_Fill]]] = WeakKeyDictionary()


def _serve_parked(state: BrokerState, group_id: str, topic: str, index: int) -> None:
    """Acquire for the ShareFetches parked on the share-partition (synchronously, inside the
    acknowledging request's write batch) and answer those that got records."""
    for fill in list(_parked.get(state.share, {}).get((group_id, topic, index), ())):
        if fill.served is not None and not fill.served.done() and fill.once():
            fill.served.set_result(None)


def _classify(plog: PartitionLog, start: int, upper: int, max_bytes: int, max_records: int,
              read_committed: bool) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Offset ranges from ``start`` (below ``upper``) that hold data for consumers, and the
    ones that never reach them (control batches, aborted transactions); enough batches for
    ``max_records`` records, read in chunks of at most _CLASSIFY_BYTES."""
    if start >= upper:
        return [], []
    data, _next = plog.read_chunk(start, min(max_bytes, _CLASSIFY_BYTES), max_offset=upper)
    aborted = plog.aborted_transactions(start, upper) if read_committed else []
    wanted = max_records
    deliverable: list[tuple[int, int]] = []
    skipped: list[tuple[int, int]] = []
    for pos, _size, base, last in iter_batch_spans(data):
        if base >= upper:
            break
        last = min(last, upper - 1)
        header = parse_header(data, pos)
        dead = header.is_control or (header.is_transactional and any(
            a.producer_id == header.producer_id and a.first_offset <= base <= a.last_offset for a in aborted))
        (skipped if dead else deliverable).append((base, last))
        if not dead:
            wanted -= last - base + 1
            if wanted <= 0:
                break
    return deliverable, skipped


def _fetch_partition(state: BrokerState, group_id: str, member_id: str, topic: str, index: int,
                     max_records: int, max_bytes: int) -> tuple[bytes, list[dict[str, int]], ErrorCode]:
    plog = state.topics.partition(topic, index)
    sp = _share_partition(state, group_id, topic, index)
    if isinstance(sp, ErrorCode):
        return b"", [], sp
    if plog is None:
        return b"", [], ErrorCode.unknown_topic_or_partition
    read_committed = state.share.settings_for(group_id).isolation_level == "read_committed"
    upper = plog.last_stable_offset if read_committed else plog.high_watermark
    try:
        deliverable, skipped = _classify(plog, max(sp.end_offset, plog.log_start_offset), upper,
                                         max_bytes, max_records, read_committed)
        acquired = sp.acquire(member_id, max_records, deliverable, skipped)
        if not acquired:
            if skipped:
                state.share.persist((group_id, topic, index))
            return b"", [], ErrorCode.none
        first, last = acquired[0].first_offset, acquired[-1].last_offset
        data, next_offset = plog.read_chunk(first, max(max_bytes, 1), max_offset=last + 1)
        if next_offset <= last:
            acquired = sp.unacquire(member_id, next_offset, acquired)
        state.share.persist((group_id, topic, index))
    except LogError:
        return b"", [], ErrorCode.offset_out_of_range
    ranges = [{"first_offset": r.first_offset, "last_offset": r.last_offset,
               "delivery_count": r.delivery_count} for r in acquired]
    return data, ranges, ErrorCode.none


def _topic_name(state: BrokerState, topic_id: Any) -> str | None:
    if topic_id is None:
        return None
    info = state.topics.by_id(topic_id if isinstance(topic_id, uuid.UUID) else uuid.UUID(str(topic_id)))
    return None if info is None else info.name


def _leader(state: BrokerState) -> dict[str, int]:
    return {"leader_id": state.node_id, "leader_epoch": LEADER_EPOCH}


def _top_error(code: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": code, "error_message": message, "responses": [],
            "node_endpoints": [], "acquisition_lock_timeout": 0}


def _check_member(state: BrokerState, group_id: str | None, member_id: str | None) -> tuple[ErrorCode, str | None]:
    if not group_id or not member_id:
        return ErrorCode.invalid_request, "a share request needs a group id and a member id"
    if not state.share.is_member(group_id, member_id):
        return ErrorCode.unknown_member_id, f"member {member_id} is not in share group {group_id}"
    return ErrorCode.none, None


async def share_fetch(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    body = req.body
    group_id, member_id, epoch = body.group_id, body.member_id, int(body.share_session_epoch)
    key = group_id or ""  # a request without one is refused below (INVALID_REQUEST)
    if (error := share_error(state, key)) != ErrorCode.none:
        return _top_error(error, None)
    mark = state.coordinators.share_mark(key)
    reply = await _share_fetch(state, body, group_id, member_id, epoch)
    durable = await state.coordinators.share_writes_since(key, mark)
    return reply if durable == ErrorCode.none else _top_error(durable, None)


async def _share_fetch(state: BrokerState, body: Any, group_id: str, member_id: str, epoch: int) -> Reply:
    share = state.share
    share.expire_members()
    code, message = _check_member(state, group_id, member_id)
    if code != ErrorCode.none and epoch != -1:
        return _top_error(code, message)
    has_acks = any(p.acknowledgement_batches for t in body.topics for p in t.partitions)
    if epoch == 0 and has_acks:
        return _top_error(ErrorCode.invalid_request, "a new share session carries no acknowledgements")
    code, session = share.session(group_id, member_id, epoch)
    if session is None:
        return _top_error(code, f"share session of member {member_id}: {code.name}")
    lock_ms = share.settings_for(group_id).record_lock_duration_ms
    results: dict[tuple[str, int], dict[str, Any]] = {}
    ids: dict[str, Any] = {}

    def entry(topic: str, index: int) -> dict[str, Any]:
        return results.setdefault((topic, index), {
            "partition_index": index, "error_code": ErrorCode.none, "acknowledge_error_code": 0,
            "current_leader": _leader(state), "records": b"", "acquired_records": []})

    fill = _Fill(state, body, group_id, member_id, entry)
    with share.batched():  # the acknowledgements and the first acquisition: one write
        for t in body.topics:
            topic = _topic_name(state, t.topic_id)
            for p in t.partitions:
                index = int(p.partition_index)
                if topic is None:
                    results[(str(t.topic_id), index)] = {
                        "partition_index": index, "error_code": ErrorCode.unknown_topic_id,
                        "acknowledge_error_code": 0, "current_leader": _leader(state), "records": b"",
                        "acquired_records": []}
                    ids[str(t.topic_id)] = t.topic_id
                    continue
                ids[topic] = t.topic_id
                if epoch != -1:
                    session.partitions.add((topic, index))
                if p.acknowledgement_batches:
                    ack, ack_message = _acknowledge(state, group_id, member_id, topic, index,
                                                    p.acknowledgement_batches)
                    e = entry(topic, index)
                    e["acknowledge_error_code"] = int(ack)
                    e["acknowledge_error_message"] = ack_message
                else:
                    entry(topic, index)
        for t in field(body, "forgotten_topics_data", ()) or ():
            topic = _topic_name(state, t.topic_id)
            for index in t.partitions:
                session.partitions.discard((topic or "", int(index)))
        if epoch == -1:
            share.close_session(group_id, member_id)
            got = 0
        else:
            fill.partitions = sorted(session.partitions)
            got = fill.once()
    if epoch != -1 and not got:
        await fill.wait()
    responses: dict[str, dict[str, Any]] = {}
    for (topic, _index), e in sorted(results.items(), key=lambda kv: kv[0]):
        tid = ids.get(topic)
        if tid is None:
            info = state.topics.get(topic)
            tid = info.topic_id if info else None
        responses.setdefault(topic, {"topic_id": tid, "partitions": []})["partitions"].append(e)
    return {"throttle_time": 0, "error_code": ErrorCode.none, "acquisition_lock_timeout": lock_ms,
            "responses": list(responses.values()), "node_endpoints": []}


class _Fill:
    """Acquiring records for a share session's partitions: ``once()`` (synchronous, so it
    runs inside the request's write batch), and ``wait()`` for some up to max_wait."""

    def __init__(self, state: BrokerState, body: Any, group_id: str, member_id: str,
                 entry: Callable[[str, int], dict[str, Any]]) -> None:
        self.state = state
        self.group_id = group_id
        self.member_id = member_id
        self.entry = entry
        self.max_records = max(int(field(body, "max_records", 500)), 1)
        self.max_bytes = min(int(field(body, "max_bytes", state.config.fetch_max_bytes)),
                             state.config.fetch_max_bytes)
        self.deadline = Deadline(_ms(body.max_wait))
        self.partitions: list[tuple[str, int]] = []
        self.failed: set[tuple[str, int]] = set()  # answered with an error in this request
        self.served: asyncio.Future[None] | None = None  # set when an acknowledgement acquired for it

    def once(self) -> int:
        """Records acquired for the session's partitions now."""
        got = 0
        budget = self.max_bytes
        for topic, index in self.partitions:
            if got >= self.max_records or budget <= 0:
                break
            if (topic, index) in self.failed:
                # answered with its error and no records, as Kafka does: a client drops the
                # records of a partition with an error, so none are acquired for it now
                continue
            data, ranges, code = _fetch_partition(self.state, self.group_id, self.member_id, topic, index,
                                                  self.max_records - got, budget)
            if code != ErrorCode.none:
                self.entry(topic, index)["error_code"] = code
                self.failed.add((topic, index))
                continue
            if ranges:
                e = self.entry(topic, index)
                e["records"] = data
                e["acquired_records"] = ranges
                got += sum(r["last_offset"] - r["first_offset"] + 1 for r in ranges)
                budget -= len(data)
        return got

    async def wait(self) -> None:
        parked = _parked.setdefault(self.state.share, {})
        keys = [(self.group_id, topic, index) for topic, index in self.partitions]
        self.served = asyncio.get_running_loop().create_future()
        for key in keys:
            parked.setdefault(key, []).append(self)
        try:
            while self.partitions:
                remaining = self.deadline.remaining_s()
                if remaining <= 0:
                    return
                # no append wakes it: a lock may still have expired, so look again until the deadline
                append = asyncio.ensure_future(self.state.waiters.wait(self.partitions, min(remaining, 0.1)))
                await asyncio.wait((append, self.served), return_when=asyncio.FIRST_COMPLETED)
                if not append.done():
                    append.cancel()
                if self.served.done():
                    return  # an acknowledgement acquired records for it
                with self.state.share.batched():
                    if self.once():
                        return
        finally:
            for key in keys:
                fills = parked.get(key)
                if fills is not None:
                    fills.remove(self)
                    if not fills:
                        del parked[key]


async def share_acknowledge(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    body = req.body
    group_id, member_id, epoch = body.group_id, body.member_id, int(body.share_session_epoch)
    key = group_id or ""  # a request without one is refused below (INVALID_REQUEST)
    if (error := share_error(state, key)) != ErrorCode.none:
        return _top_error(error, None)
    mark = state.coordinators.share_mark(key)
    reply = _share_acknowledge(state, body, group_id, member_id, epoch)
    durable = await state.coordinators.share_writes_since(key, mark)
    return reply if durable == ErrorCode.none else _top_error(durable, None)


def _share_acknowledge(state: BrokerState, body: Any, group_id: str, member_id: str, epoch: int) -> Reply:
    share = state.share
    share.expire_members()
    if epoch == 0:
        return _top_error(ErrorCode.invalid_share_session_epoch, "ShareAcknowledge cannot open a share session")
    code, message = _check_member(state, group_id, member_id)
    if code != ErrorCode.none and epoch != -1:
        return _top_error(code, message)
    code, session = share.session(group_id, member_id, epoch)
    if session is None:
        return _top_error(code, f"share session of member {member_id}: {code.name}")
    with share.batched():
        responses = _acknowledge_all(state, body, group_id, member_id)
        if epoch == -1:
            share.close_session(group_id, member_id)
    return {"throttle_time": 0, "error_code": ErrorCode.none, "responses": responses, "node_endpoints": [],
            "acquisition_lock_timeout": share.settings_for(group_id).record_lock_duration_ms}


def _acknowledge_all(state: BrokerState, body: Any, group_id: str, member_id: str) -> list[dict[str, Any]]:
    responses = []
    for t in body.topics:
        topic = _topic_name(state, t.topic_id)
        parts = []
        for p in t.partitions:
            index = int(p.partition_index)
            if topic is None:
                parts.append({"partition_index": index, "error_code": ErrorCode.unknown_topic_id,
                              "current_leader": _leader(state)})
                continue
            ack, ack_message = _acknowledge(state, group_id, member_id, topic, index, p.acknowledgement_batches)
            parts.append({"partition_index": index, "error_code": ack, "error_message": ack_message,
                          "current_leader": _leader(state)})
        responses.append({"topic_id": t.topic_id, "partitions": parts})
    return responses


# -- Describe/Alter/DeleteShareGroupOffsets ---------------------------------------------------


def share_lag(state: BrokerState, group_id: str, topic: str, index: int) -> tuple[int, int]:
    """(start offset, lag) of a share-partition; (-1, -1) if it was never initialized."""
    key = (group_id, topic, index)
    sp = state.share.partitions.get(key)
    plog = state.topics.partition(topic, index)
    if sp is None or plog is None or state.share.topic_ids.get(key) not in (_topic_id_of(state, topic), ""):
        return -1, -1  # never initialized, or for a topic of this name that is gone
    start = max(sp.start_offset, plog.log_start_offset)
    return start, max(plog.high_watermark - start - sp.done_in_window(), 0)


async def describe_share_group_offsets(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    groups = []
    for g in req.body.groups:
        if (error := share_error(state, g.group_id)) != ErrorCode.none:
            groups.append({"group_id": g.group_id, "topics": [], "error_code": error})
            continue
        if g.topics is None:
            names = sorted({k[1] for k in state.share.partitions if k[0] == g.group_id})
            wanted = [(n, [k[2] for k in sorted(state.share.partitions) if k[0] == g.group_id and k[1] == n])
                      for n in names]
        else:
            wanted = [(t.topic_name, [int(p) for p in t.partitions]) for t in g.topics]
        topics = []
        for name, parts in wanted:
            info = state.topics.get(name)
            rows = []
            for index in parts:
                if info is None or not 0 <= index < info.partitions:
                    rows.append({"partition_index": index, "start_offset": -1, "leader_epoch": -1, "lag": -1,
                                 "error_code": ErrorCode.unknown_topic_or_partition})
                    continue
                start, lag = share_lag(state, g.group_id, name, index)
                rows.append({"partition_index": index, "start_offset": start, "leader_epoch": LEADER_EPOCH,
                             "lag": lag, "error_code": ErrorCode.none})
            topics.append({"topic_name": name, "topic_id": info.topic_id if info else None, "partitions": rows})
        groups.append({"group_id": g.group_id, "topics": topics, "error_code": ErrorCode.none})
    return {"throttle_time": 0, "groups": groups}


def _not_empty(state: BrokerState, group_id: str) -> str | None:
    group = state.share.group(group_id)
    if group is not None and group.members:
        return f"share group {group_id} has {len(group.members)} member(s); offsets change only when it is empty"
    return None


async def alter_share_group_offsets(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    return await _durably(state, req.body.group_id, lambda: _alter_share_group_offsets(state, req.body))


async def _durably(state: BrokerState, group_id: str, call: Callable[[], dict[str, Any]]) -> Reply:
    """Alter/DeleteShareGroupOffsets: on its coordinator, answered once its writes are replicated."""
    if (error := share_error(state, group_id)) != ErrorCode.none:
        return {"throttle_time": 0, "error_code": error, "error_message": None, "responses": []}
    mark = state.coordinators.share_mark(group_id)
    with state.share.batched():
        reply = call()
    durable = await state.coordinators.share_writes_since(group_id, mark)
    if durable != ErrorCode.none:
        return {"throttle_time": 0, "error_code": durable, "error_message": None, "responses": []}
    return reply


def _alter_share_group_offsets(state: BrokerState, body: Any) -> dict[str, Any]:
    if (busy := _not_empty(state, body.group_id)) is not None:
        return {"throttle_time": 0, "error_code": ErrorCode.non_empty_group, "error_message": busy, "responses": []}
    responses = []
    for t in body.topics:
        info = state.topics.get(t.topic_name)
        parts: list[dict[str, Any]] = []
        for p in t.partitions:
            index = int(p.partition_index)
            plog = state.topics.partition(t.topic_name, index)
            if info is None or plog is None:
                parts.append({"partition_index": index, "error_code": ErrorCode.unknown_topic_or_partition})
                continue
            offset = int(p.start_offset)
            if offset in (_LATEST, _EARLIEST):
                found = _initial_offset(state, plog, t.topic_name, index, "latest" if offset == _LATEST else "earliest")
                if found is None:
                    parts.append({"partition_index": index, "error_code": ErrorCode.offset_not_available,
                                  "error_message": "the latest offset is not known yet: this new leader's high "
                                                   "watermark is below the start of its leader epoch"})
                    continue
                offset = found
            if not plog.log_start_offset <= offset <= plog.high_watermark:
                parts.append({"partition_index": index, "error_code": ErrorCode.offset_out_of_range,
                              "error_message": f"offset {offset} is outside [{plog.log_start_offset}, "
                                               f"{plog.high_watermark}]"})
                continue
            state.share.reset((body.group_id, t.topic_name, index), str(info.topic_id), offset)
            parts.append({"partition_index": index, "error_code": ErrorCode.none})
        responses.append({"topic_name": t.topic_name, "topic_id": info.topic_id if info else None,
                          "partitions": parts})
    return {"throttle_time": 0, "error_code": ErrorCode.none, "responses": responses}


async def delete_share_group_offsets(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    return await _durably(state, req.body.group_id, lambda: _delete_share_group_offsets(state, req.body))


def _delete_share_group_offsets(state: BrokerState, body: Any) -> dict[str, Any]:
    if (busy := _not_empty(state, body.group_id)) is not None:
        return {"throttle_time": 0, "error_code": ErrorCode.non_empty_group, "error_message": busy, "responses": []}
    responses = []
    for t in body.topics:
        info = state.topics.get(t.topic_name)
        keys = [k for k in state.share.partitions if k[0] == body.group_id and k[1] == t.topic_name]
        if info is None and not keys:
            responses.append({"topic_name": t.topic_name, "topic_id": None,
                              "error_code": ErrorCode.unknown_topic_or_partition})
            continue
        for key in keys:
            state.share.delete(key)
        responses.append({"topic_name": t.topic_name, "topic_id": info.topic_id if info else None,
                          "error_code": ErrorCode.none})
    return {"throttle_time": 0, "error_code": ErrorCode.none, "responses": responses}
