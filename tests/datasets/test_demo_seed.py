"""What ``steplabel seed-demo`` leaves for the two demo labelers: the head of the queue shared
by both, and quality-control questions whose gold labels are the demo admin's."""

import re
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import select, update
from sqlalchemy.orm import Session, selectinload

from app import prm800k
from app.admin.prm import pool_status
from app.core.config import Settings
from app.datasets.demo import demo_problems, demo_slips
from app.datasets.demo_seed import (
    ALTERNATIVE_TASKS,
    ALTERNATIVES_AT,
    DEMO_PROBLEMS,
    PHASE1_AFTER,
    PHASE1_TASKS,
    QUALITY_CONTROL_QUESTIONS,
    QUEUED_PER_PROBLEM,
    SHARED_SOLUTIONS,
    seed,
)
from app.datasets.export import ExportFilter, iter_records
from app.labeling.queue import Lease, QueueRules
from app.labeling.submission import (
    SavedLabel,
    SubmissionError,
    SubmissionInput,
    save_label,
)
from app.models import (
    Assignment,
    AuditEntry,
    GoldLabel,
    Label,
    LabelStep,
    Problem,
    QueueState,
    Solution,
    TaskStyle,
    User,
)
from app.quality.scoring import labeler_quality
from tests.factories import make_label, next_lease, task_of
from tests.prm800k_shapes import expect_as_the_real_lines

NOW = datetime(2026, 11, 23, 9, 0)
RULES = QueueRules(lease=timedelta(minutes=30), overlap=1, qc_rate=0.0)


def demo_users(session: Session) -> dict[str, User]:
    return {user.name: user for user in session.scalars(select(User))}


def finish(session: Session, lease: Lease) -> None:
    session.execute(update(Assignment).where(Assignment.id == lease.id).values(completed_at=NOW))


def test_the_head_of_the_queue_goes_to_both_labelers(session: Session) -> None:
    report = seed(session)
    assert report.shared == SHARED_SOLUTIONS
    gold = set(session.scalars(select(GoldLabel.solution_id)))
    queue = session.execute(
        select(Solution.id, Solution.overlap)
        .where(Solution.queue_state == QueueState.OPEN.value, Solution.id.not_in(gold))
        .order_by(Solution.generation, Solution.id)
    ).all()
    overlaps = [overlap for _, overlap in queue]
    assert overlaps[:SHARED_SOLUTIONS] == [2] * SHARED_SOLUTIONS
    assert set(overlaps[SHARED_SOLUTIONS:]) == {None}  # the project's default

    users = demo_users(session)
    for position in range(SHARED_SOLUTIONS + 1):
        alices = next_lease(session.connection(), users["alice"], RULES, NOW)
        bobs = next_lease(session.connection(), users["bob"], RULES, NOW)
        assert alices is not None and bobs is not None
        if position < SHARED_SOLUTIONS:
            assert alices.solution_id == bobs.solution_id == queue[position].id
        else:
            assert alices.solution_id != bobs.solution_id
        finish(session, alices)
        finish(session, bobs)


def test_the_demo_users_are_created_in_the_audit_log(session: Session) -> None:
    """As every other way of creating a user records it; seeding again records nothing."""
    seed(session)
    seed(session)
    created = session.execute(
        select(AuditEntry.actor, AuditEntry.target, AuditEntry.after)
        .where(AuditEntry.action == "user.create")
        .order_by(AuditEntry.id)
    ).all()
    assert created == [
        ("command line", f"user {name}", {"role": role, "is_approved": True, "password": "set"})
        for name, role in [("admin", "admin"), ("alice", "labeler"), ("bob", "labeler")]
    ]


def gold_questions(session: Session) -> list[tuple[Solution, Label]]:
    """The demo's QC questions and their gold labels, with steps and problems loaded."""
    rows = session.execute(
        select(Solution, Label)
        .join(GoldLabel, GoldLabel.solution_id == Solution.id)
        .join(Label, Label.id == GoldLabel.label_id)
        .options(
            selectinload(Solution.problem),
            selectinload(Label.steps).selectinload(LabelStep.completions),
        )
        .order_by(Solution.id)
    )
    return [(solution, label) for solution, label in rows]


