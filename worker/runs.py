"""Training runs as database rows: scheduling, claiming, progress, and how they end.

Claims are serialized (a transaction-level advisory lock on Postgres, the write lock on
SQLite) and the requested row is taken with ``FOR UPDATE SKIP LOCKED``, so two workers
never train at once. A worker that dies leaves a stale heartbeat; its run is marked failed
and the schedule asks for a new one.
"""

import os
import socket
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, func, select, text, update
from sqlalchemy.orm import Session

from app.core.config import Settings
from app.core.statements import rows_changed
from app.models import Label, RunStatus, TrainingRun, utc_now

STALE_AFTER = timedelta(minutes=10)
"""A running run whose worker has not beaten for this long is taken for dead. A worker
beats five times in that time (worker/cycle.py), in every step, training and scoring too."""

_CLAIM_LOCK = 727_001  # any constant shared by every steplabel worker


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _is_postgres(session: Session) -> bool:
    return session.get_bind().dialect.name == "postgresql"


def _fail_running(
    session: Session, condition: ColumnElement[bool], error: str, now: datetime
) -> int:
    result = session.execute(
        update(TrainingRun)
        .where(TrainingRun.status == RunStatus.RUNNING.value, condition)
        .values(status=RunStatus.FAILED.value, finished_at=now, error=error)
    )
    return rows_changed(result)


def fail_stale_runs(session: Session, now: datetime) -> int:
    """Mark runs whose worker stopped beating as failed; returns how many."""
    return _fail_running(
        session, TrainingRun.heartbeat_at < now - STALE_AFTER, "the worker stopped", now
    )


def fail_if_running(session: Session, run_id: int, error: str) -> None:
    """Mark the run failed unless it has ended already (the worker's main thread may
    record its end while a watcher beside it records a failure)."""
    _fail_running(session, TrainingRun.id == run_id, error, utc_now())


FAILURE_BACKOFF_MAX = timedelta(hours=1)


def is_due(session: Session, settings: Settings, now: datetime) -> bool:
    """Whether the schedule asks for a run: the timer ran out or enough new labels came,
    and the runs that failed since the last success are backed off from (``failure_backoff``)."""
    last = session.scalar(
        select(func.max(TrainingRun.started_at)).where(
            TrainingRun.status == RunStatus.SUCCEEDED.value
        )
    )
    new_labels = session.scalar(
        select(func.count()).select_from(Label).where(Label.created_at > (last or datetime.min))
    )
    if not new_labels:
        return False  # nothing new to learn from, whatever the timer says
    failures, failed_at = session.execute(
        select(func.count(), func.max(TrainingRun.finished_at)).where(
            TrainingRun.status == RunStatus.FAILED.value,
            TrainingRun.started_at > (last or datetime.min),
        )
    ).one()
    if failures and failed_at is not None and now - failed_at < failure_backoff(failures):
        return False
    timer = settings.train_every_minutes
    if timer and (last is None or now - last >= timedelta(minutes=timer)):
        return True
    threshold = settings.train_min_new_labels
    return bool(threshold) and new_labels >= threshold


def failure_backoff(failures: int) -> timedelta:
    """How long the schedule waits after the ``failures``-th failed run in a row: a failure
    that comes back every time (a bad model folder, a full disk) would otherwise fail a run,
    loading its model, at every poll. 1, 2, 4, ... minutes, at most an hour; a requested
    run ("Train now") is not held back."""
    return min(timedelta(minutes=2 ** min(failures - 1, 10)), FAILURE_BACKOFF_MAX)


def claim_run(
    session: Session, settings: Settings, *, force: bool = False, now: datetime | None = None
) -> TrainingRun | None:
    """The run this worker should do now (marked running), or None.

    None while another worker's run is in progress. ``force`` starts a run even when
    neither a request nor the schedule asks for one (``python -m worker once``).
    """
    now = now or utc_now()
    if _is_postgres(session):
        session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _CLAIM_LOCK})
    fail_stale_runs(session, now)
    running = session.scalar(
        select(TrainingRun.id).where(TrainingRun.status == RunStatus.RUNNING.value).limit(1)
    )
    if running is not None:
        return None
    run = session.scalar(
        select(TrainingRun)
        .where(TrainingRun.status == RunStatus.REQUESTED.value)
        .order_by(TrainingRun.id)
        .limit(1)
        .with_for_update(skip_locked=True)
    )
    if run is None and (force or is_due(session, settings, now)):
        # Requested at the time it starts: the column's default, later, would read as a
        # run started before it was asked for.
        run = TrainingRun(status=RunStatus.REQUESTED.value, requested_at=now)
        session.add(run)
    if run is None:
        return None
    run.status = RunStatus.RUNNING.value
    run.started_at = run.heartbeat_at = now
    run.worker = worker_name()
    session.flush()
    return run


def whose_run_blocks(session: Session, now: datetime | None = None) -> str:
    """Why a claim got nothing while a run is in progress: which run, on which worker, and
    when it would be taken for dead (a killed worker's run blocks until then)."""
    run = session.scalar(
        select(TrainingRun).where(TrainingRun.status == RunStatus.RUNNING.value).limit(1)
    )
    if run is None:  # it ended between the claim and this look
        return "another worker was training"
    silent = (now or utc_now()) - (run.heartbeat_at or run.started_at or utc_now())
    return (
        f"run {run.id} is training on {run.worker} (last heartbeat {_seconds(silent)} ago; "
        f"a run is taken for dead after {_seconds(STALE_AFTER)} without one)"
    )


def _seconds(span: timedelta) -> str:
    seconds = max(0, round(span.total_seconds()))
    return f"{seconds} s" if seconds < 120 else f"{seconds // 60} min"


def mark_step(session: Session, run: TrainingRun, step: str, seconds: dict[str, float]) -> None:
    """Record the step the run reached and the time the earlier ones took."""
    run.step = step
    run.timings = dict(seconds)
    run.heartbeat_at = utc_now()
    session.flush()


def beat(session: Session, run_id: int, now: datetime | None = None) -> bool:
    """Record that the run's worker is alive; False once the run is no longer running
    (another worker took it for dead, or it ended)."""
    result = session.execute(
        update(TrainingRun)
        .where(TrainingRun.id == run_id, TrainingRun.status == RunStatus.RUNNING.value)
        .values(heartbeat_at=now or utc_now())
    )
    return rows_changed(result) > 0


def finish_run(
    session: Session,
    run: TrainingRun,
    *,
    error: str | None = None,
) -> None:
    run.status = RunStatus.FAILED.value if error else RunStatus.SUCCEEDED.value
    run.error = error
    run.finished_at = run.heartbeat_at = utc_now()
    session.flush()


def make_current(session: Session, run: TrainingRun) -> None:
    """This run's checkpoint now scores and selects; the previous one steps down."""
    session.execute(
        update(TrainingRun).where(TrainingRun.is_current.is_(True)).values(is_current=False)
    )
    run.is_current = True
    session.flush()
