"""Labelers measured against gold labels: quality-control questions and screening.

A gold label (app/labeling/quality.py) makes a solution a question every labeler answers.
Each other label of that solution is an *answer*, compared with the gold label on:

- step ratings: every completion (step index, completion index) both labels rated; the
  share of equal ratings is the *step accuracy*;
- the first error: the first step whose own text (completion 0) was rated negative, or
  none; compared only where both labels ended as ``found_error`` or ``solution`` (a label
  given up on, or reported as a bad problem, has no first error to compare).

Answers to screening questions (generation -1) give the *screening score*; the others the
QC accuracy, overall or per generation (a QC answer belongs to the generation it was served
in). A labeler passes when their step accuracy reaches the project's screening threshold.
All of it is two GROUP BY queries, whatever the number of labels; coarser figures pool the
counts of finer groups (``combined``), so every figure adds up to the same answers.
"""

import random
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    SQLColumnExpression,
    Subquery,
    and_,
    case,
    func,
    select,
    update,
)
from sqlalchemy.orm import Session, aliased

from app.admin.aggregates import share
from app.models import (
    SCREENING_GENERATION,
    FinishReason,
    GoldLabel,
    Label,
    Problem,
    QueueState,
    Role,
    Solution,
    StepCompletion,
    User,
)

FINISHED = (FinishReason.FOUND_ERROR.value, FinishReason.SOLUTION.value)
"""Labels that went as far as the labeler could judge: their first error is comparable."""


@dataclass(frozen=True)
class GoldComparison:
    """Answers compared with their gold labels."""

    answers: int = 0
    steps_compared: int = 0
    steps_agreeing: int = 0
    first_errors_compared: int = 0
    first_errors_agreeing: int = 0
    step_accuracy: float | None = None
    first_error_accuracy: float | None = None

    @classmethod
    def of(
        cls, answers: int, steps: tuple[int, int], first_errors: tuple[int, int]
    ) -> "GoldComparison":
        """From (compared, agreeing) counts of step ratings and of first errors."""
        steps_compared, steps_agreeing = steps
        first_errors_compared, first_errors_agreeing = first_errors
        return cls(
            answers,
            steps_compared,
            steps_agreeing,
            first_errors_compared,
            first_errors_agreeing,
            step_accuracy=share(steps_agreeing, steps_compared),
            first_error_accuracy=share(first_errors_agreeing, first_errors_compared),
        )

    def passes(self, threshold: float) -> bool | None:
        """Whether the step accuracy reaches ``threshold``; None with nothing to compare."""
        return None if self.step_accuracy is None else self.step_accuracy >= threshold


def combined(comparisons: Iterable[GoldComparison]) -> GoldComparison:
    """Several comparisons pooled: counts add up, accuracies are over the pooled counts."""
    rows = list(comparisons)
    return GoldComparison.of(
        sum(row.answers for row in rows),
        (sum(row.steps_compared for row in rows), sum(row.steps_agreeing for row in rows)),
        (
            sum(row.first_errors_compared for row in rows),
            sum(row.first_errors_agreeing for row in rows),
        ),
    )


@dataclass(frozen=True)
class LabelerQuality:
    labeler_id: int
    name: str
    is_active: bool
    is_approved: bool
    quality_control: GoldComparison
    screening: GoldComparison
    passes_quality_control: bool | None
    passes_screening: bool | None


def _answers() -> Subquery:
    """Every label of a gold solution other than the gold label, beside its gold label."""
    gold = aliased(Label)
    return (
        select(
            Label.id.label("label_id"),
            Label.labeler_id,
            Label.solution_id,
            Label.is_initial_screening.label("screening"),
            Label.generation,
            GoldLabel.label_id.label("gold_id"),
            and_(Label.finish_reason.in_(FINISHED), gold.finish_reason.in_(FINISHED)).label(
                "comparable"
            ),
        )
        .join(GoldLabel, GoldLabel.solution_id == Label.solution_id)
        .join(gold, gold.id == GoldLabel.label_id)
        .where(Label.id != GoldLabel.label_id)
        .subquery("answers")
    )


def _first_error(label_id: SQLColumnExpression[int]) -> ColumnElement[int | None]:
    """The index of the label's first negative step, null for none (primary-key lookups)."""
    return (
        select(func.min(StepCompletion.step_index))
        .where(
            StepCompletion.label_id == label_id,
            StepCompletion.completion_index == 0,
            StepCompletion.rating == -1,
        )
        .scalar_subquery()
    )


