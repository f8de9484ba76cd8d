"""The vectorized DSL: column expressions, and the columnar executor beside the row path.

    from streamkit.streams.columnar import col, count, sum

    (app.stream(views)
        .filter(col("page") != "/health")
        .window(streamkit.tumbling(minutes=1))
        .agg(count(), sum("amount"), name="page_stats")
        .final()
        .to("page_stats"))

One plan (``plan``), two executors: ``executor.ColumnarSource`` runs a chain a fetch batch
at a time on Arrow columns when every step allows it, and gives the results the row path
gives; ``StreamNode.explain()`` says which path each step takes and why.
"""

from streamkit.streams.columnar.aggs import AggExpr, AggSpec, count, max, min, sum
from streamkit.streams.columnar.expr import Expr, ExprTypeError, col, lit

__all__ = ["AggExpr", "AggSpec", "Expr", "ExprTypeError", "col", "count", "lit", "max", "min", "sum"]
