"""PRM training runs as the web app and the CLI see them: ask for one, list them, pin
their checkpoints.

The worker (``python -m worker``) claims and runs them; the app never imports torch.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.models import RunStatus, TrainingRun, utc_now
from app.project_settings import get_value, set_value


def request_run(session: Session, requested_by_id: int | None = None) -> TrainingRun:
    """Ask the worker for a run now; an already waiting request is returned instead."""
    waiting = session.scalar(
        select(TrainingRun)
        .where(TrainingRun.status == RunStatus.REQUESTED.value)
        .order_by(TrainingRun.id)
        .limit(1)
    )
    if waiting is not None:
        return waiting
    run = TrainingRun(status=RunStatus.REQUESTED.value, requested_by_id=requested_by_id)
    session.add(run)
    session.flush()
    return run


def recent_runs(session: Session, limit: int = 50) -> list[TrainingRun]:
    return list(session.scalars(select(TrainingRun).order_by(TrainingRun.id.desc()).limit(limit)))


def current_run(session: Session) -> TrainingRun | None:
    """The run whose checkpoint scores and selects now."""
    return session.scalar(
        select(TrainingRun).where(TrainingRun.is_current.is_(True)).order_by(TrainingRun.id.desc())
    )


def set_pinned(run: TrainingRun, pinned: bool) -> None:
    """Pin a run's checkpoint, which the worker then keeps whatever the retention setting
    says, or unpin it. ValueError when there is no checkpoint on disk to pin."""
    if pinned and run.checkpoint_path is None:
        raise ValueError(f"run {run.id} has no checkpoint on disk to pin")
    run.pinned = pinned


WARM_UP_KEY = "worker_warm_up"
"""Where the worker notes its warm-up's progress (a project setting, not an admin's)."""
WARM_UP_SILENT_AFTER = timedelta(minutes=10)
"""A note older than this is from a worker that stopped mid-way: not shown."""


@dataclass(frozen=True)
class WarmUp:
    """The worker computing step features ahead of runs, at start: no run, asked for or
    due, starts until it is done."""

    done: int
    total: int
    at: datetime


def note_warm_up(session: Session, done: int, total: int) -> None:
    """The worker's warm-up has computed ``done`` of ``total`` solutions' features."""
    set_value(session, WARM_UP_KEY, {"done": done, "total": total, "at": utc_now().isoformat()})


def warm_up(session: Session, now: datetime | None = None) -> WarmUp | None:
    """The worker's warm-up under way, from its latest note; None when it is done, never
    began, or its worker went silent."""
    noted = get_value(session, WARM_UP_KEY)
    if not noted:
        return None
    progress = WarmUp(noted["done"], noted["total"], datetime.fromisoformat(noted["at"]))
    silent = (now or utc_now()) - progress.at > WARM_UP_SILENT_AFTER
    return None if progress.done >= progress.total or silent else progress
