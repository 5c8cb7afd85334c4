"""What the admin's quality-control page lists and does: the questions with their answers
compared (app/quality/scoring.py), an admin's own labels that could become gold labels, and a
random sample of open solutions given more labelers, so that their agreement can be measured.
"""

import random
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session, aliased

from app.models import SCREENING_GENERATION, GoldLabel, Label, Problem, QueueState, Solution, User
from app.quality.questions import not_a_question, rates_a_step
from app.quality.scoring import GoldComparison, first_error, gold_comparisons


@dataclass(frozen=True)
class QcQuestion:
    """A solution with a gold label, and how its answers compare with it."""

    solution_id: int
    problem_id: int
    problem_text: str
    generation: int | None
    gold_label_id: int
    gold_labeler: str
    gold_finish_reason: str | None
    gold_first_error: int | None
    """The gold label's first negative step (0-based), None for none."""
    answers: GoldComparison


def qc_questions(session: Session) -> list[QcQuestion]:
    """Every quality-control and screening question with its gold label, newest first."""
    comparisons = gold_comparisons(session, ("solution_id",))
    gold = aliased(Label)
    rows = session.execute(
        select(
            GoldLabel.solution_id,
            Solution.problem_id,
            Problem.text.label("problem_text"),
            Solution.generation,
            GoldLabel.label_id.label("gold_label_id"),
            User.name.label("gold_labeler"),
            gold.finish_reason.label("gold_finish_reason"),
            first_error(GoldLabel.label_id).label("gold_first_error"),
        )
        .join(Solution, Solution.id == GoldLabel.solution_id)
        .join(Problem, Problem.id == Solution.problem_id)
        .join(gold, gold.id == GoldLabel.label_id)
        .join(User, User.id == gold.labeler_id)
        .order_by(GoldLabel.created_at.desc(), GoldLabel.solution_id.desc())
    )
    return [
        QcQuestion(**row._asdict(), answers=comparisons.get((row.solution_id,), GoldComparison()))
        for row in rows
    ]


@dataclass(frozen=True)
class GoldCandidate:
    """One of an admin's own labels, which could become its solution's gold label."""

    label_id: int
    solution_id: int
    problem_text: str
    generation: int | None
    finish_reason: str | None
    first_error: int | None
    timestamp: datetime
    gold_label_id: int | None
    """The solution's gold label now, if it has one (this label or another)."""


def gold_candidates(session: Session, labeler_id: int, limit: int = 20) -> list[GoldCandidate]:
    """The labeler's latest labels of pre-generated solutions that could be gold (they rate
    a step: ``mark_quality_control``), newest first."""
    rows = session.execute(
        select(
            Label.id.label("label_id"),
            Label.solution_id,
            Problem.text.label("problem_text"),
            Label.generation,
            Label.finish_reason,
            first_error(Label.id).label("first_error"),
            Label.timestamp,
            GoldLabel.label_id.label("gold_label_id"),
        )
        .join(Problem, Problem.id == Label.problem_id)
        .outerjoin(GoldLabel, GoldLabel.solution_id == Label.solution_id)
        .where(
            Label.labeler_id == labeler_id,
            Label.solution_id.is_not(None),
            rates_a_step(Label.id),
        )
        .order_by(Label.timestamp.desc(), Label.id.desc())
        .limit(limit)
    )
    return [GoldCandidate(**row._asdict()) for row in rows]


MAX_SAMPLE = 10_000


def sample_for_agreement(
    session: Session,
    generation: int,
    count: int,
    overlap: int,
    *,
    default_overlap: int,
    rng: random.Random | None = None,
) -> int:
    """Give ``count`` random open solutions of ``generation`` an overlap of ``overlap``, so
    that several labelers label them and their agreement can be measured; returns how many.

    Only solutions that would get fewer labelers than ``overlap`` are drawn. Raises
    ValueError when the request makes no sense or no solution of the generation qualifies.
    """
    if generation == SCREENING_GENERATION:
        raise ValueError("screening questions go to every labeler already")
    if not 1 <= count <= MAX_SAMPLE:
        raise ValueError(f"sample between 1 and {MAX_SAMPLE:,} solutions")
    if overlap < 2:
        raise ValueError("agreement needs at least 2 labelers per solution")
    open_ids = list(
        session.scalars(
            select(Solution.id)
            .where(
                Solution.generation == generation,
                Solution.queue_state == QueueState.OPEN.value,
                func.coalesce(Solution.overlap, default_overlap) < overlap,
                not_a_question(),
            )
            .order_by(Solution.id)
        )
    )
    if not open_ids:
        raise ValueError(
            f"generation {generation} has no open solution with fewer than {overlap} labelers"
        )
    chosen = (rng or random.Random()).sample(open_ids, min(count, len(open_ids)))
    session.execute(update(Solution).where(Solution.id.in_(chosen)).values(overlap=overlap))
    return len(chosen)
