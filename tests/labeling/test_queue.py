"""The queue rules: leases, expiry, overlap, quality control and the screening gate."""

import random
from datetime import datetime, timedelta

import pytest
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.auth import users
from app.labeling.queue import Lease, QueueRules
from app.models import (
    SCREENING_GENERATION,
    Assignment,
    GenerationQualityControl,
    GoldLabel,
    Label,
    QueueState,
    Role,
    Solution,
)
from tests.factories import make_label, make_solution, make_user, next_lease

NOW = datetime(2026, 11, 22, 12, 0, 0)
RULES = QueueRules(lease=timedelta(minutes=30), overlap=1, qc_rate=0.0)


def finish(session: Session, assignment: Lease, at: datetime = NOW) -> None:
    """Mark an assignment done, as a submitted label does."""
    session.execute(
        update(Assignment).where(Assignment.id == assignment.id).values(completed_at=at)
    )
    session.flush()


def test_priority_is_generation_then_queue_order(session: Session) -> None:
    later_generation = make_solution(session, generation=2)
    first = make_solution(session, generation=1)
    second = make_solution(session, generation=1)
    make_solution(session, queue_state=QueueState.NOT_QUEUED, generation=0)
    alice = make_user(session, "alice")
    order = []
    for _ in range(3):
        assignment = next_lease(session.connection(), alice, RULES, NOW)
        assert assignment is not None
        order.append(assignment.solution_id)
        finish(session, assignment)
    assert order == [first.id, second.id, later_generation.id]
    assert next_lease(session.connection(), alice, RULES, NOW) is None


def test_a_returning_labeler_gets_the_same_task(session: Session) -> None:
    make_solution(session)
    make_solution(session)
    alice = make_user(session, "alice")
    first = next_lease(session.connection(), alice, RULES, NOW)
    again = next_lease(session.connection(), alice, RULES, NOW + timedelta(minutes=29))
    assert first is not None and again is not None and again.id == first.id


def test_an_expired_lease_returns_the_task_to_the_queue(session: Session) -> None:
    solution = make_solution(session)
    alice, bob = make_user(session, "alice"), make_user(session, "bob")
    alices = next_lease(session.connection(), alice, RULES, NOW)
    assert alices is not None and alices.solution_id == solution.id
    assert next_lease(session.connection(), bob, RULES, NOW + timedelta(minutes=10)) is None
    later = NOW + timedelta(minutes=31)
    bobs = next_lease(session.connection(), bob, RULES, later)
    assert bobs is not None and bobs.solution_id == solution.id and bobs.id == alices.id
    assert bobs.labeler_id == bob.id and bobs.expires_at == later + RULES.lease
    # Alice's lease was taken over: she does not get the solution back.
    assert next_lease(session.connection(), alice, RULES, later) is None


def test_a_deactivated_labelers_task_goes_to_another_at_once(session: Session) -> None:
    solution = make_solution(session)
    alice, bob = make_user(session, "alice"), make_user(session, "bob")
    alices = next_lease(session.connection(), alice, RULES)
    assert alices is not None and next_lease(session.connection(), bob, RULES) is None
    users.deactivate(session, "alice")
    bobs = next_lease(session.connection(), bob, RULES)
    assert bobs is not None and bobs.solution_id == solution.id


def test_an_expired_lease_is_renewed_when_nobody_took_it(session: Session) -> None:
    make_solution(session)
    alice = make_user(session, "alice")
    first = next_lease(session.connection(), alice, RULES, NOW)
    later = NOW + timedelta(hours=2)
    again = next_lease(session.connection(), alice, RULES, later)
    assert first is not None and again is not None and again.id == first.id
    assert again.expires_at == later + RULES.lease


