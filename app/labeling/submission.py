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

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Annotated, Any, Protocol

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import Connection, Insert, bindparam, case, exists, func, select, update
from sqlalchemy.dialects import postgresql

from app.content_keys import content_key
from app.inputs import Text
from app.labeling.queue import Labeler
from app.models import (
    ASSIGNMENTS,
    GOLD_LABELS,
    LABEL_STEPS,
    LABELS,
    SCREENING_GENERATION,
    SOLUTIONS,
    STEP_COMPLETIONS,
    FinishReason,
    QueueState,
    TaskStyle,
    utc_now,
)
from app.statements import INSERTS, AnyRow, insert_values, rows_changed, run

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
    flagged: bool = False
    alternative_ratings: list[Rating] = []
    """Ratings of the step's alternative completions (phase 2: at the negative step only)."""
    chosen: int | None = None
    """Phase 1: the candidate the labeler continued with (0 is the step itself)."""
    human_text: Text | None = None
    """Phase 1: the labeler's own step, instead of a candidate; at most
    HUMAN_STEP_MAX_CHARS."""


class SubmissionInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    steps: list[StepInput]
    finish_reason: FinishReason
    total_time: Annotated[int, Field(ge=0)]
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
class LeasedTask:
    """A task as submitting it needs it: the lease, and the solution it leases."""

    assignment_id: int
    labeler_id: int
    slot: int | None
    leased_at: datetime
    solution_id: int
    problem_id: int
    steps: list[str] | None
    alternatives: list[list[str]] | None
    style: str
    generation: int | None
    """The label's generation: the solution's, or the one a QC question was served in."""
    is_screening: bool
    is_gold: bool
    """The solution is a quality-control question."""


_A = ASSIGNMENTS.c
_S = SOLUTIONS.c
TASK_COLUMNS = (
    _A.id.label("assignment_id"),
    _A.labeler_id,
    _A.slot,
    _A.leased_at,
    _S.id.label("solution_id"),
    _S.problem_id,
    _S.steps,
    _S.alternatives,
    _S.style,
    func.coalesce(_A.qc_generation, _S.generation).label("generation"),
    (func.coalesce(_S.generation, 0) == SCREENING_GENERATION).label("is_screening"),
    exists().where(GOLD_LABELS.c.solution_id == _S.id).label("is_gold"),
)
"""What ``task_from`` reads, from ``LEASED_TASKS`` where ``assignments.id`` is the task's."""
LEASED_TASKS = ASSIGNMENTS.join(SOLUTIONS, _A.solution_id == _S.id)
_LEASED_TASK = (
    select(*TASK_COLUMNS).select_from(LEASED_TASKS).where(_A.id == bindparam("assignment_id"))
)


def leased_task(connection: Connection, assignment_id: int) -> LeasedTask | None:
    """The task leased as ``assignment_id``, to whomever; None if there is no such lease."""
    return task_from(connection.execute(_LEASED_TASK, {"assignment_id": assignment_id}).first())


def task_from(row: AnyRow | None) -> LeasedTask | None:
    """The LeasedTask in a row of TASK_COLUMNS; None for no row, or an outer join's nulls."""
    if row is None or row.assignment_id is None:
        return None
    return LeasedTask(**{name: getattr(row, name) for name in _TASK_FIELDS})


_TASK_FIELDS = [column.name for column in TASK_COLUMNS]


@dataclass(frozen=True)
class SavedLabel:
    label_id: int
    created: bool
    """False when this task had been submitted already (a double click, a retry)."""


