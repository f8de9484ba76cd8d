"""CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs, AlterConfigs,
IncrementalAlterConfigs."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from streamkit.broker.codec import Request
from streamkit.broker.config import BROKER_CONFIGS, BrokerConfig
from streamkit.broker.errors import BrokerError, ErrorCode
from streamkit.broker.group_configs import GROUP_CONFIG_DEFS, GroupConfig
from streamkit.broker.handlers.common import Reply, field
from streamkit.broker.state import BrokerState, ClientInfo
from streamkit.broker.topics import INTERNAL_TOPICS
from streamkit.log.config import BROKER_SYNONYMS, TOPIC_CONFIGS, ConfigDef, LogConfig
from streamkit.log.errors import ConfigError

if TYPE_CHECKING:
    from streamkit.broker.cluster.node import ClusterNode

__all__ = [
    "alter_configs",
    "create_partitions",
    "create_topics",
    "delete_topics",
    "describe_configs",
    "incremental_alter_configs",
]

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
GROUP_RESOURCE = 32  # Kafka 4's group configs (KIP-848 / KIP-932)

# DescribeConfigs config_source values
_DYNAMIC_TOPIC = 1
_STATIC_BROKER = 4
_DEFAULT = 5
_GROUP = 8  # GROUP_CONFIG
# DescribeConfigs config_type values
_TYPES = {"boolean": 1, "string": 2, "int": 3, "long": 5, "double": 6, "list": 7}


# -- topics --------------------------------------------------------------------------------


def _topic_error(name: str, code: ErrorCode, message: str | None) -> dict[str, Any]:
    """A CreateTopics result for a topic that was not created: every field of every version
    (v5+ requires configs, num_partitions, replication_factor and topic_id; Kafka sends -1,
    -1, null and the zero UUID)."""
    return {"name": name, "topic_id": None, "error_code": code, "error_message": message,
            "num_partitions": -1, "replication_factor": -1, "configs": None}


def _create_one(state: BrokerState, t: Any, validate_only: bool) -> dict[str, Any]:
    name = t.name
    configs = {c.name: c.value for c in t.configs if c.value is not None}
    partitions = int(t.num_partitions)
    replication = int(t.replication_factor)
    if t.assignments:
        bad = [a for a in t.assignments if list(a.broker_ids) != [state.node_id]]
        if bad or partitions != -1 or replication != -1:
            return _topic_error(name, ErrorCode.invalid_replica_assignment,
                                f"every partition must be assigned to broker {state.node_id} alone")
        partitions, replication = len(t.assignments), 1
    if partitions == -1:
        partitions = state.config.num_partitions
    if replication == -1:
        replication = state.config.default_replication_factor
    try:
        config = state.topics.check_create(name, partitions, replication, configs)
        info = None if validate_only else state.topics.create(name, partitions, configs, replication)
    except BrokerError as exc:
        return _topic_error(name, exc.error_code, exc.message)
    overrides = set(configs)
    return {
        "name": name,
        "topic_id": info.topic_id if info else None,
        "error_code": ErrorCode.none,
        "error_message": None,
        "num_partitions": partitions,
        "replication_factor": replication,
        "configs": [{"name": k, "value": v, "read_only": False, "is_sensitive": False,
                     "config_source": _DYNAMIC_TOPIC if k in overrides else _DEFAULT}
                    for k, v in config.to_kafka().items()],
    }


async def _create_in_cluster(state: BrokerState, cluster: ClusterNode, t: Any, validate_only: bool,
                             timeout_ms: int) -> dict[str, Any]:
    name = t.name
    configs = {c.name: c.value for c in t.configs if c.value is not None}
    partitions, replication = int(t.num_partitions), int(t.replication_factor)
    assignment = None
    if t.assignments:
        if partitions != -1 or replication != -1:
            return _topic_error(name, ErrorCode.invalid_request,
                                "give either an assignment or partitions and replication factor")
        assignment = {int(a.partition_index): tuple(int(b) for b in a.broker_ids) for a in t.assignments}
        partitions = len(assignment)
        replication = len(next(iter(assignment.values()), ()))
    if partitions == -1:
        partitions = state.config.num_partitions
    if replication == -1:
        replication = state.config.default_replication_factor
    try:
        created = await cluster.create_topic(name, partitions, replication, configs, assignment, validate_only)
    except BrokerError as exc:
        return _topic_error(name, exc.error_code, exc.message)
    if not validate_only:
        # Kafka answers once the topic is in ZooKeeper; waiting for its leaders (bounded by
        # the request's timeout) spares clients a round of LEADER_NOT_AVAILABLE.
        await cluster.wait_for_leaders(name, timeout_ms)
    config = LogConfig.from_kafka(configs, base=state.config.topic_defaults)
    return {"name": name, "topic_id": None if validate_only else created.topic_id, "error_code": ErrorCode.none,
            "error_message": None, "num_partitions": partitions, "replication_factor": replication,
            "configs": [{"name": k, "value": v, "read_only": False, "is_sensitive": False,
                         "config_source": _DYNAMIC_TOPIC if k in configs else _DEFAULT}
                        for k, v in config.to_kafka().items()]}


async def create_topics(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    body = req.body
    validate_only = bool(field(body, "validate_only", False))
    if state.cluster is not None:
        timeout_ms = int(body.timeout.total_seconds() * 1000)
        return {"throttle_time": 0, "topics": [await _create_in_cluster(state, state.cluster, t, validate_only,
                                                                        timeout_ms) for t in body.topics]}
    return {"throttle_time": 0, "topics": [_create_one(state, t, validate_only) for t in body.topics]}


async def _delete_in_cluster(state: BrokerState, cluster: ClusterNode, name: str | None,
                             topic_id: Any) -> dict[str, Any]:
    md = cluster.metadata
    if name is None and topic_id is not None:
        name = next((n for n, a in md.topics.items() if a.topic_id == topic_id), None)
    if name is None or name not in md.topics:
        code = ErrorCode.unknown_topic_id if name is None else ErrorCode.unknown_topic_or_partition
        return {"name": name, "topic_id": topic_id, "error_code": code, "error_message": None}
    found_id = md.topics[name].topic_id
    if not state.config.delete_topic_enable:
        return {"name": name, "topic_id": found_id, "error_code": ErrorCode.topic_deletion_disabled,
                "error_message": None}
    if name in INTERNAL_TOPICS:
        return {"name": name, "topic_id": found_id, "error_code": ErrorCode.invalid_topic_exception,
                "error_message": f"internal topic {name} cannot be deleted"}
    await cluster.delete_topic(name)
    return {"name": name, "topic_id": found_id, "error_code": ErrorCode.none, "error_message": None}


def _delete_one(state: BrokerState, name: str | None, topic_id: Any) -> dict[str, Any]:
    info = state.topics.get(name) if name else (state.topics.by_id(topic_id) if topic_id else None)
    if info is None:
        code = ErrorCode.unknown_topic_id if name is None else ErrorCode.unknown_topic_or_partition
        return {"name": name, "topic_id": topic_id, "error_code": code, "error_message": None}
    if not state.config.delete_topic_enable:
        return {"name": info.name, "topic_id": info.topic_id,
                "error_code": ErrorCode.topic_deletion_disabled, "error_message": None}
    if info.internal:
        return {"name": info.name, "topic_id": info.topic_id, "error_code": ErrorCode.invalid_topic_exception,
                "error_message": f"internal topic {info.name} cannot be deleted"}
    state.topics.delete(info.name)
    for group_id, offsets in list(state.coordinator.offsets.items()):
        gone = [tp for tp in offsets if tp[0] == info.name]
        if gone:
            state.coordinator.delete_offsets(group_id, gone)
    state.waiters.notify_all()
    return {"name": info.name, "topic_id": info.topic_id, "error_code": ErrorCode.none, "error_message": None}


async def delete_topics(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    body = req.body
    topics = field(body, "topics")
    wanted = [(t.name, t.topic_id) for t in topics] if topics is not None else [(n, None) for n in body.topic_names]
    if state.cluster is not None:
        responses = [await _delete_in_cluster(state, state.cluster, n, i) for n, i in wanted]
    else:
        responses = [_delete_one(state, n, i) for n, i in wanted]
    return {"throttle_time": 0, "responses": responses}


async def create_partitions(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    body = req.body
    results = []
    for t in body.topics:
        try:
            if state.cluster is not None:
                assignment = [tuple(int(b) for b in a.broker_ids) for a in t.assignments] if t.assignments else None
                await state.cluster.add_partitions(t.name, int(t.count), assignment, bool(body.validate_only))
            else:
                state.topics.add_partitions(t.name, int(t.count), bool(body.validate_only))
            results.append({"name": t.name, "error_code": ErrorCode.none, "error_message": None})
        except BrokerError as exc:
            results.append({"name": t.name, "error_code": exc.error_code, "error_message": exc.message})
    return {"throttle_time": 0, "results": results}


# -- configs -------------------------------------------------------------------------------


def _entry(name: str, kind: str, doc: str, value: str, source: int, synonyms: list[dict[str, Any]],
           docs: bool, read_only: bool = False) -> dict[str, Any]:
    return {"name": name, "value": value, "read_only": read_only, "config_source": source,
            "is_sensitive": False, "synonyms": synonyms, "config_type": _TYPES.get(kind, 0),
            "documentation": doc if docs else None}


def _topic_doc(d: ConfigDef) -> str:
    return f"{d.doc} ({d.effect})" if d.effect else d.doc


def _topic_synonyms(d: ConfigDef, override: str | None, broker_value: str, builtin: str) -> list[dict[str, Any]]:
    """Kafka's synonym chain, most specific first: the topic override, the broker setting
    (when the broker sets one), then the default under the broker name Kafka reports it by
    (retention.ms <- log.retention.hours=168)."""
    chain = []
    if override is not None:
        chain.append({"name": d.name, "value": override, "source": _DYNAMIC_TOPIC})
    if broker_value != builtin and d.synonym:
        chain.append({"name": d.synonym, "value": broker_value, "source": _STATIC_BROKER})
    if d.default_synonym is not None:
        chain.append({"name": d.default_synonym[0], "value": str(d.default_synonym[1]), "source": _DEFAULT})
    else:
        chain.append({"name": d.synonym or d.name, "value": builtin, "source": _DEFAULT})
    return chain


def _topic_overrides(state: BrokerState, name: str) -> dict[str, str]:
    """A topic's config overrides: the cluster's (ZooKeeper), or this broker's."""
    cluster = state.cluster
    if cluster is not None:
        if name not in cluster.metadata.topics:
            raise BrokerError(ErrorCode.unknown_topic_or_partition, f"topic {name!r} does not exist")
        return dict(cluster.metadata.configs.get(name, {}))
    info = state.topics.get(name)
    if info is None:
        raise BrokerError(ErrorCode.unknown_topic_or_partition, f"topic {name!r} does not exist")
    return dict(info.overrides)


