"""Aggregations over column expressions: ``.agg(count(), sum("amount"))``.

An ``AggSpec`` is what both executors fold with: the row path calls ``add`` per record, the
columnar path computes one partial aggregate per (key, window) and batch with Arrow's hash
aggregations and folds it in with ``merge``. Each of count, sum, min and max is a monoid
(``merge(init(), x) == x``, associative), so both give the same result; null values are
skipped, as in SQL: ``sum`` of nothing is 0, ``min``/``max`` of nothing is None.

The aggregate of ``.agg(...)`` is a dict, one entry per aggregation (``count``,
``sum_amount``, ... or the name given with ``.alias()``); ``.count()`` and ``.sum(col)``
keep their single number (``scalar``).
"""

from __future__ import annotations

import builtins
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from streamkit.streams.columnar.expr import Col, Expr, ExprTypeError, Schema, _kind, col, side_desc

__all__ = ["AggExpr", "AggSpec", "count", "max", "min", "sum"]


@dataclass(frozen=True)
class AggExpr:
    """One aggregation: ``kind`` over ``expr`` (none for ``count()``), named ``name``."""

    kind: str  # count | sum | min | max
    expr: Expr | None
    name: str

    def alias(self, name: str) -> AggExpr:
        """The same aggregation under another name in the result."""
        return AggExpr(self.kind, self.expr, name)

    def __repr__(self) -> str:
        inner = "" if self.expr is None else repr(self.expr)
        return f"{self.kind}({inner}) as {self.name!r}"


def _expr(x: Expr | str) -> Expr:
    return col(x) if isinstance(x, str) else x


def _default_name(kind: str, expr: Expr) -> str:
    return f"{kind}_{expr.name}" if isinstance(expr, Col) else kind


def count() -> AggExpr:
    """The number of records."""
    return AggExpr("count", None, "count")


def sum(x: Expr | str) -> AggExpr:
    """The sum of a numeric column (nulls skipped; 0 over none)."""
    e = _expr(x)
    return AggExpr("sum", e, _default_name("sum", e))


def min(x: Expr | str) -> AggExpr:
    """The smallest value (nulls skipped; None over none)."""
    e = _expr(x)
    return AggExpr("min", e, _default_name("min", e))


def max(x: Expr | str) -> AggExpr:
    """The largest value (nulls skipped; None over none)."""
    e = _expr(x)
    return AggExpr("max", e, _default_name("max", e))


def _zero(kind: str) -> Any:
    return 0 if kind in ("count", "sum") else None


def _merge_one(kind: str, a: Any, b: Any) -> Any:
    if kind in ("count", "sum"):
        return a + b
    if a is None:
        return b
    if b is None:
        return a
    return builtins.min(a, b) if kind == "min" else builtins.max(a, b)


@dataclass(frozen=True)
class AggSpec:
    """The aggregations of one windowed aggregation, and how to fold them."""

    aggs: tuple[AggExpr, ...]
    scalar: bool = False  # the aggregate is the single aggregation's value, not a dict

    def check(self, schema: Schema, model_name: str) -> None:
        names = [a.name for a in self.aggs]
        if not self.aggs:
            raise ExprTypeError("agg() needs at least one aggregation: count(), sum(col), min(col), max(col)")
        if len(set(names)) != len(names):
            raise ExprTypeError(f"agg(): two aggregations named alike ({names}); name them apart with .alias()")
        for a in self.aggs:
            if a.expr is None:
                continue
            t = a.expr.dtype(schema, model_name)
            kind = _kind(t)
            if a.kind == "sum" and kind not in ("number", "unknown"):
                raise ExprTypeError(f"sum({a.expr!r}): {side_desc(a.expr, t, model_name)} is not a number")
            if a.kind in ("min", "max") and kind not in ("number", "string", "unknown"):
                raise ExprTypeError(f"{a.kind}({a.expr!r}): {side_desc(a.expr, t, model_name)} cannot be ordered")

    def columns(self) -> frozenset[str]:
        out: frozenset[str] = frozenset()
        for a in self.aggs:
            if a.expr is not None:
                out |= a.expr.columns()
        return out

    def init(self) -> Any:
        if self.scalar:
            return _zero(self.aggs[0].kind)
        return {a.name: _zero(a.kind) for a in self.aggs}

    def merge(self, a: Any, b: Any) -> Any:
        """Two partial aggregates in one."""
        if self.scalar:
            return _merge_one(self.aggs[0].kind, a, b)
        return {x.name: _merge_one(x.kind, a[x.name], b[x.name]) for x in self.aggs}

    def merger(self) -> Callable[[Any, Any], Any]:
        """``merge``, with a scalar count or sum as plain addition (the per-group hot path)."""
        if self.scalar and self.aggs[0].kind in ("count", "sum"):
            return operator.add
        return self.merge

    def adder(self) -> Callable[[Any, Any], Any]:
        """``add(aggregate, value)`` for the row path."""
        parts = [(a.kind, a.name, None if a.expr is None else a.expr.row()) for a in self.aggs]
        if self.scalar:
            kind, _name, get = parts[0]
            if get is None:
                return lambda agg, _v: agg + 1

            def add_one(agg: Any, value: Any) -> Any:
                assert get is not None
                x = get(value)
                return agg if x is None else _merge_one(kind, agg, x)

            return add_one

        def add(agg: Any, value: Any) -> Any:
            out = dict(agg)
            for kind, name, fn in parts:
                if fn is None:
                    out[name] += 1
                else:
                    x = fn(value)
                    if x is not None:
                        out[name] = _merge_one(kind, out[name], x)
            return out

        return add
