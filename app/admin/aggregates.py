"""Building blocks the dashboard's figures share; the SQL ones are written once for SQLite
and Postgres (``share`` and ``by_labelers``, which quality control uses too, are in
app/figures.py).

- ``epoch_seconds``: whole seconds since 1970 of a naive UTC timestamp, the base of
  fixed-width time buckets (Postgres's ``date_trunc`` has no SQLite twin, and SQLite's
  ``strftime`` no Postgres one).
- ``grouped_medians``: the median of values per group and overall, in numpy (Postgres's
  ``percentile_cont`` has no SQLite twin, and window functions sort the rows twice).
"""

from collections.abc import Hashable
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from sqlalchemy import BigInteger, ColumnElement, SQLColumnExpression
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement

from app.admin.reliability import FloatArray, IntArray


class epoch_seconds(FunctionElement[int]):
    """Whole seconds from 1970-01-01 to a naive UTC timestamp column, truncated."""

    type = BigInteger()
    inherit_cache = True


@compiles(epoch_seconds)
def _epoch_seconds_postgres(element: epoch_seconds, compiler: SQLCompiler, **kw: Any) -> str:
    # extract(epoch) of a timestamp without time zone reads it as UTC; floor, not a
    # rounding cast, keeps 10:59:59.9 in the 10 o'clock bucket.
    return f"CAST(floor(extract(epoch FROM {compiler.process(element.clauses, **kw)})) AS BIGINT)"


@compiles(epoch_seconds, "sqlite")
def _epoch_seconds_sqlite(element: epoch_seconds, compiler: SQLCompiler, **kw: Any) -> str:
    # SQLAlchemy stores "YYYY-MM-DD HH:MM:SS.ffffff"; SQLite would round the fraction to
    # milliseconds, and 10:59:59.9999 to 11:00:00, so the seconds are cut off first.
    moment = compiler.process(element.clauses, **kw)
    return f"CAST(strftime('%s', substr({moment}, 1, 19)) AS INTEGER)"


def to_epoch(moment: datetime) -> int:
    """Whole seconds since 1970 of a naive UTC datetime, as ``epoch_seconds`` counts them."""
    return int(moment.replace(tzinfo=UTC).timestamp())


def bucket_start(moment: datetime, width: timedelta) -> datetime:
    """The start of the ``width``-wide bucket (aligned to 1970-01-01 UTC) holding ``moment``."""
    seconds = int(width.total_seconds())
    start = to_epoch(moment) // seconds * seconds
    return datetime.fromtimestamp(start, UTC).replace(tzinfo=None)


def bucket_index(
    column: SQLColumnExpression[datetime], start: datetime, width: timedelta
) -> ColumnElement[int]:
    """Which ``width``-wide bucket from ``start`` a timestamp falls in (0, 1, ...).

    Only for rows at or after ``start``: integer division truncates towards zero.
    """
    return (epoch_seconds(column) - to_epoch(start)) // int(width.total_seconds())


def grouped_medians(groups: IntArray, values: FloatArray) -> dict[Hashable, float]:
    """The median of ``values`` per group (``groups`` holds each value's group), and of all
    of them under the key None; empty for no values. The median of an even count is the
    mean of the two middle values."""
    if len(values) == 0:
        return {}
    order = np.lexsort((values, groups))
    keys, starts, counts = np.unique(groups[order], return_index=True, return_counts=True)
    ranked = values[order]
    middle = (ranked[starts + (counts - 1) // 2] + ranked[starts + counts // 2]) / 2
    medians: dict[Hashable, float] = dict(zip(keys.tolist(), middle.tolist(), strict=True))
    medians[None] = float(np.median(values))
    return medians
