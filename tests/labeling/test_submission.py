"""Submitting a task: the rules of a label, exactly-once saving, and what is stored."""

import io
from datetime import datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app import prm800k
from app.datasets.export import ExportFilter, write_export
from app.labeling import repository
from app.labeling.queue import QueueRules
from app.labeling.submission import (
    HUMAN_STEP_MAX_CHARS,
    NOTE_MAX_CHARS,
    LeasedTask,
    LeaseLost,
    SavedLabel,
    SubmissionError,
    SubmissionInput,
    check_submission,
    label_writes,
    save_label,
)
from app.models import (
    SCREENING_GENERATION,
    Assignment,
    GoldLabel,
    Label,
    LabelStep,
    QueueState,
    Solution,
    StepCompletion,
    User,
)
from tests.factories import make_solution, make_user, next_lease, task_of
from tests.labeling.test_queue import NOW, RULES

STEPS = ["First $1+1=2$.", "Then $2+2=5$.", "So it is $5$.\n\n# Answer\n\n5"]


def submission(ratings: list[int], reason: str, **extra: object) -> SubmissionInput:
    steps = extra.pop("steps", [{"rating": r} for r in ratings])
    return SubmissionInput.model_validate(
        {"steps": steps, "finish_reason": reason, "total_time": 5000, **extra}
    )


@pytest.mark.parametrize(
    ("ratings", "reason", "extra", "message"),
    [
        ([1, 1, 1, 1], "solution", {}, "3 steps, 4 were rated"),
        ([1, -1, 1], "solution", {}, "no steps after it"),
        ([1, 1], "solution", {}, "every step rated"),
        ([1, 0], "found_error", {}, "last rated step to be negative"),
        ([1], "give_up", {}, "give_up: say why"),
        (
            [1],
            "give_up",
            {"note": " " + "x" * (NOTE_MAX_CHARS + 1)},
            "the note has 2,001 characters, more than the 2,000 allowed: shorten it",
        ),
        (
            [],
            "bad_problem",
            {
                "note": "typo",
                "steps": [{"rating": 1}, {"rating": -1, "alternative_ratings": [1, 1]}],
            },
            "ends the task as found_error",
        ),
        (
            [],
            "found_error",
            {"steps": [{"rating": 1, "alternative_ratings": [1]}, {"rating": -1}]},
            "step 1: alternatives are rated only at a negative step",
        ),
        (
            [],
            "found_error",
            {"steps": [{"rating": 1}, {"rating": -1, "alternative_ratings": [1]}]},
            "step 2: rate its 2 alternative completions",
        ),
    ],
)
def test_rules(
    session: Session, ratings: list[int], reason: str, extra: dict[str, object], message: str
) -> None:
    solution = make_solution(session, STEPS, alternatives=[[], ["Then $2+2=4$.", "So $4$."]])
    with pytest.raises(SubmissionError, match=message):
        check_submission(solution, submission(ratings, reason, **extra))


@pytest.mark.parametrize("chosen", ["0", 0.0, False])
def test_a_choice_of_another_type_is_refused(chosen: object) -> None:
    step = {"rating": 1, "alternative_ratings": [1], "chosen": chosen}
    with pytest.raises(ValidationError, match="chosen"):
        SubmissionInput.model_validate(
            {"steps": [step], "finish_reason": "give_up", "note": "n", "total_time": 5}
        )


@pytest.mark.parametrize(
    ("ratings", "reason", "note"),
    [
        ([1, 0, 1], "solution", ""),
        ([1, -1], "found_error", ""),
        ([0], "give_up", "too long"),
        ([0], "give_up", "x" * NOTE_MAX_CHARS + "\n"),
        ([], "bad_problem", "the problem has a typo"),
    ],
)
def test_valid_submissions(session: Session, ratings: list[int], reason: str, note: str) -> None:
    check_submission(make_solution(session, STEPS), submission(ratings, reason, note=note))