# The label's dedupe key is the assignment's: a second submit of one task inserts nothing.
_INSERT_LABEL: dict[str, Insert] = {
    name: insert(LABELS).on_conflict_do_nothing().returning(LABELS.c.id)
    for name, insert in INSERTS.items()
}
_SAVED_LABEL = select(LABELS.c.id, LABELS.c.labeler_id).where(
    LABELS.c.dedupe_key == bindparam("dedupe_key")
)
_COMPLETE = (
    update(ASSIGNMENTS)
    .where(
        _A.id == bindparam("assignment_id"),
        _A.labeler_id == bindparam("holder_id"),
        _A.completed_at.is_(None),
    )
    .values(completed_at=bindparam("now"), label_id=bindparam("new_label_id"))
)
_completed_after = _S.completed_count + 1
_overlap = func.coalesce(_S.overlap, bindparam("default_overlap"))
_COUNT_COMPLETION = (
    update(SOLUTIONS)
    .where(_S.id == bindparam("counted_solution"))
    .values(
        completed_count=_completed_after,
        # A solution labeled ``overlap`` times leaves the queue.
        queue_state=case(
            (_completed_after >= _overlap, QueueState.FULL.value),
            else_=_S.queue_state,
        ),
    )
)


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
    label = _label_row(task, labeler, submission, now)
    steps = [_label_step(task, index, step) for index, step in enumerate(submission.steps)]
    write = _write_at_once if connection.dialect.name == "postgresql" else _write_in_turn
    label_id, completed = write(connection, _Writes(task, labeler.id, label, steps, overlap, now))
    if label_id is None:
        return _saved_before(connection, label["dedupe_key"], labeler)
    if not completed:
        # Written in turn (SQLite): the caller's transaction rolls back, the label with it.
        raise LeaseLost("this task is no longer yours: its lease ran out")
    return SavedLabel(label_id, created=True)


@dataclass(frozen=True)
class _Writes:
    """What storing a label writes: the label, its steps and their completions, the
    assignment it completes and, for a task that took a slot, the solution's count."""

    task: LeasedTask
    holder_id: int
    label: dict[str, Any]
    steps: list[tuple[dict[str, Any], list[dict[str, Any]]]]
    overlap: int
    now: datetime

    def completions(self) -> list[dict[str, Any]]:
        return [
            {"step_index": step["step_index"], **completion}
            for step, completions in self.steps
            for completion in completions
        ]

    @property
    def counted_solution(self) -> int | None:
        return self.task.solution_id if self.task.slot is not None else None


def _write_in_turn(connection: Connection, writes: _Writes) -> tuple[int | None, bool]:
    """The writes one statement after another: the new label's id (None if this task has
    one already) and whether it completed the task's assignment."""
    label_id = run(connection, _INSERT_LABEL[connection.dialect.name], writes.label).scalar()
    if label_id is None:
        return None, False
    completed = run(
        connection,
        _COMPLETE,
        {
            "assignment_id": writes.task.assignment_id,
            "holder_id": writes.holder_id,
            "now": writes.now,
            "new_label_id": label_id,
        },
    )
    if rows_changed(completed) != 1:
        return label_id, False
    step_rows = [{"label_id": label_id, **step} for step, _ in writes.steps]
    insert_values(connection, LABEL_STEPS, step_rows)
    completion_rows = [{"label_id": label_id, **row} for row in writes.completions()]
    insert_values(connection, STEP_COMPLETIONS, completion_rows)
    if writes.counted_solution is not None:
        run(
            connection,
            _COUNT_COMPLETION,
            {"counted_solution": writes.counted_solution, "default_overlap": writes.overlap},
        )
    return label_id, True


_LABEL_COLUMNS = (
    "dedupe_key", "labeler_id", "problem_id", "solution_id", "timestamp", "generation",
    "is_quality_control", "is_initial_screening", "total_time", "finish_reason", "note",
    "created_at",
)  # fmt: skip
"""The columns ``_label_row`` fills."""


_POSTGRES = postgresql.dialect()  # type: ignore[no-untyped-call]


def _typed_parameter(name: str) -> str:
    # Typed: in a SELECT list Postgres reads a parameter of no type (psycopg sends None so)
    # as text, which an integer column refuses.
    column_type = LABELS.c[name].type.compile(dialect=_POSTGRES)
    return f"CAST(%({name})s AS {column_type})"


