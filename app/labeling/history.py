"""A labeler's own work, for /me: their labels, time, agreement and quality-control answers.

Every query here is bound to one labeler's id: a labeler sees their own labels, and of
other labelers only how often their ratings agreed, never whose or which. A gold label is
shown only beside the labeler's own answer to its question, once they have sent it, and
only where they cannot be asked it again: a quality-control question comes back in every
generation (app/labeling/queue.py), and its key would answer it there, so the labeler sees
their own ratings and how many matched the key, not the key. A screening question is asked
once, so its key is feedback, not an answer.

Agreement with others is counted as the admins' Agreement page counts it (app/figures.py
``counted_labels``): the labeler's latest label of each task solution against the other
labelers' latest, step by step, on the chosen completion. Answers to quality-control and
screening questions are compared with the answer key instead, and reported apart.
"""

import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Select, and_, case, func, or_, select
from sqlalchemy.orm import Session, aliased, selectinload

from app.core.statements import AnyRow
from app.figures import counted_label_rows
from app.models import (
    FIRST_ERROR_DECIDED,
    GoldLabel,
    Label,
    LabelStep,
    Problem,
    Solution,
    StepCompletion,
)
from app.quality.questions import asked_again

PAGE_SIZE = 25


@dataclass(frozen=True)
class Agreement:
    """Ratings compared with others' ratings of the same completions, and how many agree."""

    compared: int = 0
    agreeing: int = 0

    @property
    def share(self) -> float | None:
        return self.agreeing / self.compared if self.compared else None


@dataclass(frozen=True)
class MyWork:
    today: int
    total: int
    median_seconds: float | None
    """Median time per task, over tasks with a recorded time."""
    total_seconds: float
    agreement: Agreement
    """With other labelers, as the Agreement page counts it (see the module's docstring)."""


@dataclass(frozen=True)
class HistoryRow:
    label_id: int
    timestamp: datetime
    problem: str
    kind: str
    """task, quality control or screening."""
    finish_reason: str | None
    steps: int
    seconds: float | None
    agreement: Agreement | None
    """This label's share of ``MyWork.agreement``; None where it has none: no other labeler
    rated the same steps, or the label is not counted (a QC or screening answer, or one the
    labeler's later label of the same solution replaced)."""


@dataclass(frozen=True)
class History:
    rows: list[HistoryRow]
    page: int
    page_count: int


@dataclass(frozen=True)
class GoldAnswer:
    """One of the labeler's answers to a quality-control or screening question."""

    label_id: int
    gold_label_id: int
    timestamp: datetime
    problem: str
    screening: bool
    generation: int | None
    agreement: Agreement
    """The answer's ratings against the gold label's."""
    first_error: int | None
    """The step (from 0) the labeler rated negative first; None for none."""
    gold_first_error: int | None
    first_error_comparable: bool
    """Both labels went as far as their labeler could judge (found_error or solution)."""
    key_shown: bool
    """The question cannot be served to the labeler again (``asked_again``), so the key's
    ratings, finish and first error may be shown to them."""

    @property
    def same_first_error(self) -> bool:
        return self.first_error == self.gold_first_error


@dataclass(frozen=True)
class ReviewedCompletion:
    completion_index: int
    text: str
    mine: int | None
    gold: int | None


@dataclass(frozen=True)
class ReviewedStep:
    step_index: int
    completions: list[ReviewedCompletion]
    my_human_step: str | None
    gold_human_step: str | None


@dataclass(frozen=True)
class AnswerReview:
    """An answer beside the gold label: shown only to its labeler, after they sent it; the
    gold label's side is left empty unless ``answer.key_shown``."""

    answer: GoldAnswer
    reference_answer: str | None
    finish_reason: str | None
    gold_finish_reason: str | None
    steps: list[ReviewedStep]


def my_work(session: Session, labeler_id: int, now: datetime) -> MyWork:
    """The labeler's totals: tasks today and in all, time spent, agreement with others."""
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    rows = session.execute(
        select(Label.timestamp, Label.total_time).where(Label.labeler_id == labeler_id)
    ).all()
    times = [row.total_time for row in rows if row.total_time is not None]
    pooled = session.execute(_agreement_query(labeler_id, per_label=False)).one()
    return MyWork(
        today=sum(row.timestamp >= midnight for row in rows),
        total=len(rows),
        median_seconds=statistics.median(times) / 1000 if times else None,
        total_seconds=sum(times) / 1000,
        agreement=Agreement(int(pooled[0]), int(pooled[1] or 0)),
    )


