"""Labelers measured against gold labels: quality-control questions and screening.

A gold label (app/quality/questions.py) makes a solution a question every labeler answers.
Each other label of that solution is an *answer*, compared with the gold label on:

- step ratings: every completion (step index, completion index) both labels rated; the
  share of equal ratings is the *step accuracy*;
- the first error: the first step whose own text (completion 0) was rated negative, or
  none; compared only where both labels ended as ``found_error`` or ``solution`` (a label
  given up on, or reported as a bad problem, has no first error to compare).

Answers to screening questions (generation -1) give the *screening score*; the others the
QC accuracy, overall or per generation (a QC answer belongs to the generation it was served
in). A labeler passes when their step accuracy reaches the project's screening threshold;
QC gives no verdict before a labeler has ``qc_min_answers`` answers that rated a step the
gold label rated (an answer reporting a bad problem at once tells nothing of their ratings).
All of it is two GROUP BY queries, whatever the number of labels; coarser figures pool the
counts of finer groups (``combined``), so every figure adds up to the same answers.
"""

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    ColumnElement,
    SQLColumnExpression,
    Subquery,
    and_,
    case,
    func,
    select,
)
from sqlalchemy.orm import Session, aliased

from app.figures import by_labelers, share
from app.models import (
    FIRST_ERROR_DECIDED,
    UNNUMBERED_GENERATION,
    GoldLabel,
    Label,
    Role,
    StepCompletion,
    User,
)


@dataclass(frozen=True)
class GoldComparison:
    """Answers compared with their gold labels."""

    answers: int = 0
    steps_compared: int = 0
    rated_answers: int = 0
    """Answers with a step compared: the ones a QC verdict counts (``passes``)."""
    steps_agreeing: int = 0
    first_errors_compared: int = 0
    first_errors_agreeing: int = 0
    step_accuracy: float | None = None
    first_error_accuracy: float | None = None

    @classmethod
    def of(
        cls,
        answers: int,
        steps: tuple[int, int, int],
        first_errors: tuple[int, int],
    ) -> "GoldComparison":
        """From (compared, agreeing, answers with any compared) counts of step ratings and
        (compared, agreeing) counts of first errors."""
        steps_compared, steps_agreeing, rated_answers = steps
        first_errors_compared, first_errors_agreeing = first_errors
        return cls(
            answers=answers,
            steps_compared=steps_compared,
            rated_answers=rated_answers,
            steps_agreeing=steps_agreeing,
            first_errors_compared=first_errors_compared,
            first_errors_agreeing=first_errors_agreeing,
            step_accuracy=share(steps_agreeing, steps_compared),
            first_error_accuracy=share(first_errors_agreeing, first_errors_compared),
        )

    def passes(self, threshold: float, min_answers: int = 1) -> bool | None:
        """Whether the step accuracy reaches ``threshold``; None with nothing to compare or
        fewer than ``min_answers`` answers that rated a compared step."""
        if self.step_accuracy is None or self.rated_answers < min_answers:
            return None
        return self.step_accuracy >= threshold


def combined(comparisons: Iterable[GoldComparison]) -> GoldComparison:
    """Several comparisons pooled: counts add up, accuracies are over the pooled counts."""
    rows = list(comparisons)
    return GoldComparison.of(
        sum(row.answers for row in rows),
        (
            sum(row.steps_compared for row in rows),
            sum(row.steps_agreeing for row in rows),
            sum(row.rated_answers for row in rows),
        ),
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
    """Every label of a gold solution by a labeler, other than the gold label, beside its
    gold label; an admin's labels are no answers."""
    gold = aliased(Label)
    return (
        select(
            Label.id.label("label_id"),
            Label.labeler_id,
            Label.solution_id,
            Label.is_initial_screening.label("screening"),
            Label.generation,
            GoldLabel.label_id.label("gold_id"),
            and_(
                Label.finish_reason.in_(FIRST_ERROR_DECIDED),
                gold.finish_reason.in_(FIRST_ERROR_DECIDED),
            ).label("comparable"),
        )
        .join(GoldLabel, GoldLabel.solution_id == Label.solution_id)
        .join(gold, gold.id == GoldLabel.label_id)
        .where(Label.id != GoldLabel.label_id, by_labelers())
        .subquery("answers")
    )


def first_error(label_id: SQLColumnExpression[int]) -> ColumnElement[int | None]:
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
    return func.coalesce(first_error(label_id), -1) == func.coalesce(first_error(gold_id), -1)


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
        tuple(key): (int(compared), int(agreeing), int(rated_answers))
        for *key, compared, agreeing, rated_answers in session.execute(
            select(
                *keys,
                func.count(),
                _agreeing(mine.rating == gold.rating),
                func.count(func.distinct(mine.label_id)),
            )
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
        key: GoldComparison.of(count, steps.get(key, (0, 0, 0)), first)
        for key, (count, first) in first_errors.items()
    }


def labeler_quality(
    session: Session, threshold: float, generation: int | None = None, *, min_answers: int = 1
) -> list[LabelerQuality]:
    """Every labeler's QC accuracy (on the answers of ``generation`` only, when given:
    UNNUMBERED_GENERATION for those without one) and screening score (on all their
    screening answers), by name; a QC verdict needs ``min_answers`` answers (screening is
    one fixed set, judged whole)."""
    pooled: defaultdict[tuple[int, bool], list[GoldComparison]] = defaultdict(list)
    grouped = gold_comparisons(session, ("labeler_id", "screening", "generation"))
    for (labeler_id, screening, answered_in), comparison in grouped.items():
        number = UNNUMBERED_GENERATION if answered_in is None else answered_in
        if screening or generation is None or number == generation:
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
                passes_quality_control=quality_control.passes(threshold, min_answers),
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