def next_task(
    session: Session, labeler: User, rules: QueueRules = RULES, now: datetime = NOW
) -> LeasedTask:
    """The labeler's next task, as submitting it sees it."""
    lease = next_lease(session.connection(), labeler, rules, now)
    assert lease is not None
    return task_of(session.connection(), labeler, lease)


def lease(
    session: Session, name: str = "alice", *, approved: bool = True, **solution: object
) -> tuple[LeasedTask, User]:
    """A new solution, and a new labeler's lease of it."""
    make_solution(session, STEPS, **solution)  # type: ignore[arg-type]
    labeler = make_user(session, name, approved=approved)
    return next_task(session, labeler), labeler


def save(
    session: Session,
    task: LeasedTask,
    labeler: User,
    sent: SubmissionInput,
    now: datetime | None = NOW,
) -> SavedLabel:
    return save_label(session.connection(), task, labeler, sent, overlap=1, now=now)


def test_a_double_submit_stores_one_label(session: Session) -> None:
    task, alice = lease(session)
    sent = submission([1, -1], "found_error")
    first = save(session, task, alice, sent)
    second = save(session, task, alice, sent)
    assert first.created and not second.created and first.label_id == second.label_id
    assert session.scalar(select(func.count()).select_from(Label)) == 1


def test_the_stored_label_exports_as_prm800k(session: Session) -> None:
    task, labeler = lease(session, alternatives=[[], ["Then $2+2=4$.", "So $4$."]])
    sent = submission(
        [],
        "found_error",
        steps=[
            {"rating": 1, "flagged": True},
            {"rating": -1, "alternative_ratings": [1, 0]},
        ],
    )
    later = NOW + timedelta(seconds=3)
    save(session, task, labeler, sent, now=later)
    out = io.StringIO()
    write_export(session, out, ExportFilter())
    record = prm800k.parse_line(out.getvalue())
    assert record.labeler == labeler.uuid and record.timestamp == later
    assert record.generation == 0 and record.label.finish_reason == "found_error"
    assert not record.is_quality_control_question and not record.is_initial_screening_question
    assert record.label.total_time == 3000  # the page claimed 5 s; the lease began 3 s ago
    first, second = record.label.steps
    assert [(c.text, c.rating, c.flagged) for c in first.completions] == [(STEPS[0], 1, True)]
    assert first.chosen_completion == 0
    # PRM800K's phase 2: a pre-generated step's flag is null unless flagged.
    assert [(c.text, c.rating, c.flagged) for c in second.completions] == [
        (STEPS[1], -1, None),
        ("Then $2+2=4$.", 1, False),
        ("So $4$.", 0, False),
    ]
    assert second.chosen_completion is None


def test_overlap_reached_takes_the_solution_out_of_the_queue(session: Session) -> None:
    task, alice = lease(session, overlap=2)
    sent = submission([1, 0, 1], "solution")
    save(session, task, alice, sent)
    solution = session.get(Solution, task.solution_id, populate_existing=True)
    assert solution is not None
    assert (solution.completed_count, solution.queue_state) == (1, QueueState.OPEN.value)
    bob = make_user(session, "bob")
    second = next_task(session, bob)
    assert second.solution_id == task.solution_id and second.slot == 1
    save(session, second, bob, sent)
    session.refresh(solution)
    assert (solution.completed_count, solution.queue_state) == (2, QueueState.FULL.value)


def test_screening_and_quality_control_flags(session: Session) -> None:
    screening, newcomer = lease(
        session, "newcomer", approved=False, generation=SCREENING_GENERATION
    )
    saved = save(session, screening, newcomer, submission([1, 1, 1], "solution"))
    gold_solution = make_solution(session, STEPS)
    session.add(GoldLabel(solution_id=gold_solution.id, label_id=saved.label_id))
    session.flush()
    always_qc = QueueRules(lease=RULES.lease, overlap=1, qc_rate=1.0)
    bob = make_user(session, "bob")
    qc = next_task(session, bob, always_qc)
    assert qc.solution_id == gold_solution.id and qc.is_gold and qc.slot is None
    save(session, qc, bob, submission([1, -1], "found_error"))
    flags = session.execute(
        select(Label.is_initial_screening, Label.is_quality_control, Label.generation).order_by(
            Label.id
        )
    ).all()
    assert [tuple(row) for row in flags] == [(True, False, -1), (False, True, 0)]


