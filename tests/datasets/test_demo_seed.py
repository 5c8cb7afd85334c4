"""What ``steplabel seed-demo`` leaves for the two demo labelers: the head of the queue shared
by both, and quality-control questions whose gold labels are the demo admin's."""

from datetime import datetime, timedelta

from sqlalchemy import select, update
from sqlalchemy.orm import Session, selectinload

from app.admin.quality import labeler_quality
from app.datasets.demo_seed import QUALITY_CONTROL_QUESTIONS, SHARED_SOLUTIONS, seed
from app.labeling.queue import Lease, QueueRules, next_assignment
from app.models import Assignment, GoldLabel, Label, LabelStep, QueueState, Solution, User
from tests.factories import make_label

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
        alices = next_assignment(session.connection(), users["alice"], RULES, NOW)
        bobs = next_assignment(session.connection(), users["bob"], RULES, NOW)
        assert alices is not None and bobs is not None
        if position < SHARED_SOLUTIONS:
            assert alices.solution_id == bobs.solution_id == queue[position].id
        else:
            assert alices.solution_id != bobs.solution_id
        finish(session, alices)
        finish(session, bobs)


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


def test_quality_control_moves_when_a_demo_labeler_answers(session: Session) -> None:
    seed(session)
    users = demo_users(session)
    every_task_a_question = QueueRules(RULES.lease, overlap=1, qc_rate=1.0)
    served = next_assignment(session.connection(), users["alice"], every_task_a_question, NOW)
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
