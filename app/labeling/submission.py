"""What a labeler submits for a task, the rules it must follow, and saving it as a label.

The labeling page sends one rating per step it revealed, in order.

Phase-2 tasks (the default): a negative rating ends the solution (``found_error``), and
there the labeler also rates the step's alternative completions when the data holds any.
Rating the final step positive or neutral ends it as ``solution``.

Phase-1 tasks: each step has several candidates (the step and its alternatives); the
labeler rates them all, then continues with one rated positive or neutral, or writes their
own step when none is positive. Rating every step this way ends it as ``solution``.

In both, ``give_up`` and ``bad_problem`` end the task early with a reason.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import case, exists, func, insert, select, update
from sqlalchemy.orm import Session

from app.datasets.keys import content_key
from app.db import rows_changed
from app.models import (
    LABEL_STEPS,
    LABELS,
    SCREENING_GENERATION,
    STEP_COMPLETIONS,
    Assignment,
    FinishReason,
    GoldLabel,
    QueueState,
    Solution,
    TaskStyle,
    User,
    utc_now,
)

Rating = Annotated[int, Field(ge=-1, le=1, strict=True)]
MAX_TASK_TIME = timedelta(hours=8)
"""Longer than any real sitting: a page left open overnight does not count as work."""


class StepInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rating: Rating
    flagged: bool = False
    alternative_ratings: list[Rating] = []
    """Ratings of the step's alternative completions (phase 2: at the negative step only)."""
    chosen: int | None = None
    """Phase 1: the candidate the labeler continued with (0 is the step itself)."""
    human_text: Annotated[str, Field(max_length=5000)] | None = None
    """Phase 1: the labeler's own step, when no candidate was positive."""


class SubmissionInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    steps: list[StepInput]
    finish_reason: FinishReason
    total_time: Annotated[int, Field(ge=0)]
    """Milliseconds the labeler spent, as the page measured it."""
    note: Annotated[str, Field(max_length=2000)] = ""


class SubmissionError(ValueError):
    """The submission breaks a labeling rule; the message says which, for the labeler."""


def check_submission(solution: Solution, submission: SubmissionInput) -> None:
    """Raise SubmissionError unless the ratings follow the rules for this solution."""
    steps = solution.steps or []
    rated = submission.steps
    if len(rated) > len(steps):
        raise SubmissionError(f"the solution has {len(steps)} steps, {len(rated)} were rated")
    if solution.style == TaskStyle.PHASE1.value:
        _check_phase1(solution, submission)
    else:
        _check_phase2(solution, submission)
    if submission.finish_reason in (FinishReason.GIVE_UP, FinishReason.BAD_PROBLEM) and not (
        submission.note.strip()
    ):
        raise SubmissionError(f"{submission.finish_reason.value}: say why, in a few words")


def _check_phase2(solution: Solution, submission: SubmissionInput) -> None:
    rated = submission.steps
    reason = submission.finish_reason
    if any(step.rating == -1 for step in rated[:-1]):
        raise SubmissionError("a negative rating ends the solution: no steps after it")
    for index, step in enumerate(rated):
        if step.chosen is not None or step.human_text is not None:
            raise SubmissionError(f"step {index + 1}: choices are for phase-1 tasks")
        wanted = len(_alternatives(solution, index)) if step.rating == -1 else 0
        if len(step.alternative_ratings) != wanted:
            raise SubmissionError(
                f"step {index + 1}: rate its {wanted} alternative completions"
                if wanted
                else f"step {index + 1}: alternatives are rated only at a negative step"
            )
    ends_negative = bool(rated) and rated[-1].rating == -1
    if reason == FinishReason.FOUND_ERROR and not ends_negative:
        raise SubmissionError("found_error needs the last rated step to be negative")
    if reason == FinishReason.SOLUTION and (
        len(rated) != len(solution.steps or []) or ends_negative
    ):
        raise SubmissionError("solution needs every step rated, none negative")
    if reason in (FinishReason.GIVE_UP, FinishReason.BAD_PROBLEM) and ends_negative:
        raise SubmissionError("a negative step ends the task as found_error")


def _check_phase1(solution: Solution, submission: SubmissionInput) -> None:
    if submission.finish_reason == FinishReason.FOUND_ERROR:
        raise SubmissionError("phase-1 tasks end as a solution, or by giving up")
    for index, step in enumerate(submission.steps):
        ratings = [step.rating, *step.alternative_ratings]
        candidates = 1 + len(_alternatives(solution, index))
        if len(ratings) != candidates:
            raise SubmissionError(f"step {index + 1}: rate all {candidates} candidates")
        if step.human_text is not None:
            if step.chosen is not None or not step.human_text.strip():
                raise SubmissionError(f"step {index + 1}: choose a candidate or write a step")
            if 1 in ratings:
                raise SubmissionError(f"step {index + 1}: a candidate is positive: choose it")
        elif step.chosen is None or not 0 <= step.chosen < len(ratings):
            raise SubmissionError(f"step {index + 1}: choose the candidate to continue with")
        elif ratings[step.chosen] == -1:
            raise SubmissionError(f"step {index + 1}: continue with a candidate that is not wrong")
    if submission.finish_reason == FinishReason.SOLUTION and len(submission.steps) != len(
        solution.steps or []
    ):
        raise SubmissionError("solution needs every step rated and continued")