async def _set_topic_overrides(state: BrokerState, name: str, overrides: dict[str, str], validate_only: bool) -> None:
    cluster = state.cluster
    if cluster is None:
        state.topics.set_overrides(name, overrides, validate_only)
        return
    _topic_overrides(state, name)  # exists
    try:
        LogConfig.from_kafka(overrides, base=state.config.topic_defaults)
    except ConfigError as exc:
        raise BrokerError(ErrorCode.invalid_config, str(exc)) from exc
    if not validate_only:
        await cluster.set_topic_configs(name, overrides)


def _describe_topic(state: BrokerState, name: str, keys: set[str] | None, synonyms: bool, docs: bool) -> list[dict[str, Any]]:
    overrides = _topic_overrides(state, name)
    effective = LogConfig.from_kafka(overrides, base=state.config.topic_defaults).to_kafka()
    broker_values = state.config.topic_defaults.to_kafka()
    builtin = LogConfig().to_kafka()
    out = []
    for d in TOPIC_CONFIGS:
        if keys is not None and d.name not in keys:
            continue
        if d.name in overrides:
            source = _DYNAMIC_TOPIC
        elif broker_values[d.name] != builtin[d.name]:
            source = _STATIC_BROKER
        else:
            source = _DEFAULT
        chain = _topic_synonyms(d, effective[d.name] if d.name in overrides else None,
                                broker_values[d.name], builtin[d.name]) if synonyms else []
        out.append(_entry(d.name, d.kind, _topic_doc(d), effective[d.name], source, chain, docs))
    return out


