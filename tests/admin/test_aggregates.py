"""The portable SQL pieces: epoch seconds, time buckets and medians, on both databases."""

import statistics
from datetime import UTC, datetime, timedelta

from sqlalchemy import literal, select
from sqlalchemy.orm import Session

from app.admin.aggregates import (
    bucket_index,
    bucket_start,
    epoch_seconds,
    grouped_medians,
    to_epoch,
)
from app.models import Label
from tests.factories import make_label, make_solution, make_user

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


def test_grouped_medians_match_statistics_median(session: Session) -> None:
    times = {"odd": [5_000, 1_000, 3_000], "even": [4_000, 1_000, 2_000, 10_000], "one": [7_000]}
    labelers = {name: make_user(session, name) for name in times}
    solution = make_solution(session)
    for name, values in times.items():
        for value in values:
            make_label(session, labelers[name], solution, [[1]], total_time=value)
    # A label without a time is left out, not counted as zero.
    make_label(session, labelers["odd"], solution, [[1]], total_time=None)

    everything = [value for values in times.values() for value in values]
    medians = grouped_medians(session, select(Label.labeler_id, Label.total_time))
    assert medians == {
        **{labelers[name].id: statistics.median(values) for name, values in times.items()},
        None: statistics.median(everything),
    }
    times_over_2s = select(Label.labeler_id, Label.total_time).where(Label.total_time > 2_000)
    long = grouped_medians(session, times_over_2s)
    assert long == {
        labelers["odd"].id: statistics.median([5_000, 3_000]),
        labelers["even"].id: statistics.median([4_000, 10_000]),
        labelers["one"].id: 7_000,
        None: statistics.median([v for v in everything if v > 2_000]),
    }


def test_grouped_medians_of_nothing_is_empty(session: Session) -> None:
    assert grouped_medians(session, select(Label.labeler_id, Label.total_time)) == {}
