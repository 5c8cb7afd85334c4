"""How fast labeling goes: labels per hour over time, per labeler and overall, and the
median time per task and per step, over labelers' labels (an admin's are not labeling
work). Counts are bucketed in SQL; the medians are taken with numpy over one row per timed
label (one sort in numpy beats two window sorts in SQL)."""

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import numpy as np
from sqlalchemy import SQLColumnExpression, func, or_, select
from sqlalchemy.orm import Session

from app.admin.aggregates import bucket_index, bucket_start, grouped_medians
from app.figures import by_labelers
from app.models import Label, LabelStep, Role, User, utc_now

MS_PER_HOUR = 3_600_000


@dataclass(frozen=True)
class Window:
    """A span of time up to now, cut into buckets of equal width."""

    key: str
    title: str
    span: timedelta
    bucket: timedelta
    label_format: str
    """strftime format of a bucket's start on the chart."""

    @property
    def buckets(self) -> int:
        return self.span // self.bucket

    @property
    def bucket_hours(self) -> float:
        return self.bucket / timedelta(hours=1)


WINDOWS = {
    window.key: window
    for window in (
        Window("24h", "Last 24 hours", timedelta(hours=24), timedelta(hours=1), "%H:%M"),
        Window("7d", "Last 7 days", timedelta(days=7), timedelta(hours=6), "%a %H:%M"),
        Window("30d", "Last 30 days", timedelta(days=30), timedelta(days=1), "%b %d"),
    )
}
DEFAULT_WINDOW = "7d"


@dataclass(frozen=True)
class LabelerThroughput:
    """One labeler's pace in the window (``labeler_id`` None: everyone together)."""

    labeler_id: int | None
    name: str
    labels: int
    per_hour: list[float]
    """Labels per hour in each bucket of the window, oldest first."""
    labels_per_working_hour: float | None
    """Labels divided by the hours the labeler spent on them (their tasks' total time)."""
    median_seconds_per_task: float | None
    median_seconds_per_step: float | None
    """Median over labels of the label's time divided by the steps it rated."""
    last_label_at: datetime | None


@dataclass(frozen=True)
class Throughput:
    window: Window
    bucket_starts: list[datetime]
    overall: LabelerThroughput
    labelers: list[LabelerThroughput]
    """Active labelers and labelers who labeled in the window, busiest first."""


def window_start(window: Window, now: datetime) -> datetime:
    """The first bucket's start: the window ends with the bucket that holds ``now``."""
    return bucket_start(now, window.bucket) + window.bucket - window.span


def throughput(session: Session, window: Window, now: datetime | None = None) -> Throughput:
    """Labels per hour per bucket, and medians, per labeler and overall, in ``window``."""
    now = now or utc_now()
    start = window_start(window, now)
    in_window = (Label.timestamp >= start) & by_labelers()
    names = _labelers(session, in_window)
    series = _per_hour(session, window, start, in_window)
    figures = _figures(session, in_window)
    task_medians, step_medians = _medians(session, in_window)

    def row(labeler_id: int | None, name: str) -> LabelerThroughput:
        labels, timed, spent_ms, last = figures.get(labeler_id, (0, 0, 0, None))
        task_ms, step_ms = task_medians.get(labeler_id), step_medians.get(labeler_id)
        return LabelerThroughput(
            labeler_id=labeler_id,
            name=name,
            labels=labels,
            per_hour=series.get(labeler_id, [0.0] * window.buckets),
            labels_per_working_hour=timed / (spent_ms / MS_PER_HOUR) if spent_ms else None,
            median_seconds_per_task=None if task_ms is None else task_ms / 1000,
            median_seconds_per_step=None if step_ms is None else step_ms / 1000,
            last_label_at=last,
        )

    labelers = [row(labeler_id, name) for labeler_id, name in names.items()]
    labelers.sort(key=lambda r: (-r.labels, r.name))
    return Throughput(
        window=window,
        bucket_starts=[start + i * window.bucket for i in range(window.buckets)],
        overall=row(None, "All labelers"),
        labelers=labelers,
    )


def _labelers(session: Session, in_window: SQLColumnExpression[bool]) -> dict[int, str]:
    labeled = select(Label.labeler_id).where(in_window).distinct()
    active_labeler = (User.role == Role.LABELER.value) & User.is_active.is_(True)
    rows = session.execute(
        select(User.id, User.name).where(or_(active_labeler, User.id.in_(labeled)))
    )
    return {labeler_id: name for labeler_id, name in rows}


def _per_hour(
    session: Session, window: Window, start: datetime, in_window: SQLColumnExpression[bool]
) -> dict[int | None, list[float]]:
    bucket = bucket_index(Label.timestamp, start, window.bucket).label("bucket")
    rows = session.execute(
        select(Label.labeler_id, bucket, func.count())
        .where(in_window)
        .group_by(Label.labeler_id, bucket)
    )
    series: dict[int | None, list[float]] = {None: [0.0] * window.buckets}
    for labeler_id, index, count in rows:
        # A label stamped after now (a clock ahead) would fall past the last bucket.
        if 0 <= index < window.buckets:
            rate = count / window.bucket_hours
            series.setdefault(labeler_id, [0.0] * window.buckets)[index] = rate
            series[None][index] += rate
    return series


def _figures(
    session: Session, in_window: SQLColumnExpression[bool]
) -> dict[int | None, tuple[int, int, int, datetime | None]]:
    """Per labeler and overall (None): labels, labels with a time, their time, the last."""
    columns = (
        func.count(),
        func.count(Label.total_time),
        func.coalesce(func.sum(Label.total_time), 0),
        func.max(Label.timestamp),
    )
    per_labeler = session.execute(
        select(Label.labeler_id, *columns).where(in_window).group_by(Label.labeler_id)
    )
    figures: dict[int | None, tuple[int, int, int, datetime | None]] = {
        labeler_id: (labels, timed, int(spent or 0), last)
        for labeler_id, labels, timed, spent, last in per_labeler
    }
    labels, timed, spent, last = session.execute(select(*columns).where(in_window)).one()
    figures[None] = (labels, timed, int(spent or 0), last)
    return figures


def _medians(
    session: Session, in_window: SQLColumnExpression[bool]
) -> tuple[dict[Any, float], dict[Any, float]]:
    """Median milliseconds per task, and per step rated, per labeler and overall (None)."""
    # One join grouped by label, not a count per label in a subquery: Postgres prices
    # 100,000 correlated counts so high that it compiles the query (JIT) for half a second.
    rows = session.connection().execute(
        select(Label.labeler_id, Label.total_time, func.count(LabelStep.step_index))
        .outerjoin(LabelStep, LabelStep.label_id == Label.id)
        .where(in_window, Label.total_time.is_not(None))
        .group_by(Label.id)
    )
    # fromiter over the flattened rows: numpy reads Row objects one by one otherwise, 100x slower.
    flat = np.fromiter((value for row in rows for value in row), dtype=np.int64)
    labeler, spent, steps = flat.reshape(-1, 3).T
    rated = steps > 0
    return (
        grouped_medians(labeler, spent.astype(np.float64)),
        grouped_medians(labeler[rated], spent[rated] / steps[rated]),
    )