def _describe_broker(state: BrokerState, name: str, keys: set[str] | None, synonyms: bool,
                     docs: bool) -> list[dict[str, Any]]:
    if name not in ("", str(state.node_id)):
        raise BrokerError(ErrorCode.invalid_request, f"broker {name!r} is not this broker ({state.node_id})")
    values = state.config.to_kafka()
    defaults = BrokerConfig().to_kafka()
    defs = {d.name: d for d in BROKER_CONFIGS}
    out = []
    for key, value in values.items():
        if keys is not None and key not in keys:
            continue
        d = defs.get(key) or LogConfig.definition(BROKER_SYNONYMS[key])
        assert d is not None
        # Kafka: a setting from server.properties is STATIC_BROKER_CONFIG, one left at its
        # default DEFAULT_CONFIG; neither can be altered at run time here, so both read-only.
        source = _STATIC_BROKER if value != defaults[key] else _DEFAULT
        chain = [{"name": key, "value": value, "source": source}] if synonyms else []
        out.append(_entry(key, d.kind, d.doc, value, source, chain, docs, read_only=True))
    return out


def _describe_group(state: BrokerState, name: str, keys: set[str] | None, synonyms: bool,
                    docs: bool) -> list[dict[str, Any]]:
    if not name:
        raise BrokerError(ErrorCode.invalid_request, "a group config resource needs a group id")
    store = state.group_configs
    overrides = store.overrides(name)
    effective = store.get(name).to_kafka()
    defaults = store.defaults.to_kafka()
    builtin = GroupConfig().to_kafka()
    out = []
    for d in GROUP_CONFIG_DEFS:
        if keys is not None and d.name not in keys:
            continue
        if d.name in overrides:
            source = _GROUP
        elif defaults[d.name] != builtin[d.name]:
            source = _STATIC_BROKER
        else:
            source = _DEFAULT
        chain = []
        if synonyms:
            if d.name in overrides:
                chain.append({"name": d.name, "value": effective[d.name], "source": _GROUP})
            broker_name = d.broker_default or d.name
            chain.append({"name": broker_name, "value": defaults[d.name],
                          "source": _STATIC_BROKER if defaults[d.name] != builtin[d.name] else _DEFAULT})
        out.append(_entry(d.name, d.kind, d.doc, effective[d.name], source, chain, docs))
    return out


