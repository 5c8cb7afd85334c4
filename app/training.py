"""PRM training runs as the web app and the CLI see them: ask for one, list them, pin
their checkpoints.

The worker (``python -m worker``) claims and runs them; the app never imports torch.
"""

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.models import RunStatus, TrainingRun


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
