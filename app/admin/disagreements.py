"""The most disagreed solutions, and one solution's ratings by every labeler side by side.

A solution's *disagreement score* is the sum, over its steps that two or more labelers rated,
of the mean distance between two of the step's ratings (|a - b|: 0 against +1 is 1, -1
against +1 is 2). Solutions rank by score, then by how many steps they disagree on (a step
disagrees when its ratings are not all equal); those with no disagreement are not listed.
The labels are the ones agreement counts (app/admin/agreement/).
"""

import math
from dataclasses import dataclass
from datetime import datetime

import numpy as np
from pydantic import BaseModel
from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from app.admin.agreement.metrics import (
    FINISH_REASONS,
    NO_ERROR,
    NO_FINISH_REASON,
    NO_GENERATION,
    STEP_RATINGS,
    BoolArray,
    LabelerName,
    SharedLabels,
    rated_steps,
)
from app.admin.agreement.queries import load_shared_labels, user_names
from app.admin.reliability import FloatArray, IntArray
from app.consensus.service import final_labels
from app.figures import counted_labels
from app.models import Label, LabelStep, Problem, Solution, User

ITEMS_PER_PAGE = 25


@dataclass(frozen=True)
class SolutionScores:
    """Per solution with steps rated by two or more labelers, most disagreed first."""

    solution: IntArray
    score: FloatArray
    shared_steps: IntArray
    disagreeing_steps: IntArray


def solution_scores(shared: SharedLabels) -> SolutionScores:
    """Disagreement scores of the solutions that disagree on at least one step."""
    steps = rated_steps(shared)
    distance = np.abs(steps.first_value - steps.second_value)
    step_count = len(steps.counts)
    pairs_per_step = np.bincount(steps.pair_step, minlength=step_count)
    distance_per_step = np.bincount(steps.pair_step, weights=distance, minlength=step_count)
    with np.errstate(invalid="ignore"):
        step_score = np.where(pairs_per_step > 0, distance_per_step / pairs_per_step, 0.0)
    disagrees = (steps.counts > 0).sum(axis=1) > 1
    solutions, solution_of_step = np.unique(steps.solution, return_inverse=True)
    score = np.bincount(solution_of_step, weights=step_score, minlength=len(solutions))
    shared_steps = np.bincount(solution_of_step, minlength=len(solutions))
    disagreeing = np.bincount(solution_of_step, weights=disagrees, minlength=len(solutions))
    # Rounded for the ranking only, so that equal scores summed in another order tie.
    order = np.lexsort((solutions, -disagreeing, -np.round(score, 9)))
    order = order[score[order] > 0]
    return SolutionScores(
        solution=solutions[order],
        score=score[order].astype(np.float64),
        shared_steps=shared_steps[order],
        disagreeing_steps=disagreeing[order].astype(np.int64),
    )


class LabelerVerdict(BaseModel):
    """One labeler's label of a listed solution, in brief."""

    labeler: LabelerName
    finish_reason: str | None
    first_error: int | None
    """The first negative step, counted from 1; None when the label has none."""


class DisagreedItem(BaseModel):
    rank: int
    """1 for the most disagreed solution."""
    solution_id: int
    problem_id: int
    problem: str
    generation: int | None
    """The generation of its labels: None for phase 1's, which have none."""
    score: float
    shared_steps: int
    disagreeing_steps: int
    labels: list[LabelerVerdict]
    final_label: str
    """How its one label per solution stands (app/consensus/): "needs adjudication",
    "adjudicated", "majority", ..."""


class DisagreementPage(BaseModel):
    generation: int | None
    page: int
    page_count: int
    total: int
    """Solutions with any disagreement."""
    items: list[DisagreedItem]


def most_disagreed(
    session: Session, generation: int | None = None, page: int = 1, per_page: int = ITEMS_PER_PAGE
) -> DisagreementPage:
    """One page of the most disagreed solutions; ``page`` is clamped to the pages there are."""
    shared = load_shared_labels(session, generation)
    scores = solution_scores(shared)
    total = len(scores.solution)
    page_count = max(1, math.ceil(total / per_page))
    page = min(max(page, 1), page_count)
    positions = range((page - 1) * per_page, min(page * per_page, total))
    return DisagreementPage(
        generation=generation,
        page=page,
        page_count=page_count,
        total=total,
        items=_items(session, shared, scores, positions),
    )


def _items(
    session: Session, shared: SharedLabels, scores: SolutionScores, positions: range
) -> list[DisagreedItem]:
    """The listed solutions at ``positions`` of the ranking, with their problems and labels."""
    listed = [int(solution_id) for solution_id in scores.solution[positions.start : positions.stop]]
    solutions = {
        row.id: row
        for row in session.execute(
            select(Solution.id, Solution.problem_id, Solution.generation, Problem.text)
            .join(Problem, Problem.id == Solution.problem_id)
            .where(Solution.id.in_(listed))
        )
    }
    on_page = np.isin(shared.solution, listed)
    names = user_names(session, sorted({int(user) for user in shared.labeler[on_page]}))
    verdicts = _verdicts(shared, on_page, names)
    finals = final_labels(session, listed)
    return [
        DisagreedItem(
            rank=position + 1,
            solution_id=solution_id,
            problem_id=solutions[solution_id].problem_id,
            problem=solutions[solution_id].text,
            generation=_labels_generation(shared.generation[shared.solution == solution_id]),
            score=float(scores.score[position]),
            shared_steps=int(scores.shared_steps[position]),
            disagreeing_steps=int(scores.disagreeing_steps[position]),
            labels=sorted(verdicts[solution_id], key=lambda verdict: verdict.labeler.name),
            final_label=finals.get(solution_id, "no judging label"),
        )
        for position, solution_id in zip(positions, listed, strict=True)
    ]


