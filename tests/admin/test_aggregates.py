"""The shared pieces: epoch seconds and time buckets on both databases, and medians."""

import statistics
from datetime import UTC, datetime, timedelta

import numpy as np
from sqlalchemy import literal, select
from sqlalchemy.orm import Session

from app.admin.aggregates import (
    bucket_index,
    bucket_start,
    epoch_seconds,
    grouped_medians,
    to_epoch,
)

MOMENTS = [
    datetime(1970, 1, 1, 0, 0, 1),
    datetime(2024, 2, 29, 23, 59, 59, 999_999),
    datetime(2024, 3, 1, 0, 0, 0),
    datetime(2026, 11, 22, 10, 59, 59, 900_000),
]


def test_epoch_seconds_truncates_like_python(session: Session) -> None:
    for moment in MOMENTS:
        stored = session.scalar(select(epoch_seconds(literal(moment))))
        assert stored == int(moment.replace(tzinfo=UTC).timestamp()) == to_epoch(moment)


def test_bucket_start_aligns_to_the_width() -> None:
    moment = datetime(2026, 11, 22, 10, 59, 59, 900_000)
    assert bucket_start(moment, timedelta(hours=1)) == datetime(2026, 11, 22, 10)
    assert bucket_start(moment, timedelta(hours=6)) == datetime(2026, 11, 22, 6)
    assert bucket_start(moment, timedelta(days=1)) == datetime(2026, 11, 22)


def test_bucket_index_in_sql_matches_python(session: Session) -> None:
    start = datetime(2026, 11, 20, 6)
    width = timedelta(hours=6)
    moments = [start + timedelta(minutes=m, microseconds=7) for m in range(0, 3000, 173)]
    moments += [start, start + width - timedelta(microseconds=1), start + width]
    for moment in moments:
        expected = int((moment - start) / width)
        assert session.scalar(select(bucket_index(literal(moment), start, width))) == expected


def test_grouped_medians_match_statistics_median() -> None:
    times = {1: [5_000, 1_000, 3_000], 2: [4_000, 1_000, 2_000, 10_000], 3: [7_000]}
    groups = np.array([group for group, values in times.items() for _ in values])
    values = np.array([value for values in times.values() for value in values], dtype=float)
    order = np.random.default_rng(0).permutation(len(values))  # any order of rows
    medians = grouped_medians(groups[order], values[order])
    assert medians == {
        **{group: statistics.median(values) for group, values in times.items()},
        None: statistics.median(v for values in times.values() for v in values),
    }
    assert all(type(key) is int for key in medians if key is not None)


def test_grouped_medians_of_nothing_is_empty() -> None:
    assert grouped_medians(np.array([], dtype=np.int64), np.array([], dtype=float)) == {}
