"""The worker's database work that the end-to-end tests do not pin down: checkpoint retention,
queueing a generation, heartbeats."""

from pathlib import Path

from sqlalchemy.orm import Session

from app.models import Generation, QueueState, RunStatus, TrainingRun
from tests.factories import make_label, make_solution, make_user
from worker import runs
from worker.repository import (
    Queued,
    StoredCheckpoint,
    forget_checkpoint,
    queue_generation,
    stored_checkpoints,
    to_prune,
)


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


def test_a_generation_takes_only_what_is_still_unqueued_and_unlabeled(session: Session) -> None:
    """Queueing is one conditional update: a solution another worker queued or a labeler
    labeled since the pool was read stays where it is."""
    free, control, queued, labeled = (
        make_solution(session, generation=None, queue_state=QueueState.NOT_QUEUED) for _ in range(4)
    )
    queued.generation, queued.queue_state = 1, QueueState.OPEN.value
    session.add(Generation(number=1, selected=1))
    make_label(session, make_user(session, "ann"), labeled, [[1], [1]])
    run = add_run(session)
    wrong = {free.id: False, control.id: None, queued.id: False, labeled.id: False}

    taken = queue_generation(session, run.id, [free.id, queued.id, labeled.id], [control.id], wrong)

    assert taken == Queued(2, [free.id], [control.id])
    session.expire_all()
    assert (queued.generation, labeled.generation) == (1, None)
    assert labeled.queue_state == QueueState.NOT_QUEUED.value
    assert (free.generation, control.generation, control.is_control) == (2, 2, True)
    generation = session.get_one(Generation, 2)
    assert (generation.selected, generation.control, generation.wrong_answers) == (1, 1, 1)
    # Nothing left to take: no generation at all.
    assert queue_generation(session, run.id, [free.id], [], wrong) is None
    assert session.get(Generation, 3) is None


def test_a_beat_says_whether_the_run_is_still_running(session: Session) -> None:
    run = add_run(session)
    run.status = RunStatus.RUNNING.value
    session.flush()
    assert runs.beat(session, run.id)
    runs.fail_if_running(session, run.id, "the worker stopped")
    assert not runs.beat(session, run.id)
