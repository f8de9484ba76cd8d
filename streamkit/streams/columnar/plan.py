"""Which steps of a DSL graph run on columns, and why: one plan for both executors.

A source topic's chain runs columnar (``executor.ColumnarSource``) when every step from the
source up to and including its windowed aggregation allows it:

- the source is an external topic (a repartition topic's records each carry their writer's
  watermark, read per record) with JSON values (a dict, or a pydantic model without
  validators, whose checks a columnar decode would skip) and no timestamp extractor, read
  by one ``app.stream`` and no agent;
- each step before the aggregation is a ``filter`` over a column expression;
- the aggregation is ``.window(tumbling|hopping).count()``, ``.sum(col)`` or ``.agg(...)``
  with ``.final()`` and no ``timestamp=`` (``.current()`` emits a result per record);
- the chain does not fork.

Everything after the aggregation gets its results one by one as windows close: that is the
row path, and cheap (one record per key and window). Anything else runs on the row path,
which also takes any batch the columnar decode refuses (a tombstone, a value that does not
fit the model): the same results either way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from streamkit.streams.codecs import JsonCodec, ModelCodec
from streamkit.streams.columnar.aggs import AggSpec
from streamkit.streams.columnar.expr import Expr, Schema, _scalar, schema_of
from streamkit.streams.windows import HoppingWindows, TumblingWindows

if TYPE_CHECKING:
    from pydantic import BaseModel

    from streamkit.streams.dsl import App, StreamNode
    from streamkit.streams.topic import Topic

__all__ = ["ColumnarChain", "Step", "columnar_chain", "explain", "value_model", "value_schema"]

COLUMNAR = "columnar"
ROW = "row"


@dataclass(frozen=True)
class Step:
    node: StreamNode
    path: str  # columnar | row
    why: str


@dataclass(frozen=True)
class ColumnarChain:
    """A source topic's chain that runs on columns: its filters and its aggregation node."""

    source: StreamNode
    filters: tuple[Expr, ...]
    aggregate: StreamNode
    spec: AggSpec
    model: type[BaseModel] | None


def value_model(node: StreamNode) -> tuple[type[BaseModel] | None, bool]:
    """(the pydantic model of ``node``'s values, whether their type is known at all): a
    model, or dicts (None, True), or unknown after a map or join (None, False)."""
    while True:
        if node.kind == "source":
            codec = node.params["topic"].value_codec
            if isinstance(codec, ModelCodec):
                return codec.model, True
            return None, isinstance(codec, JsonCodec)
        if node.kind not in ("filter", "peek", "group_by", "branch", "branch_out", "merge"):
            return None, False
        parent = node.parents[0]
        if not hasattr(parent, "kind"):
            return None, False
        node = parent  # type: ignore[assignment]


def value_schema(node: StreamNode) -> tuple[Schema, str]:
    """(field -> type of ``node``'s values, the model's name) for checking expressions."""
    model, _known = value_model(node)
    return schema_of(model), model.__name__ if model is not None else "the value"


def _has_validators(model: type[BaseModel]) -> bool:
    decorators = model.__pydantic_decorators__
    return bool(decorators.field_validators or decorators.model_validators or decorators.validators
                or decorators.root_validators or decorators.field_serializers or decorators.model_serializers)


def _source_reason(topic: Topic) -> str | None:
    """Why ``topic``'s values cannot be decoded into columns (None: they can)."""
    if topic.timestamp_extractor is not None:
        return "the topic has a timestamp extractor (a Python function per record)"
    codec = topic.value_codec
    if isinstance(codec, ModelCodec):
        model = codec.model
        if _has_validators(model):
            return f"{model.__name__} has validators, which only pydantic runs"
        if model.model_config.get("extra") == "forbid":
            return f"{model.__name__} forbids extra fields, which only pydantic checks"
        for name, info in model.model_fields.items():
            if info.alias is not None or info.validation_alias is not None:
                return f"{model.__name__}.{name} has an alias"
            if _scalar(info.annotation) is object:
                return f"{model.__name__}.{name} is not a scalar (bool, int, float, str)"
        return None
    if isinstance(codec, JsonCodec) and (codec._adapter is None or codec.type_ is dict):
        return None  # a value that is not a JSON object: Arrow refuses the batch, the row path judges it
    return f"values are decoded by {type(codec).__name__}, not plain JSON"


def _graph(app: App) -> tuple[dict[int, StreamNode], dict[int, list[StreamNode]]]:
    nodes: dict[int, StreamNode] = {}
    downstream: dict[int, list[StreamNode]] = {}

    def visit(node: StreamNode) -> None:
        if node.id in nodes:
            return
        nodes[node.id] = node
        for parent in node.parents:
            p: Any = getattr(parent, "update_stream", parent)
            downstream.setdefault(p.id, []).append(node)
            visit(p)

    for sink in app.streams:
        visit(sink)
    return nodes, downstream


def _aggregate_reason(node: StreamNode) -> str | None:
    spec: AggSpec | None = node.params.get("columns")
    agg = node.params["agg"]
    if spec is None:
        return "reduce/aggregate (or sum) over Python functions"
    if not isinstance(agg.spec, TumblingWindows | HoppingWindows):
        return "sliding and session windows depend on each record's neighbours"
    if agg.timestamp is not None:
        return "timestamp= runs a Python function per record"
    if node.params["emit"] != "final":
        return ".current() emits a result per record"
    return None


