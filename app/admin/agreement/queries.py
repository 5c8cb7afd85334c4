"""The labels agreement counts (app/figures.py ``counted_labels``) read as arrays; the
labelers' activity, their names, and the generations labels belong to."""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import String, cast, func, select
from sqlalchemy.orm import Session

from app.admin.agreement.metrics import (
    FINISH_REASONS,
    NO_FINISH_REASON,
    NO_GENERATION,
    STEP_RATINGS,
    SharedLabels,
)
from app.admin.reliability import IntArray
from app.figures import counted_labels, regular_label_conditions
from app.models import (
    SCREENING_GENERATION,
    STEP_COMPLETIONS,
    UNNUMBERED_GENERATION,
    FinishReason,
    Label,
    StepCompletion,
    User,
)

# The counted labels and their step ratings, as arrays.


def load_shared_labels(
    session: Session, generation: int | None, solution_id: int | None = None
) -> SharedLabels:
    """The counted labels and their ratings, in one query with one row per label."""
    step = STEP_COMPLETIONS.c
    # Each rating travels as one token, step * 3 + index of the rating: a label's ratings
    # are one string, whatever order the database concatenates them in, and numpy parses
    # them all at once. One row per label is ~10x fewer rows than one per rating.
    token = cast(step.step_index * len(STEP_RATINGS) + step.rating - STEP_RATINGS[0], String)
    # Per label (a correlated subquery, an index-only scan of ix_step_completions_own_rating),
    # not a GROUP BY over every rating, which sorts them all.
    counted = counted_labels(generation, solution_id)
    ratings_of_label = (
        select(func.aggregate_strings(token, " "))
        .where(step.label_id == counted.c.id, step.completion_index == 0, step.rating.is_not(None))
        .correlate(counted)
        .scalar_subquery()
    )
    # A Core statement on the session's connection: plain rows, without the ORM's handling.
    statement = select(counted, ratings_of_label).order_by(counted.c.id)
    rows = session.connection().execute(statement).all()
    tokens = np.fromstring(" ".join(row[5] for row in rows if row[5]), dtype=np.int64, sep=" ")
    per_label = [row[5].count(" ") + 1 if row[5] else 0 for row in rows]
    return SharedLabels(
        label_id=_int_column(rows, 0),
        labeler=_int_column(rows, 1),
        solution=_int_column(rows, 2),
        generation=np.array(
            [NO_GENERATION if row[3] is None else row[3] for row in rows], dtype=np.int64
        ),
        finish=np.array(
            [FINISH_REASONS.index(row[4]) if row[4] else NO_FINISH_REASON for row in rows],
            dtype=np.int64,
        ),
        rating_label=np.repeat(np.arange(len(rows)), per_label),
        rating_step=tokens // len(STEP_RATINGS),
        rating_value=tokens % len(STEP_RATINGS),
    )


def _int_column(rows: Sequence[Sequence[Any]], index: int) -> IntArray:
    return np.fromiter((row[index] for row in rows), dtype=np.int64, count=len(rows))


# Per-labeler activity, from SQL aggregates over all their regular labels.


@dataclass(frozen=True)
class Activity:
    labels: int
    give_ups: int
    bad_problems: int
    flagged: int
    """Labels with a flagged step (any completion)."""


def labeler_activity(session: Session, generation: int | None) -> dict[int, Activity]:
    """Labels, give-ups, bad problems and labels with a flag, of each labeler."""
    # Flags are rare: ix_step_completions_flagged finds them without reading every rating.
    flagged = (
        select(StepCompletion.label_id)
        .where(StepCompletion.flagged.is_(True))
        .distinct()
        .subquery()
    )
    rows = session.execute(
        select(
            Label.labeler_id,
            func.count(),
            func.count().filter(Label.finish_reason == FinishReason.GIVE_UP.value),
            func.count().filter(Label.finish_reason == FinishReason.BAD_PROBLEM.value),
            func.count(flagged.c.label_id),
        )
        .outerjoin(flagged, flagged.c.label_id == Label.id)
        .where(*regular_label_conditions(generation))
        .group_by(Label.labeler_id)
    )
    return {labeler_id: Activity(*counts) for labeler_id, *counts in rows}


def user_names(session: Session, user_ids: Sequence[int]) -> dict[int, str]:
    if not user_ids:
        return {}
    rows = session.execute(select(User.id, User.name).where(User.id.in_(user_ids)))
    return {user_id: name for user_id, name in rows}


def label_generations(session: Session) -> list[int]:
    """The generations labels belong to (screening aside), for the page's filter, and
    UNNUMBERED_GENERATION last where some labels have none (phase 1's)."""
    # Read from ix_labels_generation_id alone; a generation of QC labels only would show
    # empty figures, which is what it has.
    numbers = session.scalars(
        select(Label.generation)
        .distinct()
        .where(Label.generation.is_distinct_from(SCREENING_GENERATION))
        .order_by(Label.generation)
    ).all()
    return [number for number in numbers if number is not None] + (
        [UNNUMBERED_GENERATION] if None in numbers else []
    )
