"""Column expressions: ``col("page") != "/health"``, typed against the value's pydantic model.

One expression, two evaluations: ``row()`` compiles it to a plain function of one value (a
dict or a model instance: the row path), ``arrow()`` evaluates it over a batch's columns
with Arrow compute kernels (the columnar path). Both follow SQL's null rules, so they agree
record by record:

- a comparison or arithmetic with a null (a missing field, ``None``) is null;
- ``&``/``|`` are Kleene's (``False & null`` is False, ``True | null`` is True);
- a filter keeps a record only where its predicate is True (null drops it).

Arithmetic is ``+``, ``-`` and ``*`` (division differs between Python and Arrow at zero and
for integers, so it is left to lambdas). Types are checked when the pipeline is declared
(``check``): an unknown field, a comparison of a string with a number or a sum over strings
is a ``TypeError``/``ValueError`` naming the model and its fields.
"""

from __future__ import annotations

import operator
import types
import typing
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

if typing.TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["Col", "Expr", "ExprTypeError", "Lit", "Schema", "col", "lit", "schema_of"]

# A value's fields and their Python types (int, float, str, bool); None: not known (dict values).
Schema = dict[str, type] | None

_SCALARS = (bool, int, float, str)


class ExprTypeError(TypeError):
    """A column expression that does not fit the value's model."""


def schema_of(model: type[BaseModel] | None) -> Schema:
    """Field name -> scalar type of ``model``'s fields (``object`` for anything else)."""
    if model is None:
        return None
    out: dict[str, type] = {}
    for name, info in model.model_fields.items():
        out[name] = _scalar(info.annotation)
    return out


def _scalar(annotation: Any) -> type:
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _scalar(args[0]) if len(args) == 1 else object
    return annotation if annotation in _SCALARS else object


def _get(value: Any, name: str) -> Any:
    if isinstance(value, dict):
        return value.get(name)
    return getattr(value, name, None)


def _kind(t: type | None) -> str:
    if t is None:
        return "unknown"
    if t is bool:
        return "bool"
    if t in (int, float):
        return "number"
    if t is str:
        return "string"
    return "other"


class Expr(ABC):
    """A column expression. Build with ``col`` and ``lit``, combine with operators."""

    @abstractmethod
    def row(self) -> Callable[[Any], Any]:
        """A function of one value (dict or model) computing the expression."""

    @abstractmethod
    def arrow(self, table: pa.Table) -> Any:
        """The expression over ``table``'s columns (an Arrow array or scalar)."""

    @abstractmethod
    def columns(self) -> frozenset[str]:
        """The fields the expression reads."""

    @abstractmethod
    def dtype(self, schema: Schema, model_name: str) -> type | None:
        """The expression's type over ``schema`` (None: unknown); raises on a mismatch."""

    def _bin(self, op: str, other: Any, swap: bool = False) -> BinOp:
        rhs = other if isinstance(other, Expr) else Lit(other)
        return BinOp(op, rhs, self) if swap else BinOp(op, self, rhs)

    def __eq__(self, other: Any) -> BinOp:  # type: ignore[override]
        return self._bin("==", other)

    def __ne__(self, other: Any) -> BinOp:  # type: ignore[override]
        return self._bin("!=", other)

    def __lt__(self, other: Any) -> BinOp:
        return self._bin("<", other)

    def __le__(self, other: Any) -> BinOp:
        return self._bin("<=", other)

    def __gt__(self, other: Any) -> BinOp:
        return self._bin(">", other)

    def __ge__(self, other: Any) -> BinOp:
        return self._bin(">=", other)

    def __add__(self, other: Any) -> BinOp:
        return self._bin("+", other)

    def __radd__(self, other: Any) -> BinOp:
        return self._bin("+", other, swap=True)

    def __sub__(self, other: Any) -> BinOp:
        return self._bin("-", other)

    def __rsub__(self, other: Any) -> BinOp:
        return self._bin("-", other, swap=True)

    def __mul__(self, other: Any) -> BinOp:
        return self._bin("*", other)

    def __rmul__(self, other: Any) -> BinOp:
        return self._bin("*", other, swap=True)

    def __and__(self, other: Any) -> BinOp:
        return self._bin("&", other)

    def __or__(self, other: Any) -> BinOp:
        return self._bin("|", other)

    def __invert__(self) -> Not:
        return Not(self)

    def __bool__(self) -> bool:
        raise TypeError("a column expression has no truth value: combine conditions with & and |, not and/or")

    __hash__ = object.__hash__

    def is_in(self, values: Any) -> IsIn:
        """True where the value is one of ``values``."""
        return IsIn(self, tuple(values))