def test_overlap_gives_a_solution_to_that_many_distinct_labelers(session: Session) -> None:
    shared = make_solution(session, overlap=3)
    single = make_solution(session)
    labelers = [make_user(session, f"labeler{i}") for i in range(4)]
    got = [next_lease(session.connection(), labeler, RULES, NOW) for labeler in labelers]
    assert [a.solution_id for a in got if a] == [shared.id, shared.id, shared.id, single.id]
    assert len({a.slot for a in got[:3] if a}) == 3
    # Never twice to the same labeler, even after finishing it.
    assert got[0] is not None
    finish(session, got[0])
    assert next_lease(session.connection(), labelers[0], RULES, NOW) is None


def test_project_overlap_applies_without_a_per_solution_one(session: Session) -> None:
    solution = make_solution(session)
    rules = QueueRules(lease=RULES.lease, overlap=2, qc_rate=0.0)
    first = next_lease(session.connection(), make_user(session, "a"), rules, NOW)
    second = next_lease(session.connection(), make_user(session, "b"), rules, NOW)
    third = next_lease(session.connection(), make_user(session, "c"), rules, NOW)
    assert first and second and {first.solution_id, second.solution_id} == {solution.id}
    assert third is None


def test_quality_control_questions_mix_in_and_go_to_everyone(session: Session) -> None:
    regular = [make_solution(session) for _ in range(40)]
    gold = make_solution(session, queue_state=QueueState.FULL)
    admin = make_user(session, "admin", role=Role.ADMIN)
    label = Label(
        dedupe_key="gold",
        labeler_id=admin.id,
        problem_id=gold.problem_id,
        solution_id=gold.id,
        timestamp=NOW,
        finish_reason="solution",
    )
    session.add(label)
    session.flush()
    session.add(GoldLabel(solution_id=gold.id, label_id=label.id))
    session.flush()
    rules = QueueRules(lease=RULES.lease, overlap=1, qc_rate=0.25)
    rng = random.Random(7)
    for name in ("alice", "bob"):
        labeler = make_user(session, name)
        served = []
        for _ in range(12):
            assignment = next_lease(session.connection(), labeler, rules, NOW, rng)
            assert assignment is not None
            served.append(assignment.solution_id)
            finish(session, assignment)
        # Each labeler gets the QC question exactly once, among regular tasks.
        assert served.count(gold.id) == 1
        assert set(served) - {gold.id} <= {s.id for s in regular}


def test_new_labelers_get_screening_first_and_then_wait(session: Session) -> None:
    screening = [
        make_solution(session, generation=SCREENING_GENERATION, overlap=1) for _ in range(2)
    ]
    regular = make_solution(session)
    newcomer = make_user(session, "newcomer", approved=False)
    other = make_user(session, "other", approved=False)
    served = []
    for _ in range(2):
        assignment = next_lease(session.connection(), newcomer, RULES, NOW)
        assert assignment is not None
        served.append(assignment.solution_id)
        finish(session, assignment)
    assert served == [s.id for s in screening]
    assert next_lease(session.connection(), newcomer, RULES, NOW) is None
    # Screening is shared: overlap does not stop the next newcomer.
    other_first = next_lease(session.connection(), other, RULES, NOW)
    assert other_first is not None and other_first.solution_id == screening[0].id
    # Once approved, regular tasks open; screening questions are not regular tasks.
    newcomer.is_approved = True
    session.flush()
    approved = next_lease(session.connection(), newcomer, RULES, NOW)
    assert approved is not None and approved.solution_id == regular.id


def test_marking_quality_control_checks_the_gold_label(session: Session) -> None:
    from app.quality.questions import mark_quality_control, unmark_quality_control

    solution, other = make_solution(session), make_solution(session)
    admin = make_user(session, "admin", role=Role.ADMIN)
    unrated = make_label(session, admin, solution, [], finish_reason="give_up")
    with pytest.raises(ValueError, match="rates no step"):
        mark_quality_control(session, solution.id, unrated.id)
    label = make_label(session, admin, solution, [[1], [1]])
    with pytest.raises(ValueError, match="is not a label of solution"):
        mark_quality_control(session, other.id, label.id)
    with pytest.raises(LookupError, match="there is no label"):
        mark_quality_control(session, solution.id, label.id + 1000)
    mark_quality_control(session, solution.id, label.id)
    rules = QueueRules(lease=RULES.lease, overlap=1, qc_rate=1.0)
    served = next_lease(session.connection(), make_user(session, "alice"), rules, NOW)
    assert served is not None and served.solution_id == solution.id
    unmark_quality_control(session, solution.id)
    with pytest.raises(LookupError, match="not a quality-control question"):
        unmark_quality_control(session, solution.id)


