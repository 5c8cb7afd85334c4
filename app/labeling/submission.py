"""What a labeler submits for a task, the rules it must follow, and saving it as a label.

The labeling page sends one rating per step it revealed, in order.

Phase-2 tasks (the default): a negative rating ends the solution (``found_error``), and
there the labeler also rates the step's alternative completions when the data holds any.
Rating the final step positive or neutral ends it as ``solution``.

Phase-1 tasks: each step has several candidates (the step and its alternatives); the
labeler rates them all, then continues with one rated positive or neutral, or writes their
own step. The candidates are a fixed list, written after the data's own earlier steps: when
the labeler went on with another candidate, or none is right, none may follow their path,
so they may write the step whatever the ratings (PRM800K's ``human_completion``). Rating
every step this way ends it as ``solution``.

In both, ``give_up`` and ``bad_problem`` end the task early with a reason.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Annotated, Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt
from sqlalchemy import Connection

from app import prm800k
from app.content_keys import content_key
from app.inputs import Text
from app.labeling import repository
from app.labeling.queue import Labeler
from app.labeling.repository import LabelWrites, LeasedTask
from app.models import FinishReason, TaskStyle, utc_now

# Strict: read leniently, "yes" would be a flag and "5" a time (a page sends JSON's own
# types, and a client that sends others gets a 422, not a guess).
Rating = Annotated[int, Field(ge=-1, le=1, strict=True)]
MAX_TASK_TIME = timedelta(hours=8)
"""Longer than any real sitting: a page left open overnight does not count as work."""
NOTE_MAX_CHARS = 2000
"""The longest note a give-up or bad-problem label keeps, in characters, spaces around it
not counted. A longer one is refused with a message, never cut."""
HUMAN_STEP_MAX_CHARS = 5000
"""The longest step a labeler may write, counted as a note is; refused, never cut."""


class StepInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rating: Rating
    flagged: StrictBool = False
    alternative_ratings: list[Rating] = []
    """Ratings of the step's alternative completions (phase 2: at the negative step only)."""
    chosen: StrictInt | None = None
    """Phase 1: the candidate the labeler continued with (0 is the step itself)."""
    human_text: Text | None = None
    """Phase 1: the labeler's own step, instead of a candidate; at most
    HUMAN_STEP_MAX_CHARS."""


class SubmissionInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    steps: list[StepInput]
    finish_reason: FinishReason
    total_time: Annotated[StrictInt, Field(ge=0)]
    """Milliseconds the labeler spent, as the page measured it."""
    note: Text = ""
    """Why the labeler gave up or found the problem bad; at most NOTE_MAX_CHARS."""


class SubmissionError(ValueError):
    """The submission breaks a labeling rule; the message says which, for the labeler."""


class LeaseLost(SubmissionError):
    """The task is no longer the labeler's: its lease ran out and another labeler took it."""


class RatedSolution(Protocol):
    """What the rules look at: a Solution row, or the LeasedTask being submitted."""

    @property
    def steps(self) -> list[str] | None: ...

    @property
    def alternatives(self) -> list[list[str]] | None: ...

    @property
    def style(self) -> str: ...


def check_submission(solution: RatedSolution, submission: SubmissionInput) -> None:
    """Raise SubmissionError unless the ratings follow the rules for this solution."""
    steps = solution.steps or []
    rated = submission.steps
    if len(rated) > len(steps):
        raise SubmissionError(f"the solution has {len(steps)} steps, {len(rated)} were rated")
    if solution.style == TaskStyle.PHASE1.value:
        _check_phase1(solution, submission)
    else:
        _check_phase2(solution, submission)
    note = submission.note.strip()
    if submission.finish_reason in (FinishReason.GIVE_UP, FinishReason.BAD_PROBLEM) and not note:
        raise SubmissionError(f"{submission.finish_reason.value}: say why, in a few words")
    _check_length("the note", note, NOTE_MAX_CHARS)


def _check_length(what: str, text: str, limit: int) -> None:
    if len(text) > limit:
        raise SubmissionError(
            f"{what} has {len(text):,} characters, more than the {limit:,} allowed: shorten it"
        )


def _check_phase2(solution: RatedSolution, submission: SubmissionInput) -> None:
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


def _check_phase1(solution: RatedSolution, submission: SubmissionInput) -> None:
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
            _check_length(
                f"step {index + 1}: your step", step.human_text.strip(), HUMAN_STEP_MAX_CHARS
            )
        elif step.chosen is None or not 0 <= step.chosen < len(ratings):
            raise SubmissionError(f"step {index + 1}: choose the candidate to continue with")
        elif ratings[step.chosen] == -1:
            raise SubmissionError(f"step {index + 1}: continue with a candidate that is not wrong")
    if submission.finish_reason == FinishReason.SOLUTION and len(submission.steps) != len(
        solution.steps or []
    ):
        raise SubmissionError("solution needs every step rated and continued")