def _same_first_error(
    label_id: SQLColumnExpression[int], gold_id: SQLColumnExpression[int]
) -> ColumnElement[bool]:
    # No error at all is a first error too: both labels finding none agree.
    return func.coalesce(_first_error(label_id), -1) == func.coalesce(_first_error(gold_id), -1)


def _agreeing(condition: SQLColumnExpression[bool]) -> ColumnElement[int]:
    return func.sum(case((condition, 1), else_=0))


def gold_comparisons(session: Session, by: Sequence[str]) -> dict[tuple[Any, ...], GoldComparison]:
    """Answers compared with their gold labels, grouped by columns of the answers:
    ``labeler_id``, ``solution_id``, ``screening``, ``generation``."""
    answers = _answers()
    keys = [answers.c[name] for name in by]
    comparable = answers.c.comparable.is_(True)
    first_errors = {
        tuple(key): (int(count), (int(compared or 0), int(agreeing or 0)))
        for *key, count, compared, agreeing in session.execute(
            select(
                *keys,
                func.count(),
                _agreeing(comparable),
                _agreeing(comparable & _same_first_error(answers.c.label_id, answers.c.gold_id)),
            ).group_by(*keys)
        )
    }
    mine, gold = aliased(StepCompletion), aliased(StepCompletion)
    steps = {
        tuple(key): (int(compared), int(agreeing))
        for *key, compared, agreeing in session.execute(
            select(*keys, func.count(), _agreeing(mine.rating == gold.rating))
            .join(mine, mine.label_id == answers.c.label_id)
            .join(
                gold,
                and_(
                    gold.label_id == answers.c.gold_id,
                    gold.step_index == mine.step_index,
                    gold.completion_index == mine.completion_index,
                ),
            )
            .where(mine.rating.is_not(None), gold.rating.is_not(None))
            .group_by(*keys)
        )
    }
    return {
        key: GoldComparison.of(count, steps.get(key, (0, 0)), first)
        for key, (count, first) in first_errors.items()
    }


def labeler_quality(
    session: Session, threshold: float, generation: int | None = None
) -> list[LabelerQuality]:
    """Every labeler's QC accuracy (on the answers of ``generation`` only, when given) and
    screening score (on all their screening answers), by name."""
    pooled: defaultdict[tuple[int, bool], list[GoldComparison]] = defaultdict(list)
    grouped = gold_comparisons(session, ("labeler_id", "screening", "generation"))
    for (labeler_id, screening, answered_in), comparison in grouped.items():
        if screening or generation is None or answered_in == generation:
            pooled[labeler_id, screening].append(comparison)
    labelers = session.execute(
        select(User.id, User.name, User.is_active, User.is_approved)
        .where(User.role == Role.LABELER.value)
        .order_by(User.name)
    )
    result = []
    for labeler_id, name, is_active, is_approved in labelers:
        quality_control = combined(pooled[labeler_id, False])
        screening = combined(pooled[labeler_id, True])
        result.append(
            LabelerQuality(
                labeler_id=labeler_id,
                name=name,
                is_active=is_active,
                is_approved=is_approved,
                quality_control=quality_control,
                screening=screening,
                passes_quality_control=quality_control.passes(threshold),
                passes_screening=screening.passes(threshold),
            )
        )
    return result


def quality_control_by_generation(session: Session) -> dict[int | None, GoldComparison]:
    """Every labeler's QC answers pooled per generation they were served in."""
    grouped = gold_comparisons(session, ("screening", "generation"))
    return {
        generation: comparison
        for (screening, generation), comparison in grouped.items()
        if not screening
    }


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
            _first_error(GoldLabel.label_id).label("gold_first_error"),
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
    """The labeler's latest labels of pre-generated solutions, newest first."""
    rows = session.execute(
        select(
            Label.id.label("label_id"),
            Label.solution_id,
            Problem.text.label("problem_text"),
            Label.generation,
            Label.finish_reason,
            _first_error(Label.id).label("first_error"),
            Label.timestamp,
            GoldLabel.label_id.label("gold_label_id"),
        )
        .join(Problem, Problem.id == Label.problem_id)
        .outerjoin(GoldLabel, GoldLabel.solution_id == Label.solution_id)
        .where(Label.labeler_id == labeler_id, Label.solution_id.is_not(None))
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
                ~select(GoldLabel.solution_id).where(GoldLabel.solution_id == Solution.id).exists(),
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