def gold(session: Session, solution_id: int, admin_name: str = "qc-admin") -> None:
    """Mark the solution a QC question, with an admin's label as its gold label."""
    from app.quality.questions import mark_quality_control

    solution = session.get(Solution, solution_id)
    assert solution is not None
    admin = make_user(session, admin_name, role=Role.ADMIN)
    label = make_label(session, admin, solution, [[1] for _ in solution.steps or [None]])
    mark_quality_control(session, solution_id, label.id)


def test_quality_control_is_answered_once_per_generation(session: Session) -> None:
    from app.quality.questions import add_quality_control_to_generation

    question = make_solution(session, queue_state=QueueState.FULL)
    gold(session, question.id)
    first_generation = [make_solution(session, generation=1) for _ in range(2)]
    assert add_quality_control_to_generation(session, 1) == 1
    always_qc = QueueRules(lease=RULES.lease, overlap=1, qc_rate=1.0)
    alice = make_user(session, "alice")

    def take() -> Lease:
        lease = next_lease(session.connection(), alice, always_qc, NOW)
        assert lease is not None
        finish(session, lease)
        return lease

    served = take()
    assert (served.solution_id, served.qc_generation) == (question.id, 1)
    # Answered in generation 1: regular tasks of generation 1 until it is labeled.
    assert take().solution_id == first_generation[0].id
    second_generation = make_solution(session, generation=2)
    assert add_quality_control_to_generation(session, 2) == 1
    assert take().solution_id == first_generation[1].id
    session.execute(
        update(Solution).where(Solution.generation == 1).values(queue_state=QueueState.FULL.value)
    )
    # Generation 2 is being labeled now: its round serves the question again.
    again = take()
    assert (again.solution_id, again.qc_generation) == (question.id, 2)
    assert take().solution_id == second_generation.id


def test_a_question_marked_later_joins_the_newest_generation(session: Session) -> None:
    from app.quality.questions import add_quality_control_to_generation, unmark_quality_control

    screening = make_solution(session, generation=SCREENING_GENERATION)
    gold(session, screening.id, "admin-1")
    assert add_quality_control_to_generation(session, 3) == 0  # screening is not QC
    later = make_solution(session, queue_state=QueueState.FULL)
    gold(session, later.id, "admin-2")
    rounds = session.scalars(select(GenerationQualityControl.generation)).all()
    assert rounds == []  # no round yet: no generation had QC questions
    add_quality_control_to_generation(session, 4)
    another = make_solution(session, queue_state=QueueState.FULL)
    gold(session, another.id, "admin-3")
    rows = session.execute(
        select(GenerationQualityControl.generation, GenerationQualityControl.solution_id)
    ).all()
    assert sorted(rows) == sorted([(4, later.id), (4, another.id)])
    unmark_quality_control(session, another.id)
    assert session.scalars(select(GenerationQualityControl.solution_id)).all() == [later.id]


def test_an_open_qc_question_does_not_count_as_the_generation_being_labeled(
    session: Session,
) -> None:
    from app.quality.questions import add_quality_control_to_generation

    question = make_solution(session, generation=0)  # still open in the queue
    gold(session, question.id)
    make_solution(session, generation=3)
    add_quality_control_to_generation(session, 3)
    always_qc = QueueRules(lease=RULES.lease, overlap=1, qc_rate=1.0)
    served = next_lease(session.connection(), make_user(session, "alice"), always_qc, NOW)
    # Generation 3 is being labeled (the question's own generation 0 is not): its round.
    assert served is not None and (served.solution_id, served.qc_generation) == (question.id, 3)
