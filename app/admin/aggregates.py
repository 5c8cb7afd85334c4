"""Building blocks the dashboard's figures share; the SQL ones are written once for SQLite
and Postgres.

- ``share``: a part of a whole, or None where the whole is empty (never a made-up 0).
- ``epoch_seconds``: whole seconds since 1970 of a naive UTC timestamp, the base of
  fixed-width time buckets (Postgres's ``date_trunc`` has no SQLite twin, and SQLite's
  ``strftime`` no Postgres one).
- ``grouped_medians``: the median of a value per group and overall, from window functions
  both databases have (Postgres's ``percentile_cont`` does not exist in SQLite).
"""

from collections.abc import Hashable
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Select,
    SQLColumnExpression,
    func,
    null,
    or_,
    select,
    union_all,
)
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import Session
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement


def share(part: int, whole: int) -> float | None:
    """``part / whole``; None for an empty whole."""
    return part / whole if whole else None


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


def grouped_medians(session: Session, rows: Select[Any, Any]) -> dict[Hashable, float]:
    """The median of the second column of ``rows`` per value of the first (never null), and
    over all the rows under the key None; rows whose second column is null are left out.
    One statement.

    Rows are ranked within their group and overall; a median is the middle row, or the
    mean of the two middle rows of an even count. Each row is computed once.
    """
    group_key, value = rows.subquery("median_rows").c
    # Window functions see the rows the WHERE keeps: nulls are neither ranked nor counted.
    ranked = (
        select(
            group_key.label("group_key"),
            value.label("value"),
            func.row_number().over(partition_by=group_key, order_by=value).label("in_group"),
            func.count().over(partition_by=group_key).label("group_size"),
            func.row_number().over(order_by=value).label("overall"),
            func.count().over().label("size"),
        )
        .where(value.is_not(None))
        .cte("ranked_values")
    )
    per_group = (
        select(ranked.c.group_key, func.avg(ranked.c.value))
        .where(_middle(ranked.c.in_group, ranked.c.group_size))
        .group_by(ranked.c.group_key)
    )
    overall = select(null(), func.avg(ranked.c.value)).where(
        _middle(ranked.c.overall, ranked.c.size)
    )
    medians = session.execute(union_all(per_group, overall))
    return {key: float(median) for key, median in medians if median is not None}


def _middle(position: ColumnElement[int], size: ColumnElement[int]) -> ColumnElement[bool]:
    """The middle row of ``size`` ranked rows, or both middle rows of an even count."""
    return or_(position == (size + 1) // 2, position == (size + 2) // 2)
