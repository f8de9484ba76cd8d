"""The pipeline view: one graph of source connectors -> topics -> stream apps -> topics ->
sink connectors, built from what the services say of themselves.

- A connector's topics: those in its config (``topic``, ``topics``) and those Connect saw it
  use (``GET /connectors/NAME/topics``); its kind (source or sink) from its status.
- A stream app's inputs: the topics of the partitions its workers hold (``/health``); its
  outputs: the topics it declares (``/``) that it does not read. Its internal topics
  (``APP-...-changelog``, ``APP-...-repartition``) are left out: they are its own business.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from streamkit.console.apps import Worker, internal_topic

__all__ = ["Edge", "Node", "Pipeline", "build_pipeline"]


@dataclass(frozen=True, slots=True)
class Node:
    id: str
    kind: str  # source, sink, topic or app
    label: str
    url: str
    state: str = ""


@dataclass(frozen=True, slots=True)
class Edge:
    source: str
    target: str


@dataclass(slots=True)
class Pipeline:
    nodes: list[Node] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _split(value: Any) -> list[str]:
    return [t.strip() for t in str(value or "").split(",") if t.strip()]


def build_pipeline(connectors: dict[str, Any], active_topics: dict[str, list[str]], workers: list[Worker]) -> Pipeline:
    """``connectors`` as ``GET /connectors?expand=status,info`` answers; ``active_topics``,
    each connector's ``GET /connectors/NAME/topics``."""
    out = Pipeline()
    nodes: dict[str, Node] = {}
    edges: set[Edge] = set()

    def topic(name: str) -> str:
        node_id = f"topic:{name}"
        nodes.setdefault(node_id, Node(node_id, "topic", name, f"/topics/{quote(name, safe='')}"))
        return node_id

    for name, entry in sorted(connectors.items()):
        status = entry.get("status") or {}
        config = (entry.get("info") or {}).get("config") or {}
        kind = str(status.get("type") or (entry.get("info") or {}).get("type") or "source")
        node_id = f"{kind}:{name}"
        state = str((status.get("connector") or {}).get("state", ""))
        nodes[node_id] = Node(node_id, "sink" if kind == "sink" else "source", name,
                              f"/connect/connectors/{quote(name, safe='')}", state)
        names = set(_split(config.get("topics")) + _split(config.get("topic")) + active_topics.get(name, []))
        for t in sorted(names):
            edges.add(Edge(topic(t), node_id) if kind == "sink" else Edge(node_id, topic(t)))

    apps: dict[str, tuple[set[str], set[str], list[Worker]]] = {}
    for w in workers:
        if not w.up or w.app is None:
            out.notes.append(f"stream worker {w.address} is down: its app is not drawn ({w.error})")
            continue
        inputs, declared, members = apps.setdefault(w.app, (set(), set(), []))
        inputs.update(w.inputs)
        declared.update(w.topics)
        members.append(w)
    for app, (inputs, declared, members) in sorted(apps.items()):
        node_id = f"app:{app}"
        nodes[node_id] = Node(node_id, "app", app, f"/apps/{quote(members[0].address, safe=':')}",
                              f"{len(members)} worker(s)")
        for t in sorted(inputs):
            if not internal_topic(app, t):
                edges.add(Edge(topic(t), node_id))
        for t in sorted(declared - inputs):
            if not internal_topic(app, t):
                edges.add(Edge(node_id, topic(t)))
    order = {"source": 0, "topic": 1, "app": 2, "sink": 3}
    out.nodes = sorted(nodes.values(), key=lambda n: (order[n.kind], n.label))
    out.edges = sorted(edges, key=lambda e: (e.source, e.target))
    return out
