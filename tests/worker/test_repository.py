"""The worker's database work that the end-to-end tests do not pin down: checkpoint retention."""

from pathlib import Path

from sqlalchemy.orm import Session

from app.models import RunStatus, TrainingRun
from worker.repository import StoredCheckpoint, forget_checkpoint, stored_checkpoints, to_prune


def add_run(session: Session, *, current: bool = False, pinned: bool = False) -> TrainingRun:
    run = TrainingRun(status=RunStatus.SUCCEEDED.value, is_current=current, pinned=pinned)
    session.add(run)
    session.flush()
    run.checkpoint_path = f"checkpoints/run-{run.id}"
    run.checkpoint_bytes = 1000
    session.flush()
    return run


def test_retention_keeps_the_current_the_pinned_and_the_newest() -> None:
    stored = [
        StoredCheckpoint(run_id, f"run-{run_id}", run_id == 2, run_id == 4)
        for run_id in range(9, 0, -1)  # newest first, as stored_checkpoints gives them
    ]

    assert [c.run_id for c in to_prune(stored, keep_last=3)] == [6, 5, 3, 1]
    assert [c.run_id for c in to_prune(stored, keep_last=9)] == []


def test_a_pinned_or_current_checkpoint_is_never_forgotten(session: Session) -> None:
    plain, pinned, current = add_run(session), add_run(session, pinned=True), add_run(session)
    current.is_current = True
    session.flush()

    assert [c.run_id for c in stored_checkpoints(session)] == [current.id, pinned.id, plain.id]
    # As if an admin pinned or the gate promoted them after the worker read the list.
    assert not forget_checkpoint(session, pinned.id)
    assert not forget_checkpoint(session, current.id)
    assert forget_checkpoint(session, plain.id)

    session.expire_all()
    assert plain.checkpoint_path is None and plain.checkpoint_bytes is None
    assert pinned.checkpoint_path == f"checkpoints/run-{pinned.id}"
    assert Path(current.checkpoint_path or "").name == f"run-{current.id}"
    assert [c.run_id for c in stored_checkpoints(session)] == [current.id, pinned.id]