def _labels_generation(generations: IntArray) -> int | None:
    """The generation a solution's labels were made in (the latest where they differ);
    None where they have none, as phase-1 labels do, whatever generation queued it."""
    numbered = generations[generations != NO_GENERATION]
    return int(numbered.max()) if len(numbered) else None


def _verdicts(
    shared: SharedLabels, labels: BoolArray, names: dict[int, str]
) -> dict[int, list[LabelerVerdict]]:
    """Per solution, the brief verdict of each of its labels where ``labels`` is true."""
    position, _ = shared.first_errors
    verdicts: dict[int, list[LabelerVerdict]] = {}
    for index in np.flatnonzero(labels):
        labeler = int(shared.labeler[index])
        finish = int(shared.finish[index])
        first = int(position[index])
        verdicts.setdefault(int(shared.solution[index]), []).append(
            LabelerVerdict(
                labeler=LabelerName(id=labeler, name=names.get(labeler, f"user {labeler}")),
                finish_reason=None if finish == NO_FINISH_REASON else FINISH_REASONS[finish],
                first_error=None if first == NO_ERROR else first + 1,
            )
        )
    return verdicts


# One solution, every counted label side by side.


class RatedCompletion(BaseModel):
    text: str
    rating: int | None
    flagged: bool | None


class StepRating(BaseModel):
    """A labeler's rating of one step of the solution, and of the alternatives they rated."""

    rating: int | None
    flagged: bool
    alternatives: list[RatedCompletion]
    written: str | None = None
    """The step the labeler wrote instead (phase 1's ``human_completion``)."""


class LabelRatings(BaseModel):
    label_id: int
    labeler: LabelerName
    timestamp: datetime
    finish_reason: str | None
    note: str | None
    total_time: int | None
    """Milliseconds."""
    steps: list[StepRating | None]
    """Per step of the solution; None for a step the labeler did not reach."""


class ItemRatings(BaseModel):
    solution_id: int
    problem_id: int
    problem: str
    ground_truth_answer: str | None
    generation: int | None
    """The generation of its labels (None for phase 1's), or the solution's without labels."""
    steps: list[str]
    answer: str | None
    labels: list[LabelRatings]
    """The labels agreement counts, by labeler name."""
    disagreeing_steps: list[int]
    """Indexes (from 0) of the steps whose ratings are not all equal."""


def item_ratings(session: Session, solution_id: int) -> ItemRatings | None:
    """The solution with every counted label's ratings; None when there is no such solution."""
    solution = session.scalar(
        select(Solution).where(Solution.id == solution_id).options(selectinload(Solution.problem))
    )
    if solution is None:
        return None
    steps = solution.steps or []
    rows = session.execute(
        select(Label, User.name)
        .join(User, User.id == Label.labeler_id)
        .where(Label.id.in_(select(counted_labels(None, solution_id).c.id)))
        .options(selectinload(Label.steps).selectinload(LabelStep.completions))
        .order_by(User.name, Label.id)
    ).all()
    labels = [_label_ratings(label, name, len(steps)) for label, name in rows]
    generations = [label.generation for label, _ in rows]
    numbered = [number for number in generations if number is not None]
    generation = max(numbered) if numbered else None if generations else solution.generation
    return ItemRatings(
        solution_id=solution.id,
        problem_id=solution.problem_id,
        problem=solution.problem.text,
        ground_truth_answer=solution.problem.ground_truth_answer,
        generation=generation,
        steps=steps,
        answer=solution.answer,
        labels=labels,
        disagreeing_steps=_disagreeing_steps(labels, len(steps)),
    )


def _label_ratings(label: Label, name: str, step_count: int) -> LabelRatings:
    by_index: list[StepRating | None] = [None] * step_count
    for step in label.steps:
        own = next((c for c in step.completions if c.completion_index == 0), None)
        if own is None or step.step_index >= step_count:
            continue
        by_index[step.step_index] = StepRating(
            rating=own.rating,
            flagged=bool(own.flagged),
            alternatives=[
                RatedCompletion(text=c.text, rating=c.rating, flagged=c.flagged)
                for c in step.completions
                if c.completion_index > 0
            ],
            written=(step.human_completion or {}).get("text"),
        )
    return LabelRatings(
        label_id=label.id,
        labeler=LabelerName(id=label.labeler_id, name=name),
        timestamp=label.timestamp,
        finish_reason=label.finish_reason,
        note=label.note,
        total_time=label.total_time,
        steps=by_index,
    )


def _disagreeing_steps(labels: list[LabelRatings], step_count: int) -> list[int]:
    disagreeing = []
    for index in range(step_count):
        ratings = {
            step.rating
            for label in labels
            if (step := label.steps[index]) is not None and step.rating in STEP_RATINGS
        }
        if len(ratings) > 1:
            disagreeing.append(index)
    return disagreeing