@dataclass(frozen=True, eq=False)
class Col(Expr):
    name: str

    def row(self) -> Callable[[Any], Any]:
        name = self.name
        return lambda value: _get(value, name)

    def arrow(self, table: pa.Table) -> Any:
        return table.column(self.name)

    def columns(self) -> frozenset[str]:
        return frozenset((self.name,))

    def dtype(self, schema: Schema, model_name: str) -> type | None:
        if schema is None:
            return None
        if self.name not in schema:
            raise ExprTypeError(f"col({self.name!r}): {model_name} has no field {self.name!r} "
                                f"(its fields: {', '.join(schema)})")
        return schema[self.name]

    def __repr__(self) -> str:
        return f"col({self.name!r})"


@dataclass(frozen=True, eq=False)
class Lit(Expr):
    value: Any

    def __post_init__(self) -> None:
        if self.value is not None and not isinstance(self.value, _SCALARS):
            raise ExprTypeError(f"a literal in a column expression is a bool, int, float, str or None, "
                                f"not {type(self.value).__name__}")

    def row(self) -> Callable[[Any], Any]:
        value = self.value
        return lambda _value: value

    def arrow(self, table: pa.Table) -> Any:
        import pyarrow as pa

        return pa.scalar(self.value)

    def columns(self) -> frozenset[str]:
        return frozenset()

    def dtype(self, schema: Schema, model_name: str) -> type | None:
        return None if self.value is None else type(self.value)

    def __repr__(self) -> str:
        return repr(self.value)


def lit(value: Any) -> Lit:
    """A literal value in a column expression."""
    return Lit(value)


def col(name: str) -> Col:
    """The field ``name`` of each record's value."""
    if not isinstance(name, str) or not name:
        raise ExprTypeError(f"col() takes a field name, got {name!r}")
    return Col(name)


def _kleene_and(a: Any, b: Any) -> Any:
    if a is False or b is False:
        return False
    if a is None or b is None:
        return None
    return bool(a and b)


def _kleene_or(a: Any, b: Any) -> Any:
    if a is True or b is True:
        return True
    if a is None or b is None:
        return None
    return bool(a or b)


_ROW_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt,
    ">=": operator.ge, "+": operator.add, "-": operator.sub, "*": operator.mul,
}
# Arrow compute's kernel per operator (pyarrow is imported when a columnar batch runs, not
# when an app declares its pipeline).
_ARROW_OPS = {"==": "equal", "!=": "not_equal", "<": "less", "<=": "less_equal", ">": "greater",
              ">=": "greater_equal", "+": "add_checked", "-": "subtract_checked", "*": "multiply_checked",
              "&": "and_kleene", "|": "or_kleene"}
_COMPARE = frozenset(("==", "!=", "<", "<=", ">", ">="))