def test_a_lease_taken_over_cannot_be_submitted(session: Session) -> None:
    task, alice = lease(session)
    bob = make_user(session, "bob")
    taken = next_task(session, bob, now=NOW + timedelta(hours=1))
    assert taken.assignment_id == task.assignment_id
    # The caller's transaction rolls back on the error, as the route's does.
    with pytest.raises(LeaseLost, match="no longer yours"), session.begin_nested():
        save(session, task, alice, submission([1, 1, 1], "solution"), now=None)
    assert session.scalar(select(func.count()).select_from(Label)) == 0
    # Bob, who holds it now, can.
    assert save(session, taken, bob, submission([1, 1, 1], "solution"), now=None).created


PHASE1_ALTERNATIVES = [["First, $1+1=2$."], ["Then $2+2=4$.", "Then $4$."], []]


def phase1_step(rating: int, alternatives: list[int], **choice: object) -> dict[str, object]:
    return {"rating": rating, "alternative_ratings": alternatives, **choice}


@pytest.mark.parametrize(
    ("steps", "reason", "message"),
    [
        ([phase1_step(1, [1], chosen=0)], "found_error", "end as a solution, or by giving up"),
        ([phase1_step(1, [], chosen=0)], "give_up", "rate all 2 candidates"),
        ([phase1_step(1, [1])], "give_up", "choose the candidate to continue with"),
        ([phase1_step(1, [-1], chosen=1)], "give_up", "not wrong"),
        (
            [phase1_step(1, [0], human_text="x" * (HUMAN_STEP_MAX_CHARS + 1))],
            "give_up",
            "step 1: your step has 5,001 characters, more than the 5,000 allowed: shorten it",
        ),
        ([phase1_step(0, [-1], chosen=0, human_text="x")], "give_up", "choose a candidate or"),
        ([phase1_step(1, [1], chosen=0)], "solution", "every step rated and continued"),
    ],
)
def test_phase1_rules(
    session: Session, steps: list[dict[str, object]], reason: str, message: str
) -> None:
    solution = make_solution(session, STEPS, alternatives=PHASE1_ALTERNATIVES)
    solution.style = "phase1"
    with pytest.raises(SubmissionError, match=message):
        check_submission(solution, submission([], reason, steps=steps, note="hard"))


def test_a_phase1_step_may_be_written_beside_a_positive_candidate(session: Session) -> None:
    # The candidates follow the data's earlier steps; after another choice none may follow.
    solution = make_solution(session, STEPS, alternatives=PHASE1_ALTERNATIVES)
    solution.style = "phase1"
    steps = [
        phase1_step(1, [1], chosen=1),
        phase1_step(1, [0, 0], human_text="  " + "y" * HUMAN_STEP_MAX_CHARS + "  "),
    ]
    check_submission(solution, submission([], "give_up", steps=steps, note="long"))


def test_a_phase1_label_keeps_choices_and_human_steps(session: Session) -> None:
    make_solution(session, STEPS, alternatives=PHASE1_ALTERNATIVES).style = "phase1"
    session.flush()
    labeler = make_user(session, "alice")
    task = next_task(session, labeler)
    steps = [
        phase1_step(0, [1], chosen=1, flagged=True),
        phase1_step(-1, [-1, 0], human_text="Then $2+2=4$, so far so good."),
        phase1_step(1, [], chosen=0),
    ]
    later = NOW + timedelta(seconds=1)
    save(session, task, labeler, submission([], "solution", steps=steps), now=later)
    out = io.StringIO()
    write_export(session, out, ExportFilter())
    record = prm800k.parse_line(out.getvalue())
    # Phase-1 labels export the question as PRM800K's phase 1 wrote it, and no generation.
    assert isinstance(record.question, prm800k.Phase1Question)
    assert record.generation is None
    first, second, third = record.label.steps
    assert [(c.text, c.rating, c.flagged) for c in first.completions] == [
        (STEPS[0], 0, True),
        ("First, $1+1=2$.", 1, False),
    ]
    assert first.chosen_completion == 1 and first.human_completion is None
    assert second.chosen_completion is None
    assert second.human_completion is not None
    assert second.human_completion.text == "Then $2+2=4$, so far so good."
    assert second.human_completion.source == "human"
    assert [c.rating for c in second.completions] == [-1, -1, 0]
    assert third.chosen_completion == 0
    assert record.label.finish_reason == "solution"