def _alternatives(solution: RatedSolution, index: int) -> list[str]:
    alternatives = solution.alternatives or []
    return alternatives[index] if index < len(alternatives) else []


@dataclass(frozen=True)
class SavedLabel:
    label_id: int
    created: bool
    """False when this task had been submitted already (a double click, a retry)."""


def save_label(
    connection: Connection,
    task: LeasedTask,
    labeler: Labeler,
    submission: SubmissionInput,
    *,
    overlap: int,
    now: datetime | None = None,
) -> SavedLabel:
    """Store the submission as the task's label, exactly once."""
    now = now or utc_now()
    check_submission(task, submission)
    writes = label_writes(task, labeler, submission, overlap, now)
    label_id, completed = repository.write_label(connection, writes)
    if label_id is None:
        return _saved_before(connection, writes.label["dedupe_key"], labeler)
    if not completed:
        # Written in turn (SQLite): the caller's transaction rolls back, the label with it.
        raise LeaseLost("this task is no longer yours: its lease ran out")
    return SavedLabel(label_id, created=True)


def label_writes(
    task: LeasedTask, labeler: Labeler, submission: SubmissionInput, overlap: int, now: datetime
) -> LabelWrites:
    """What storing the submission as the task's label writes."""
    steps = [_label_step(task, index, step) for index, step in enumerate(submission.steps)]
    step_rows = [row for row, _ in steps]
    completions = [completion for _, completions in steps for completion in completions]
    label = _label_row(task, labeler, submission, now)
    # Its PRM800K text, encoded once now rather than at every pull (app/prm800k.py).
    label["prm800k_label"] = prm800k.label_text(
        prm800k.steps_of_rows(step_rows, completions), label["total_time"], label["finish_reason"]
    )
    return LabelWrites(
        label=label,
        steps=step_rows,
        completions=completions,
        assignment_id=task.assignment_id,
        holder_id=labeler.id,
        counted_solution=task.solution_id if task.slot is not None else None,
        overlap=overlap,
        now=now,
    )


def _saved_before(connection: Connection, dedupe_key: str, labeler: Labeler) -> SavedLabel:
    """The label a first submit of this task stored; an error if it is someone else's."""
    saved = repository.saved_label(connection, dedupe_key)
    if saved is None or saved[1] != labeler.id:
        raise LeaseLost("this task is no longer yours: its lease ran out")
    return SavedLabel(saved[0], created=False)


def _label_row(
    task: LeasedTask, labeler: Labeler, submission: SubmissionInput, now: datetime
) -> dict[str, Any]:
    elapsed = now - task.leased_at
    spent = min(submission.total_time, _ms(min(elapsed, MAX_TASK_TIME)))
    return {
        "dedupe_key": content_key("assignment", task.assignment_id),
        "labeler_id": labeler.id,
        "problem_id": task.problem_id,
        "solution_id": task.solution_id,
        "timestamp": now,
        # PRM800K's phase-1 lines carry no generation: phase 1 came before active learning.
        "generation": None if task.style == TaskStyle.PHASE1.value else task.generation,
        "is_quality_control": task.is_gold,
        "is_initial_screening": task.is_screening,
        "total_time": spent,
        "finish_reason": submission.finish_reason.value,
        "note": submission.note.strip() or None,
        "created_at": now,
    }


def _label_step(
    task: LeasedTask, index: int, step: StepInput
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The ``label_steps`` row of one submitted step, and its ``step_completions`` rows."""
    texts = [(task.steps or [])[index], *_alternatives(task, index)]
    ratings = [step.rating, *step.alternative_ratings]
    if task.style == TaskStyle.PHASE1.value:
        chosen = step.chosen
        own_flag: bool | None = step.flagged
    else:
        # The labeler went on with the step unless it was wrong, as PRM800K records it.
        chosen = None if step.rating == -1 else 0
        # PRM800K's phase 2 leaves a pre-generated step's flag null; only a flag is written.
        own_flag = True if step.flagged else None
    flags = [own_flag] + [False] * len(step.alternative_ratings)
    human = (
        {"text": step.human_text.strip(), "rating": None, "source": "human", "flagged": False}
        if step.human_text is not None
        else None
    )
    row = {"step_index": index, "chosen_completion": chosen, "human_completion": human}
    completions = [
        {
            "step_index": index,
            "completion_index": i,
            "text": text,
            "rating": rating,
            "flagged": flag,
        }
        for i, (text, rating, flag) in enumerate(zip(texts, ratings, flags, strict=False))
    ]
    return row, completions


def _ms(duration: timedelta) -> int:
    return int(duration.total_seconds() * 1000)