def my_history(session: Session, labeler_id: int, page: int) -> History:
    """One page of the labeler's labels, newest first."""
    total = session.scalar(select(func.count()).where(Label.labeler_id == labeler_id)) or 0
    page_count = max(1, -(-total // PAGE_SIZE))
    page = min(page, page_count)
    labels = session.execute(
        select(
            Label.id,
            Label.timestamp,
            Label.finish_reason,
            Label.total_time,
            Label.is_quality_control,
            Label.is_initial_screening,
            Problem.text,
            select(func.count())
            .where(LabelStep.label_id == Label.id)
            .scalar_subquery()
            .label("steps"),
        )
        .join(Problem, Problem.id == Label.problem_id)
        .where(Label.labeler_id == labeler_id)
        .order_by(Label.id.desc())
        .offset((page - 1) * PAGE_SIZE)
        .limit(PAGE_SIZE)
    ).all()
    ids = [label.id for label in labels]
    agreements = {
        label_id: Agreement(int(compared), int(agreeing))
        for label_id, compared, agreeing in session.execute(
            _agreement_query(labeler_id, per_label=True).where(_MINE.label_id.in_(ids))
        )
    }
    rows = [
        HistoryRow(
            label_id=label.id,
            timestamp=label.timestamp,
            problem=label.text,
            kind=_kind(label.is_quality_control, label.is_initial_screening),
            finish_reason=label.finish_reason,
            steps=label.steps,
            seconds=None if label.total_time is None else label.total_time / 1000,
            agreement=agreements.get(label.id),
        )
        for label in labels
    ]
    return History(rows, page, page_count)


def _kind(quality_control: bool, screening: bool) -> str:
    return "screening" if screening else "quality control" if quality_control else "task"


_MINE, _OTHERS = aliased(StepCompletion), aliased(StepCompletion)


def _agreeing(condition: ColumnElement[bool]) -> ColumnElement[int]:
    return func.sum(case((condition, 1), else_=0))


def _agreement_query(labeler_id: int, *, per_label: bool) -> Select[Any]:
    """(compared, agreeing) of the labeler's ratings against the other labelers' ratings of
    the same steps, on the labels the Agreement page counts (``counted_labels``), so that
    the pooled figure is the one an admin sees for them; per label (label_id first) or
    pooled."""
    # One statement named once and read twice: the database works the labels out once.
    counted = counted_label_rows(None, labeler_id=labeler_id).cte("counted")
    mine, others = counted.alias("mine"), counted.alias("others")
    columns = (func.count(), _agreeing(_MINE.rating == _OTHERS.rating))
    query = (
        select(*((mine.c.id, *columns) if per_label else columns))
        .select_from(mine)
        .join(_MINE, _MINE.label_id == mine.c.id)
        .join(
            others,
            and_(others.c.solution_id == mine.c.solution_id, others.c.labeler_id != labeler_id),
        )
        .join(
            _OTHERS,
            and_(_OTHERS.label_id == others.c.id, _OTHERS.step_index == _MINE.step_index),
        )
        .where(
            mine.c.labeler_id == labeler_id,
            # The chosen completion: alternatives are not compared (as on the Agreement page).
            _MINE.completion_index == 0,
            _OTHERS.completion_index == 0,
            _MINE.rating.is_not(None),
            _OTHERS.rating.is_not(None),
        )
    )
    return query.group_by(mine.c.id) if per_label else query


def gold_answers(
    session: Session, labeler_id: int, label_id: int | None = None
) -> list[GoldAnswer]:
    """The labeler's answers to quality-control and screening questions, newest first
    (only ``label_id``, where given), each against its question's gold label: labels sent
    as answers, not those of a solution that became a question later."""
    gold = aliased(Label)
    query = (
        select(
            Label.id,
            Label.timestamp,
            Label.is_initial_screening,
            Label.generation,
            Label.finish_reason,
            gold.id.label("gold_id"),
            gold.finish_reason.label("gold_finish_reason"),
            Problem.text,
            asked_again().label("asked_again"),
        )
        .join(Solution, Solution.id == Label.solution_id)
        .join(GoldLabel, GoldLabel.solution_id == Label.solution_id)
        .join(gold, gold.id == GoldLabel.label_id)
        .join(Problem, Problem.id == Label.problem_id)
        .where(
            Label.labeler_id == labeler_id,
            Label.id != GoldLabel.label_id,
            # A label made as a task before its solution became a question answers none:
            # comparing it would show the key of a question still served, to this labeler
            # too (a generation's round of questions skips only its own answers).
            or_(Label.is_quality_control, Label.is_initial_screening),
        )
        .order_by(Label.id.desc())
    )
    if label_id is not None:
        query = query.where(Label.id == label_id)
    rows = session.execute(query).all()
    ratings = _ratings(session, [id_ for row in rows for id_ in (row.id, row.gold_id)])
    return [_gold_answer(row, ratings[row.id], ratings[row.gold_id]) for row in rows]


Ratings = dict[tuple[int, int], int | None]
"""A label's ratings by (step index, completion index)."""


def _ratings(session: Session, label_ids: Sequence[int]) -> dict[int, Ratings]:
    by_label: dict[int, Ratings] = defaultdict(dict)
    for label_id, step, completion, rating in session.execute(
        select(
            StepCompletion.label_id,
            StepCompletion.step_index,
            StepCompletion.completion_index,
            StepCompletion.rating,
        ).where(StepCompletion.label_id.in_(set(label_ids)))
    ):
        by_label[label_id][step, completion] = rating
    return by_label


def _gold_answer(row: AnyRow, mine: Ratings, gold: Ratings) -> GoldAnswer:
    both = [key for key in mine.keys() & gold.keys() if None not in (mine[key], gold[key])]
    return GoldAnswer(
        label_id=row.id,
        gold_label_id=row.gold_id,
        timestamp=row.timestamp,
        problem=row.text,
        screening=row.is_initial_screening,
        generation=row.generation,
        agreement=Agreement(len(both), sum(mine[key] == gold[key] for key in both)),
        first_error=_first_error(mine),
        gold_first_error=_first_error(gold),
        first_error_comparable=row.finish_reason in FIRST_ERROR_DECIDED
        and row.gold_finish_reason in FIRST_ERROR_DECIDED,
        key_shown=not row.asked_again,
    )


def _first_error(ratings: Ratings) -> int | None:
    """The first step whose own text (completion 0) was rated negative."""
    return min((step for (step, c), r in ratings.items() if c == 0 and r == -1), default=None)


def pooled(answers: Iterable[GoldAnswer]) -> Agreement:
    """Several answers' step comparisons added up."""
    rows = list(answers)
    return Agreement(
        sum(row.agreement.compared for row in rows), sum(row.agreement.agreeing for row in rows)
    )


def answer_review(session: Session, labeler_id: int, label_id: int) -> AnswerReview | None:
    """The labeler's answer ``label_id`` beside its gold label; None unless it is theirs
    and answers a quality-control or screening question."""
    found = gold_answers(session, labeler_id, label_id)
    if not found:
        return None
    answer = found[0]
    # A key that stays hidden is not read at all: even the steps it reached would say where
    # it found the error.
    wanted = (label_id, answer.gold_label_id) if answer.key_shown else (label_id,)
    labels = {
        label.id: label
        for label in session.scalars(
            select(Label)
            .where(Label.id.in_(wanted))
            .options(selectinload(Label.steps).selectinload(LabelStep.completions))
        )
    }
    mine, gold = labels[label_id], labels.get(answer.gold_label_id)
    reference = session.scalar(
        select(Problem.ground_truth_answer).where(Problem.id == mine.problem_id)
    )
    return AnswerReview(
        answer=answer,
        reference_answer=reference,
        finish_reason=mine.finish_reason,
        gold_finish_reason=gold.finish_reason if gold else None,
        steps=_reviewed_steps(mine, gold),
    )


def _reviewed_steps(mine: Label, gold: Label | None) -> list[ReviewedStep]:
    """Every step either label reached, each completion with both ratings (None: unrated,
    and every gold rating where there is no ``gold``)."""
    my_steps = {step.step_index: step for step in mine.steps}
    gold_steps = {step.step_index: step for step in gold.steps} if gold else {}
    reviewed = []
    for index in sorted(my_steps.keys() | gold_steps.keys()):
        ours, theirs = my_steps.get(index), gold_steps.get(index)
        texts: dict[int, str] = {}
        ratings: dict[str, dict[int, int | None]] = {"mine": {}, "gold": {}}
        for who, step in (("mine", ours), ("gold", theirs)):
            for completion in step.completions if step else []:
                texts.setdefault(completion.completion_index, completion.text)
                ratings[who][completion.completion_index] = completion.rating
        completions = [
            ReviewedCompletion(c, texts[c], ratings["mine"].get(c), ratings["gold"].get(c))
            for c in sorted(texts)
        ]
        reviewed.append(ReviewedStep(index, completions, _human_text(ours), _human_text(theirs)))
    return reviewed


def _human_text(step: LabelStep | None) -> str | None:
    human = step.human_completion if step else None
    return None if human is None else str(human.get("text", ""))