def test_a_quality_control_label_belongs_to_the_round_it_was_served_in(
    session: Session,
) -> None:
    from app.quality.questions import add_quality_control_to_generation
    from tests.labeling.test_queue import gold

    question = make_solution(session, STEPS, generation=0, queue_state=QueueState.FULL)
    gold(session, question.id)
    make_solution(session, STEPS, generation=5)
    add_quality_control_to_generation(session, 5)
    bob = make_user(session, "bob")
    task = next_task(session, bob, QueueRules(lease=RULES.lease, overlap=1, qc_rate=1.0))
    assert task.solution_id == question.id and task.is_gold
    saved = save(session, task, bob, submission([1, 1, 1], "solution"))
    label = session.get(Label, saved.label_id)
    assert label is not None
    assert (label.generation, label.is_quality_control, label.is_initial_screening) == (
        5,
        True,
        False,
    )


def stored_rows(session: Session, label_id: int) -> tuple[Any, ...]:
    """What a label stored, without the ids that differ between two labels."""
    label = session.get(Label, label_id)
    assert label is not None
    steps = session.execute(
        select(LabelStep.step_index, LabelStep.chosen_completion, LabelStep.human_completion)
        .where(LabelStep.label_id == label_id)
        .order_by(LabelStep.step_index)
    ).all()
    completions = session.execute(
        select(
            StepCompletion.step_index,
            StepCompletion.completion_index,
            StepCompletion.text,
            StepCompletion.rating,
            StepCompletion.flagged,
        )
        .where(StepCompletion.label_id == label_id)
        .order_by(StepCompletion.step_index, StepCompletion.completion_index)
    ).all()
    assignment = session.scalars(select(Assignment).where(Assignment.label_id == label_id)).one()
    solution = session.get(Solution, label.solution_id)
    assert solution is not None
    return (
        (label.timestamp, label.generation, label.total_time, label.finish_reason, label.note),
        (label.is_quality_control, label.is_initial_screening),
        [tuple(row) for row in steps],
        [tuple(row) for row in completions],
        (assignment.completed_at, solution.completed_count, solution.queue_state),
    )


def test_one_statement_stores_what_the_statements_in_turn_store(session: Session) -> None:
    # Postgres writes a label in one statement, SQLite one table at a time: from the same
    # LabelWrites, both must store the same rows.
    if session.get_bind().dialect.name != "postgresql":
        pytest.skip("the one-statement write is Postgres's")
    steps = [
        phase1_step(0, [1], chosen=1, flagged=True),
        phase1_step(-1, [-1, 0], human_text="Then $2+2=4$, so far so good."),
        phase1_step(1, [], chosen=0),
    ]
    sent = submission([], "solution", steps=steps, note=" checked twice ")
    label_ids = []
    for name, write in [
        ("in-turn", repository.write_label_in_turn),
        ("at-once", repository.write_label_at_once),
    ]:
        make_solution(session, STEPS, alternatives=PHASE1_ALTERNATIVES).style = "phase1"
        session.flush()
        labeler = make_user(session, name)
        task = next_task(session, labeler)
        writes = label_writes(task, labeler, sent, overlap=1, now=NOW + timedelta(seconds=1))
        label_id, completed = write(session.connection(), writes)
        assert label_id is not None and completed
        label_ids.append(label_id)
    in_turn, at_once = (stored_rows(session, label_id) for label_id in label_ids)
    assert at_once == in_turn
    assert len(in_turn[2]) == 3 and len(in_turn[3]) == 6 and in_turn[4][1:] == (1, "full")