def test_quality_control_questions_carry_the_admins_answer_key(session: Session) -> None:
    report = seed(session)
    users = demo_users(session)
    questions = gold_questions(session)
    assert report.quality_control == len(questions) == QUALITY_CONTROL_QUESTIONS
    finishes = []
    for solution, gold in questions:
        assert gold.labeler_id == users["admin"].id
        assert (solution.queue_state, solution.generation) == (QueueState.OPEN.value, 0)
        ratings = [step.completions[0].rating for step in gold.steps]
        texts = [step.completions[0].text for step in gold.steps]
        assert texts == (solution.steps or [])[: len(texts)]
        right = solution.answer == solution.problem.ground_truth_answer
        if gold.finish_reason == "found_error":
            assert not right and ratings[-1] == -1 and set(ratings[:-1]) <= {1}
        else:
            assert right and ratings == [1] * len(solution.steps or [])
        finishes.append(gold.finish_reason)
    assert sorted(finishes) == ["found_error", "solution"]


def test_the_gold_labels_export_as_prm800k_writes_its_lines(session: Session) -> None:
    # A time spent, as every real line has, and a pre-generated step's flag null.
    seed(session)
    records = list(iter_records(session, ExportFilter(labelers=["admin"])))
    assert len(records) == QUALITY_CONTROL_QUESTIONS
    for record in records:
        assert isinstance(record["label"]["total_time"], int)
        expect_as_the_real_lines(record, phase1=False)


def demo_settings() -> Settings:
    """The settings ``make run`` serves the demo with: scripts/run.sh's defaults."""
    script = (Path(__file__).parents[2] / "scripts" / "run.sh").read_text()
    defaults = re.findall(r'export STEPLABEL_(\w+)="\$\{STEPLABEL_\1:-([^}]*)\}"', script)
    assert defaults, "run.sh sets the demo's defaults"
    return Settings(**{name.lower(): value for name, value in defaults})


def test_the_demo_pool_fills_the_demos_generations(session: Session) -> None:
    # The overview's "pool runs low" is a warning a demo admin could not act on. Graded as
    # the worker's first run grades it: the demo writes a right answer as its ground truth.
    seed(session)
    unlabeled = select(Solution.id).where(Solution.queue_state == QueueState.NOT_QUEUED.value)
    right = (
        Solution.answer
        == select(Problem.ground_truth_answer)
        .where(Problem.id == Solution.problem_id)
        .scalar_subquery()
    )
    session.execute(update(Solution).where(Solution.id.in_(unlabeled)).values(answer_correct=right))
    settings = demo_settings()
    pool = pool_status(session, settings)
    assert not pool.low and not pool.wrong_answers_low, pool
    assert pool.next_generation == settings.generation_max_size
    assert pool.left >= 2 * pool.next_generation, "the pool fills more than the next one"


def test_quality_control_moves_when_a_demo_labeler_answers(session: Session) -> None:
    seed(session)
    users = demo_users(session)
    every_task_a_question = QueueRules(RULES.lease, overlap=1, qc_rate=1.0)
    served = next_lease(session.connection(), users["alice"], every_task_a_question, NOW)
    questions = {solution.id: (solution, gold) for solution, gold in gold_questions(session)}
    assert served is not None and served.solution_id in questions
    before = {row.name: row for row in labeler_quality(session, 0.8)}["alice"]
    assert before.quality_control.answers == 0 and before.passes_quality_control is None

    solution, gold = questions[served.solution_id]
    answer = [[step.completions[0].rating] for step in gold.steps]
    make_label(
        session,
        users["alice"],
        solution,
        answer,
        finish_reason=gold.finish_reason,
        quality_control=True,
    )
    after = {row.name: row for row in labeler_quality(session, 0.8)}["alice"]
    assert after.quality_control.answers == 1
    assert after.quality_control.step_accuracy == 1.0 and after.passes_quality_control is True