def _alternatives(solution: Solution, index: int) -> list[str]:
    alternatives = solution.alternatives or []
    return alternatives[index] if index < len(alternatives) else []


@dataclass(frozen=True)
class SavedLabel:
    label_id: int
    created: bool
    """False when this task had been submitted already (a double click, a retry)."""


def save_label(
    session: Session,
    assignment: Assignment,
    labeler: User,
    submission: SubmissionInput,
    *,
    overlap: int,
    now: datetime | None = None,
) -> SavedLabel:
    """Store the submission as the assignment's label, exactly once."""
    now = now or utc_now()
    solution = assignment.solution
    check_submission(solution, submission)
    # Whoever completes the assignment first stores the label; a repeat finds it done.
    completed = session.execute(
        update(Assignment)
        .where(
            Assignment.id == assignment.id,
            Assignment.labeler_id == labeler.id,
            Assignment.completed_at.is_(None),
        )
        .values(completed_at=now)
    )
    if rows_changed(completed) != 1:
        session.refresh(assignment)
        if assignment.label_id is None or assignment.labeler_id != labeler.id:
            raise SubmissionError("this task is no longer yours: its lease ran out")
        return SavedLabel(assignment.label_id, created=False)
    # Core inserts, not ORM objects: a submit is the hottest write in the app.
    label_id = session.scalar(
        insert(LABELS)
        .values(_label_row(session, assignment, labeler, submission, now))
        .returning(LABELS.c.id)
    )
    assert label_id is not None
    steps = [_label_step(solution, index, step) for index, step in enumerate(submission.steps)]
    if steps:
        session.execute(insert(LABEL_STEPS), [{"label_id": label_id, **row} for row, _ in steps])
        completions = [
            {"label_id": label_id, "step_index": row["step_index"], **completion}
            for row, step_completions in steps
            for completion in step_completions
        ]
        session.execute(insert(STEP_COMPLETIONS), completions)
    session.execute(
        update(Assignment).where(Assignment.id == assignment.id).values(label_id=label_id)
    )
    if assignment.slot is not None:
        _count_completion(session, solution.id, overlap)
    return SavedLabel(label_id, created=True)


def _label_row(
    session: Session,
    assignment: Assignment,
    labeler: User,
    submission: SubmissionInput,
    now: datetime,
) -> dict[str, Any]:
    solution = assignment.solution
    is_gold = session.scalar(select(exists().where(GoldLabel.solution_id == solution.id)))
    elapsed = now - assignment.leased_at
    spent = min(submission.total_time, _ms(min(elapsed, MAX_TASK_TIME)))
    return {
        "dedupe_key": content_key("assignment", assignment.id),
        "labeler_id": labeler.id,
        "problem_id": solution.problem_id,
        "solution_id": solution.id,
        "timestamp": now,
        "generation": solution.generation,
        "is_quality_control": bool(is_gold),
        "is_initial_screening": solution.generation == SCREENING_GENERATION,
        "total_time": spent,
        "finish_reason": submission.finish_reason.value,
        "note": submission.note.strip() or None,
        "created_at": now,
    }


def _label_step(
    solution: Solution, index: int, step: StepInput
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The ``label_steps`` row of one submitted step, and its ``step_completions`` rows."""
    texts = [(solution.steps or [])[index], *_alternatives(solution, index)]
    ratings = [step.rating, *step.alternative_ratings]
    flags = [step.flagged] + [False] * len(step.alternative_ratings)
    if solution.style == TaskStyle.PHASE1.value:
        chosen = step.chosen
    else:
        # The labeler went on with the step unless it was wrong, as PRM800K records it.
        chosen = None if step.rating == -1 else 0
    human = (
        {"text": step.human_text.strip(), "rating": None, "source": "human", "flagged": False}
        if step.human_text is not None
        else None
    )
    row = {"step_index": index, "chosen_completion": chosen, "human_completion": human}
    completions = [
        {"completion_index": i, "text": text, "rating": rating, "flagged": flag}
        for i, (text, rating, flag) in enumerate(zip(texts, ratings, flags, strict=False))
    ]
    return row, completions


def _count_completion(session: Session, solution_id: int, overlap: int) -> None:
    """One more finished label; a solution labeled ``overlap`` times leaves the queue."""
    done = Solution.completed_count + 1
    session.execute(
        update(Solution)
        .where(Solution.id == solution_id)
        .values(
            completed_count=done,
            queue_state=case(
                (done >= func.coalesce(Solution.overlap, overlap), QueueState.FULL.value),
                else_=Solution.queue_state,
            ),
        )
    )


def _ms(duration: timedelta) -> int:
    return int(duration.total_seconds() * 1000)