def _plan_topic(sources: list[StreamNode], downstream: dict[int, list[StreamNode]],
                external: bool) -> tuple[list[Step], ColumnarChain | None]:
    """The steps of one topic's chain, up to the first stateful step, and its columnar
    form if every one of them allows it."""
    steps: list[Step] = []
    source = sources[0]
    topic: Topic = source.params["topic"]
    blocker = None
    if not external:
        blocker = "a repartition topic: each record carries its writer's watermark"
    elif len(sources) > 1:
        blocker = "the topic is read by several app.stream() nodes"
    else:
        blocker = _source_reason(topic)
    filters: list[Expr] = []
    node = source
    chain: ColumnarChain | None = None
    steps.append(Step(source, COLUMNAR if blocker is None else ROW,
                      blocker or "a fetch batch's values decoded into Arrow columns in one call"))
    while True:
        children = downstream.get(node.id, [])
        if len(children) != 1:
            if blocker is None:
                blocker = "the chain forks" if children else "no windowed aggregation to pre-aggregate"
            for child in children:
                steps.append(Step(child, ROW, blocker))
            break
        child = children[0]
        if child.kind == "filter":
            expr = child.params.get("expr")
            if expr is None:
                blocker = blocker or "filter(lambda): a Python function per record"
                steps.append(Step(child, ROW, "filter(lambda): a Python function per record"))
            else:
                filters.append(expr)
                steps.append(Step(child, COLUMNAR if blocker is None else ROW,
                                  "an Arrow compute kernel over the batch" if blocker is None else blocker))
            node = child
            continue
        if child.kind == "window_aggregate":
            why = _aggregate_reason(child)
            blocker = blocker or why
            if blocker is None:
                steps.append(Step(child, COLUMNAR, "windows assigned arithmetically; one partial aggregate per "
                                                   "(key, window) and batch, one store update per key"))
                model, _ = value_model(source)
                chain = ColumnarChain(source, tuple(filters), child, child.params["columns"], model)
            else:
                steps.append(Step(child, ROW, why or blocker))
            break
        blocker = blocker or f"{child.kind}: runs per record"
        steps.append(Step(child, ROW, f"{child.kind}: runs per record"))
        node = child
    if chain is None:
        # One row step makes the whole chain row: earlier steps say so.
        steps = [Step(s.node, ROW, s.why if s.path == ROW else f"row path: {blocker}") for s in steps]
    return steps, chain


def columnar_chain(app: App, topic: str, external: bool) -> ColumnarChain | None:
    """``topic``'s chain if it runs on columns."""
    nodes, downstream = _graph(app)
    sources = [n for n in nodes.values() if n.kind == "source" and n.params["topic"].name == topic]
    if not sources:
        return None
    return _plan_topic(sources, downstream, external)[1]


def _label(node: StreamNode) -> str:
    p = node.params
    if node.kind == "source":
        return f"source {p['topic'].name}"
    if node.kind == "filter":
        return f"filter {p['expr']!r}" if p.get("expr") is not None else "filter <lambda>"
    if node.kind == "group_by":
        key = p.get("expr")
        return f"group_by {key!r} -> {p['topic'].name}" if key is not None else f"group_by -> {p['topic'].name}"
    if node.kind == "window_aggregate":
        spec: AggSpec | None = p.get("columns")
        what = "aggregate(fn)" if spec is None else ", ".join(
            f"{a.kind}({'' if a.expr is None else repr(a.expr)})" for a in spec.aggs)
        kind = type(p["agg"].spec).__name__.removesuffix("Windows").lower()
        return f"{kind} {node.path!r}: {what} .{p['emit']}()"
    if node.kind == "to":
        return f"to {p['topic'].name}"
    return f"{node.kind} {node.path}"


def explain(app: App) -> str:
    """Each step of the app's DSL graph, the path it runs on (columnar or row) and why."""
    nodes, downstream = _graph(app)
    repartitions = {n.params["topic"].name for n in nodes.values() if n.kind == "group_by"}
    lines: list[str] = []
    seen: set[int] = set()
    readers: dict[str, list[StreamNode]] = {}
    for n in nodes.values():
        if n.kind == "source":
            readers.setdefault(n.params["topic"].name, []).append(n)
    roots = [(name, srcs, name not in repartitions) for name, srcs in readers.items()]
    for n in nodes.values():
        if n.kind == "group_by" and n.id not in seen:
            roots.append((n.params["topic"].name, [n], False))
    for name, srcs, external in roots:
        lines.append(f"topic {name}:")
        if external:
            steps, _chain = _plan_topic(srcs, downstream, True)
            covered = {s.node.id for s in steps}
            for s in steps:
                seen.add(s.node.id)
                lines.append(f"  {_label(s.node):<48} {s.path:<8} {s.why}")
        else:
            covered = {srcs[0].id}
            lines.append(f"  {'(repartitioned records)':<48} {ROW:<8} each record carries its writer's watermark")
        _rest(srcs, covered, downstream, lines, seen)
    return "\n".join(lines)


def _rest(srcs: list[StreamNode], covered: set[int], downstream: dict[int, list[StreamNode]], lines: list[str],
          seen: set[int]) -> None:
    """The steps after the planned ones: row, per record (or per window result)."""
    stack = [c for s in srcs for c in downstream.get(s.id, [])]
    while stack:
        node = stack.pop(0)
        if node.id in covered:
            stack.extend(downstream.get(node.id, []))
            continue
        covered.add(node.id)
        seen.add(node.id)
        if node.parents and getattr(node.parents[0], "kind", "") == "window_aggregate":
            why = "per window result"
        elif node.params.get("expr") is not None:
            why = "a column expression, evaluated per record on the row path"
        elif node.params.get("fn") is not None:
            why = "a Python function per record"
        else:
            why = "per record"
        lines.append(f"  {_label(node):<48} {ROW:<8} {why}")
        if node.kind != "group_by":
            stack.extend(downstream.get(node.id, []))