# Postgres writes all of it in one statement: one round trip instead of five, which on a
# busy server costs more than the writes (each wakes the database and the worker thread).
# The statement stands alone, with no transaction around it (app/db.py, core_autocommit):
# it locks the assignment first and writes only while the assignment is this labeler's
# and open, so a label is stored with its assignment completed, or not at all. The
# sub-statements share one snapshot; foreign keys are checked at the statement's end,
# when the new label's rows exist. Steps and completions come as one JSON document each,
# so the SQL is the same for any number of them and Postgres prepares it once (and the
# driver sends one string, which costs far less to encode than an array per column).
_WRITE_AT_ONCE = f"""
WITH open_task AS (
    SELECT id FROM assignments
    WHERE id = %(assignment_id)s AND labeler_id = %(holder_id)s AND completed_at IS NULL
    FOR NO KEY UPDATE
), new_label AS (
    INSERT INTO labels ({", ".join(_LABEL_COLUMNS)})
    SELECT {", ".join(_typed_parameter(name) for name in _LABEL_COLUMNS)}
    FROM open_task
    ON CONFLICT DO NOTHING
    RETURNING id
), completed AS (
    UPDATE assignments SET completed_at = %(now)s, label_id = new_label.id
    FROM new_label
    WHERE assignments.id = %(assignment_id)s
    RETURNING assignments.id
), steps AS (
    INSERT INTO label_steps (label_id, step_index, chosen_completion, human_completion)
    SELECT new_label.id, step.*
    FROM new_label, json_to_recordset(%(steps)s::json)
        AS step (step_index integer, chosen_completion integer, human_completion json)
    WHERE EXISTS (SELECT FROM completed)
), completions AS (
    INSERT INTO step_completions (label_id, step_index, completion_index, text, rating, flagged)
    SELECT new_label.id, completion.*
    FROM new_label, json_to_recordset(%(completions)s::json) AS completion (
        step_index integer, completion_index integer, text text, rating smallint, flagged boolean
    )
    WHERE EXISTS (SELECT FROM completed)
), counted AS (
    UPDATE solutions SET
        completed_count = completed_count + 1,
        queue_state = CASE
            WHEN completed_count + 1 >= coalesce(overlap, %(default_overlap)s)
            THEN '{QueueState.FULL.value}' ELSE queue_state END
    WHERE id = %(counted_solution)s AND EXISTS (SELECT FROM completed)
)
SELECT (SELECT id FROM new_label), EXISTS (SELECT FROM completed)
"""


def _write_at_once(connection: Connection, writes: _Writes) -> tuple[int | None, bool]:
    """``_write_in_turn`` in one statement (Postgres)."""
    assert writes.label.keys() == set(_LABEL_COLUMNS), "_LABEL_COLUMNS must name every column"
    params = {
        **writes.label,
        "now": writes.now,
        "assignment_id": writes.task.assignment_id,
        "holder_id": writes.holder_id,
        "steps": json.dumps([step for step, _ in writes.steps]),
        "completions": json.dumps(writes.completions()),
        "default_overlap": writes.overlap,
        "counted_solution": writes.counted_solution,
    }
    driver_connection = connection.connection.driver_connection
    assert driver_connection is not None
    label_id, completed = driver_connection.execute(_WRITE_AT_ONCE, params).fetchone()
    return label_id, completed


def _saved_before(connection: Connection, dedupe_key: str, labeler: Labeler) -> SavedLabel:
    """The label a first submit of this task stored; an error if it is someone else's."""
    saved = run(connection, _SAVED_LABEL, {"dedupe_key": dedupe_key}).first()
    if saved is None or saved.labeler_id != labeler.id:
        raise LeaseLost("this task is no longer yours: its lease ran out")
    return SavedLabel(saved.id, created=False)


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
        "generation": task.generation,
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
    flags = [step.flagged] + [False] * len(step.alternative_ratings)
    if task.style == TaskStyle.PHASE1.value:
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


def _ms(duration: timedelta) -> int:
    return int(duration.total_seconds() * 1000)