async def describe_configs(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    body = req.body
    synonyms = bool(field(body, "include_synonyms", False))
    docs = bool(field(body, "include_documentation", False))
    results = []
    for r in body.resources:
        keys = set(r.configuration_keys) if r.configuration_keys is not None else None
        base = {"resource_type": r.resource_type, "resource_name": r.resource_name}
        kind = int(r.resource_type)
        try:
            if kind == TOPIC_RESOURCE:
                configs = _describe_topic(state, r.resource_name, keys, synonyms, docs)
            elif kind == BROKER_RESOURCE:
                configs = _describe_broker(state, r.resource_name, keys, synonyms, docs)
            elif kind == GROUP_RESOURCE:
                configs = _describe_group(state, r.resource_name, keys, synonyms, docs)
            else:
                raise BrokerError(ErrorCode.invalid_request, f"resource type {r.resource_type} is not supported")
            results.append({**base, "error_code": ErrorCode.none, "error_message": None, "configs": configs})
        except BrokerError as exc:
            results.append({**base, "error_code": exc.error_code, "error_message": exc.message, "configs": []})
    return {"throttle_time": 0, "results": results}


async def _alter(state: BrokerState, r: Any, new_overrides: dict[str, str], validate_only: bool) -> dict[str, Any]:
    base = {"resource_type": r.resource_type, "resource_name": r.resource_name}
    kind = int(r.resource_type)
    try:
        if kind == TOPIC_RESOURCE:
            await _set_topic_overrides(state, r.resource_name, new_overrides, validate_only)
        elif kind == GROUP_RESOURCE:
            try:
                state.group_configs.set_overrides(r.resource_name, new_overrides, validate_only)
            except ConfigError as exc:
                raise BrokerError(ErrorCode.invalid_config, str(exc)) from exc
        elif kind == BROKER_RESOURCE:
            raise BrokerError(ErrorCode.invalid_request,
                              "broker configs are set at start (server.properties or --set), not altered")
        else:
            raise BrokerError(ErrorCode.invalid_request, f"resource type {r.resource_type} is not supported")
        return {**base, "error_code": ErrorCode.none, "error_message": None}
    except BrokerError as exc:
        return {**base, "error_code": exc.error_code, "error_message": exc.message}


async def alter_configs(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    """AlterConfigs replaces the whole set of a resource's overrides (Kafka's semantics)."""
    body = req.body
    return {"throttle_time": 0, "responses": [
        await _alter(state, r, {c.name: c.value for c in r.configs if c.value is not None}, bool(body.validate_only))
        for r in body.resources]}


_SET, _DELETE, _APPEND, _SUBTRACT = 0, 1, 2, 3


def _list_default(kind: int, name: str) -> tuple[str, ...] | None:
    """The built-in default of a list config (what APPEND/SUBTRACT start from when there is
    no override, as Kafka's ConfigAdminManager does); None when ``name`` is not a list."""
    if kind != TOPIC_RESOURCE:
        return None  # no group config is a list
    d = LogConfig.definition(name)
    return tuple(d.default) if d is not None and d.kind == "list" else None


def _incremental(kind: int, current: dict[str, str], configs: Any) -> dict[str, str]:
    """Apply IncrementalAlterConfigs operations in order. APPEND adds the new items that are
    missing after the current ones; SUBTRACT removes items and keeps the rest's order; an
    emptied list stays an (empty) override, as in Kafka."""
    out = dict(current)
    seen: set[str] = set()
    for c in configs:
        if c.name in seen:
            raise BrokerError(ErrorCode.invalid_request, f"config {c.name} appears twice in one request")
        seen.add(c.name)
        op = int(c.config_operation)
        if op == _SET:
            out[c.name] = c.value or ""
        elif op == _DELETE:
            out.pop(c.name, None)
        elif op in (_APPEND, _SUBTRACT):
            default = _list_default(kind, c.name)
            if default is None:
                raise BrokerError(ErrorCode.invalid_config, f"{c.name} is not a list config: "
                                  "APPEND and SUBTRACT apply to list configs only")
            items = [i.strip() for i in out.get(c.name, ",".join(default)).split(",") if i.strip()]
            new = [i.strip() for i in (c.value or "").split(",") if i.strip()]
            items = items + [i for i in dict.fromkeys(new) if i not in items] if op == _APPEND else [
                i for i in items if i not in new]
            out[c.name] = ",".join(items)
        else:
            raise BrokerError(ErrorCode.invalid_request, f"unknown config operation {op}")
    return out


async def incremental_alter_configs(state: BrokerState, req: Request, client: ClientInfo) -> Reply:
    body = req.body
    responses = []
    for r in body.resources:
        kind = int(r.resource_type)
        current: dict[str, str] = {}
        if kind == TOPIC_RESOURCE:
            with contextlib.suppress(BrokerError):  # a missing topic is reported by _alter
                current = _topic_overrides(state, r.resource_name)
        elif kind == GROUP_RESOURCE:
            current = state.group_configs.overrides(r.resource_name)
        try:
            overrides = _incremental(kind, current, r.configs)
        except BrokerError as exc:
            responses.append({"resource_type": r.resource_type, "resource_name": r.resource_name,
                              "error_code": exc.error_code, "error_message": exc.message})
            continue
        responses.append(await _alter(state, r, overrides, bool(body.validate_only)))
    return {"throttle_time": 0, "responses": responses}