@dataclass(frozen=True, eq=False)
class BinOp(Expr):
    op: str
    left: Expr
    right: Expr

    def row(self) -> Callable[[Any], Any]:
        left, right = self.left.row(), self.right.row()
        if self.op == "&":
            return lambda value: _kleene_and(left(value), right(value))
        if self.op == "|":
            return lambda value: _kleene_or(left(value), right(value))
        fn = _ROW_OPS[self.op]

        def apply(value: Any) -> Any:
            a, b = left(value), right(value)
            return None if a is None or b is None else fn(a, b)

        return apply

    def arrow(self, table: pa.Table) -> Any:
        import pyarrow.compute as pc

        return pc.call_function(_ARROW_OPS[self.op], [self.left.arrow(table), self.right.arrow(table)])

    def columns(self) -> frozenset[str]:
        return self.left.columns() | self.right.columns()

    def dtype(self, schema: Schema, model_name: str) -> type | None:
        lt, rt = self.left.dtype(schema, model_name), self.right.dtype(schema, model_name)
        lk, rk = _kind(lt), _kind(rt)
        if self.op in ("&", "|"):
            for side, kind in ((self.left, lk), (self.right, rk)):
                if kind not in ("bool", "unknown"):
                    raise ExprTypeError(f"{self!r}: {side!r} is not a condition (a bool)")
            return bool
        known = "unknown" not in (lk, rk) and not (isinstance(self.right, Lit) and self.right.value is None)
        if self.op in _COMPARE:
            if known and lk != rk:
                raise ExprTypeError(f"{self!r}: cannot compare {side_desc(self.left, lt, model_name)} with "
                                    f"{side_desc(self.right, rt, model_name)}")
            return bool
        for side, kind, t in ((self.left, lk, lt), (self.right, rk, rt)):
            if kind not in ("number", "unknown"):
                raise ExprTypeError(f"{self!r}: {side_desc(side, t, model_name)} is not a number")
        if lt is None or rt is None:
            return None
        return float if float in (lt, rt) else int

    def __repr__(self) -> str:
        return f"({self.left!r} {self.op} {self.right!r})"


def side_desc(e: Expr, t: type | None, model_name: str) -> str:
    name = "?" if t is None else t.__name__
    if isinstance(e, Col):
        return f"{model_name}.{e.name} ({name})"
    return f"{e!r} ({name})"


@dataclass(frozen=True, eq=False)
class Not(Expr):
    inner: Expr

    def row(self) -> Callable[[Any], Any]:
        inner = self.inner.row()

        def negate(value: Any) -> Any:
            v = inner(value)
            return None if v is None else not v

        return negate

    def arrow(self, table: pa.Table) -> Any:
        import pyarrow.compute as pc

        return pc.invert(self.inner.arrow(table))

    def columns(self) -> frozenset[str]:
        return self.inner.columns()

    def dtype(self, schema: Schema, model_name: str) -> type | None:
        if _kind(self.inner.dtype(schema, model_name)) not in ("bool", "unknown"):
            raise ExprTypeError(f"{self!r}: ~ needs a condition (a bool)")
        return bool

    def __repr__(self) -> str:
        return f"~{self.inner!r}"


@dataclass(frozen=True, eq=False)
class IsIn(Expr):
    inner: Expr
    values: tuple[Any, ...]

    def row(self) -> Callable[[Any], Any]:
        inner, values = self.inner.row(), frozenset(self.values)

        def member(value: Any) -> Any:
            v = inner(value)
            return None if v is None else v in values

        return member

    def arrow(self, table: pa.Table) -> Any:
        import pyarrow as pa
        import pyarrow.compute as pc

        column = self.inner.arrow(table)
        found = pc.is_in(column, value_set=pa.array(self.values, type=column.type))
        # Arrow's is_in answers False for a null; SQL's (and the row path's) answer is null.
        return pc.if_else(pc.is_null(column), pa.scalar(None, pa.bool_()), found)

    def columns(self) -> frozenset[str]:
        return self.inner.columns()

    def dtype(self, schema: Schema, model_name: str) -> type | None:
        t = self.inner.dtype(schema, model_name)
        for v in self.values:
            Lit(v)  # a scalar
            if t is not None and _kind(type(v)) != _kind(t):
                raise ExprTypeError(f"{self!r}: {v!r} is not a {t.__name__} like {side_desc(self.inner, t, model_name)}")
        return bool

    def __repr__(self) -> str:
        return f"{self.inner!r}.is_in({list(self.values)!r})"