def test_a_new_labeler_meets_phase1_tasks_early_and_can_write_a_step(session: Session) -> None:
    report = seed(session)
    assert report.phase1 == PHASE1_TASKS
    users = demo_users(session)
    served = []
    for _ in range(PHASE1_AFTER + PHASE1_TASKS):
        lease = next_lease(session.connection(), users["alice"], RULES, NOW)
        assert lease is not None
        served.append((lease, session.get(Solution, lease.solution_id)))
        finish(session, lease)
    styles = [solution.style for _, solution in served if solution is not None]
    assert styles == [TaskStyle.PHASE2.value] * PHASE1_AFTER + [TaskStyle.PHASE1.value] * 3
    assert "3 phase-1 tasks" in report.describe()

    # The task where no candidate is right at the slip: rate, choose, write, submit.
    lease, solution = next(
        (lease, solution)
        for lease, solution in served
        if solution is not None
        and solution.style == TaskStyle.PHASE1.value
        and [] in (solution.alternatives or [])
    )
    alternatives = solution.alternatives or []
    slip = alternatives.index([])
    steps = [
        {"rating": 1, "alternative_ratings": [1] * len(others), "chosen": 0}
        for others in alternatives[:slip]
    ]
    steps.append({"rating": -1, "human_text": "My own step."})
    session.execute(update(Assignment).where(Assignment.id == lease.id).values(completed_at=None))
    task = task_of(session.connection(), users["alice"], lease)
    assert task is not None
    give_up = {"steps": steps, "finish_reason": "give_up", "total_time": 1000, "note": "demo"}
    saved = save_label(
        session.connection(),
        task,
        users["alice"],
        SubmissionInput.model_validate(give_up),
        overlap=1,
    )
    [record] = [
        r
        for r in iter_records(session, ExportFilter(labelers=["alice"]))
        if r["label"]["finish_reason"] == "give_up"
    ]
    assert saved.created and prm800k.Record.model_validate(record)
    assert record["label"]["steps"][slip]["human_completion"] == {
        "text": "My own step.",
        "rating": None,
        "source": "human",
        "flagged": False,
    }
    assert record["label"]["steps"][slip]["chosen_completion"] is None


def test_a_new_labeler_meets_alternatives_early_and_the_export_rates_them(
    session: Session,
) -> None:
    report = seed(session)
    phase2 = session.scalars(select(Solution).where(Solution.style == TaskStyle.PHASE2.value))
    offering = [solution for solution in phase2 if any(solution.alternatives or [])]
    assert report.alternatives == len(offering) == ALTERNATIVE_TASKS
    assert f"{ALTERNATIVE_TASKS} with alternatives" in report.describe()
    users = demo_users(session)
    for _ in range(ALTERNATIVES_AT):
        done = next_lease(session.connection(), users["alice"], RULES, NOW)
        assert done is not None
        finish(session, done)
    lease = next_lease(session.connection(), users["alice"], RULES, NOW)
    assert lease is not None
    task = task_of(session.connection(), users["alice"], lease)
    assert task is not None and task.style == TaskStyle.PHASE2.value

    # The demo's answer key: the slip's step, and a rating for each of its alternatives.
    problems = demo_problems(count=DEMO_PROBLEMS)
    slip = demo_slips(problems, per_problem=QUEUED_PER_PROBLEM)[tuple(task.steps or [])]
    assert slip is not None
    alternatives = (task.alternatives or [])[slip.index]
    assert len(alternatives) == 2 and set(alternatives) == set(slip.alternatives)
    steps: list[dict[str, object]] = [{"rating": 1} for _ in range(slip.index)]
    steps.append({"rating": -1})
    found = {"steps": steps, "finish_reason": "found_error", "total_time": 1000}

    def submit() -> SavedLabel:
        body = SubmissionInput.model_validate(found)
        return save_label(session.connection(), task, users["alice"], body, overlap=1)

    with pytest.raises(SubmissionError, match="rate its 2 alternative completions"):
        submit()
    ratings = [slip.alternatives[text] for text in alternatives]
    steps[-1]["alternative_ratings"] = ratings
    saved = submit()

    [record] = iter_records(session, ExportFilter(labelers=["alice"]))
    assert saved.created and prm800k.Record.model_validate(record)
    assert record["label"]["finish_reason"] == "found_error"
    assert record["label"]["steps"][slip.index] == {
        "completions": [
            {"text": (task.steps or [])[slip.index], "rating": -1, "flagged": None},
            *(
                {"text": text, "rating": rating, "flagged": False}
                for text, rating in zip(alternatives, ratings, strict=True)
            ),
        ],
        "human_completion": None,
        "chosen_completion": None,
    }
