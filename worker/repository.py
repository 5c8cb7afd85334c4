"""The worker's database work, apart from runs (worker/runs.py) and labels (worker/data.py):
the unlabeled pool and its scores, generations and their pace, independent samples for
best-of-N, and the checkpoints kept on disk.

Plain functions over a Session; the caller owns the transaction.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any, NamedTuple

from sqlalchemy import Select, exists, func, select, update
from sqlalchemy.orm import Session

from app.admin.prm import pool_status
from app.admin.progress import queue_by_generation
from app.core.config import Settings
from app.models import Generation, Label, Problem, QueueState, Solution, TrainingRun
from app.project_settings import runtime_settings
from app.quality.questions import add_quality_control_to_generation
from app.run_metrics import Pace
from worker.eval_sets import SampledProblem
from worker.score import SolutionScore


class PoolSolution(NamedTuple):
    """An unlabeled, unqueued solution, as rank 0 hands it to every rank to score."""

    id: int
    problem_id: int
    problem: str
    steps: list[str]
    answer_correct: bool | None


def pool(session: Session) -> list[PoolSolution]:
    """Solutions no labeler has labeled and no generation has queued, with steps."""
    rows = session.execute(
        select(
            Solution.id, Solution.problem_id, Problem.text, Solution.steps, Solution.answer_correct
        )
        .join(Problem, Problem.id == Solution.problem_id)
        .where(
            Solution.queue_state == QueueState.NOT_QUEUED.value,
            ~exists().where(Label.solution_id == Solution.id),
        )
        .order_by(Solution.id)
    ).all()
    return [
        PoolSolution(r.id, r.problem_id, r.text, r.steps, r.answer_correct) for r in rows if r.steps
    ]


def record_scores(
    session: Session, run_id: int, solutions: list[PoolSolution], scores: list[SolutionScore]
) -> None:
    if not solutions:
        return
    session.execute(
        update(Solution),
        [
            {
                "id": p.id,
                "prm_score": s.score,
                "prm_min_step": s.min_step,
                "prm_step_scores": s.step_scores,
                "scored_by_run_id": run_id,
            }
            for p, s in zip(solutions, scores, strict=True)
        ],
    )


def generation_pace(session: Session, settings: Settings) -> Pace:
    """The open generation is the highest one queued (screening, -1, aside); a new one is
    due once its labels reach ``generation_min_done`` of what its overlap asks for."""
    overlap = int(runtime_settings(session.connection(), settings)["overlap"])
    queue = queue_by_generation(session, overlap)
    queued = [
        g for g, figures in queue.items() if g is not None and g >= 0 and figures["labels_wanted"]
    ]
    if not queued:
        return Pace(
            due=True, reason="no generation is queued yet", open_generation=None, share_done=None
        )
    latest = max(queued)
    share = queue[latest]["labels_counted"] / queue[latest]["labels_wanted"]
    wanted = settings.generation_min_done
    if share < wanted:
        reason = f"generation {latest} is {share:.0%} labeled; the next is queued at {wanted:.0%}"
        return Pace(due=False, reason=reason, open_generation=latest, share_done=share)
    reason = f"generation {latest} is {share:.0%} labeled"
    return Pace(due=True, reason=reason, open_generation=latest, share_done=share)


class Queued(NamedTuple):
    """A generation opened: its number and the solutions it took."""

    number: int
    selected: list[int]
    control: list[int]


def queue_generation(
    session: Session,
    run_id: int,
    selected: list[int],
    control: list[int],
    correctness: dict[int, bool | None],
) -> Queued | None:
    """Open a new generation of the ``selected`` solutions and the ``control`` share (with
    the QC questions); None when none of them could be taken.

    A solution is taken only while it is still unqueued and unlabeled (one conditional
    UPDATE): one that another worker queued or a labeler labeled since the pool was read
    stays where it is, and the generation counts only what it took.
    """
    number = next_generation(session)
    taken = set(
        session.scalars(
            update(Solution)
            .where(
                Solution.id.in_([*selected, *control]),
                Solution.queue_state == QueueState.NOT_QUEUED.value,
                ~exists().where(Label.solution_id == Solution.id),
            )
            .values(generation=number, queue_state=QueueState.OPEN.value)
            .returning(Solution.id)
        )
    )
    if not taken:
        return None
    queued = Queued(number, [i for i in selected if i in taken], [i for i in control if i in taken])
    if queued.control:
        session.execute(
            update(Solution).where(Solution.id.in_(queued.control)).values(is_control=True)
        )
    generation = Generation(
        number=number,
        run_id=run_id,
        selected=len(queued.selected),
        wrong_answers=sum(correctness[i] is False for i in queued.selected),
        control=len(queued.control),
    )
    session.add(generation)
    session.flush()
    generation.quality_control = add_quality_control_to_generation(session, number)
    return queued


def next_generation(session: Session) -> int:
    highest = max(
        session.scalar(select(func.max(Generation.number))) or 0,
        session.scalar(select(func.max(Solution.generation))) or 0,
    )
    return int(highest) + 1


def pool_summary(session: Session, settings: Settings) -> dict[str, int]:
    """What is left to choose from: unlabeled, unqueued solutions, and the wrong answers
    among them (the convincing-wrong-answer candidates), counted as the PRM page counts them."""
    left = pool_status(session, settings)
    return {
        "pool": left.left,
        "wrong_answer_candidates": left.wrong_answer_candidates,
        "ungraded": left.ungraded,
    }


def chosen_by_prm() -> Select[int]:
    """The solutions a PRM chose: queued by a run's selection, its control share aside.
    Imported, hand-queued and control solutions are samples no PRM picked."""
    by_runs = select(Generation.number).where(Generation.run_id.is_not(None))
    return select(Solution.id).where(
        Solution.generation.in_(by_runs), Solution.is_control.is_(False)
    )


def imported_samples(session: Session) -> list[SampledProblem]:
    """Independent samples in the database: graded solutions that no PRM chose (imported,
    queued by hand, or in a generation's control share), on problems with two or more."""
    rows = session.execute(
        select(Problem.text, Solution.steps, Solution.answer, Solution.answer_correct)
        .join(Problem, Problem.id == Solution.problem_id)
        .where(Solution.answer_correct.is_not(None), Solution.id.not_in(chosen_by_prm()))
        .order_by(Solution.problem_id, Solution.id)
    ).all()
    by_problem: dict[str, list[Any]] = defaultdict(list)
    for row in rows:
        if row.steps:
            by_problem[row.text].append(row)
    return [
        SampledProblem(
            problem=text,
            samples=[r.steps for r in group],
            answers=[r.answer for r in group],
            correct=[bool(r.answer_correct) for r in group],
        )
        for text, group in by_problem.items()
        if len(group) >= 2
    ]


class CurrentCheckpoint(NamedTuple):
    run_id: int
    path: Path | None
    """None where the run's checkpoint was pruned, or never recorded."""

    @property
    def on_disk(self) -> bool:
        return self.path is not None and self.path.exists()


def current_checkpoint(session: Session) -> CurrentCheckpoint | None:
    """The current run's checkpoint; None when no run is current (the first model)."""
    row = session.execute(
        select(TrainingRun.id, TrainingRun.checkpoint_path).where(TrainingRun.is_current.is_(True))
    ).first()
    if row is None:
        return None
    return CurrentCheckpoint(row.id, Path(row.checkpoint_path) if row.checkpoint_path else None)


class StoredCheckpoint(NamedTuple):
    run_id: int
    path: str
    is_current: bool
    pinned: bool


def stored_checkpoints(session: Session) -> list[StoredCheckpoint]:
    """Runs whose checkpoint is on disk, newest first."""
    rows = session.execute(
        select(
            TrainingRun.id, TrainingRun.checkpoint_path, TrainingRun.is_current, TrainingRun.pinned
        )
        .where(TrainingRun.checkpoint_path.is_not(None))
        .order_by(TrainingRun.id.desc())
    ).all()
    return [StoredCheckpoint(r.id, r.checkpoint_path, r.is_current, r.pinned) for r in rows]


def to_prune(checkpoints: list[StoredCheckpoint], keep_last: int) -> list[StoredCheckpoint]:
    """The checkpoints that are neither current, pinned nor among the newest ``keep_last``."""
    newest = {c.run_id for c in checkpoints[:keep_last]}
    return [c for c in checkpoints if not (c.is_current or c.pinned or c.run_id in newest)]


def forget_checkpoint(session: Session, run_id: int) -> bool:
    """Mark the run's checkpoint deleted (its row keeps the figures, not the path), unless
    it was pinned or made current meanwhile; whether it was marked.

    One conditional UPDATE, so an admin who pins a checkpoint while the worker prunes
    either keeps it or is told it is gone (a pruned run cannot be pinned).
    """
    result = session.execute(
        update(TrainingRun)
        .where(
            TrainingRun.id == run_id,
            TrainingRun.pinned.is_(False),
            TrainingRun.is_current.is_(False),
        )
        .values(checkpoint_path=None, checkpoint_bytes=None)
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]
