"""Many labelers asking at once never get more assignments of a solution than its overlap."""

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import Connection, Engine, select
from sqlalchemy.orm import Session

from app import auth
from app.db import core_autocommit, transaction
from app.labeling import submission
from app.labeling.queue import next_assignment
from app.labeling.submission import SubmissionInput
from app.models import Assignment, Label, User
from tests.factories import make_solution, make_user
from tests.labeling.test_queue import NOW, RULES
from tests.labeling.test_submission import STEPS

LABELERS = 50


def _all_ask_at_once(
    engine: Engine, labeler_ids: list[int], autocommit: bool = False
) -> list[int | None]:
    """Each labeler asks for a task at the same moment; the solution each got, if any. In
    a transaction, or as the labeling requests ask: each statement committing alone."""
    barrier = threading.Barrier(len(labeler_ids))

    def ask(labeler_id: int) -> int | None:
        barrier.wait()
        if autocommit:
            with core_autocommit(engine) as connection:
                labeler = _labeler(connection, labeler_id)
                assignment = next_assignment(connection, labeler, RULES, NOW)
        else:
            with transaction(engine) as session:
                user = session.get(User, labeler_id)
                assert user is not None
                assignment = next_assignment(session.connection(), user, RULES, NOW)
        return None if assignment is None else assignment.solution_id

    with ThreadPoolExecutor(max_workers=len(labeler_ids)) as pool:
        return list(pool.map(ask, labeler_ids))


def _labeler(connection: Connection, labeler_id: int) -> auth.Viewer:
    user = connection.execute(
        select(User.id, User.name, User.role, User.is_approved).where(User.id == labeler_id)
    ).one()
    return auth.Viewer(*user)


@pytest.mark.parametrize("autocommit", [False, True], ids=["transaction", "autocommit"])
def test_fifty_labelers_at_once_respect_overlap(engine: Engine, autocommit: bool) -> None:
    with transaction(engine) as session:
        for _ in range(10):
            make_solution(session, overlap=2)
        make_solution(session, overlap=5)
        labeler_ids = [make_user(session, f"labeler{i}").id for i in range(LABELERS)]

    results = _all_ask_at_once(engine, labeler_ids, autocommit)

    with Session(engine) as session:
        rows = session.execute(select(Assignment.solution_id, Assignment.labeler_id)).all()
        overlaps = dict(session.execute(select(Assignment.solution_id, Assignment.slot)).all())
    per_solution = Counter(solution_id for solution_id, _ in rows)
    capacity = 10 * 2 + 5
    assert len(rows) == capacity == sum(result is not None for result in results)
    assert len({labeler for _, labeler in rows}) == capacity
    assert sorted(per_solution.values()) == [2] * 10 + [5]
    assert Counter(r for r in results if r is not None) == per_solution
    assert overlaps  # every regular assignment took a slot


def test_labelers_who_lose_races_try_the_next_candidates(engine: Engine) -> None:
    # Fifty labelers racing for ten slots: those who lose a race try the next candidate,
    # so every slot is taken, and none twice.
    for round_ in range(3):
        with transaction(engine) as session:
            for _ in range(5):
                make_solution(session, overlap=2)
            labelers = [make_user(session, f"r{round_}-{i}").id for i in range(LABELERS)]
        results = _all_ask_at_once(engine, labelers)
        assert sum(result is not None for result in results) == 10
        assert sorted(Counter(r for r in results if r is not None).values()) == [2] * 5


def test_a_task_submitted_from_many_tabs_at_once_stores_one_label(engine: Engine) -> None:
    with transaction(engine) as session:
        make_solution(session, STEPS)
        labeler_id = make_user(session, "alice").id
    (solution_id,) = _all_ask_at_once(engine, [labeler_id], autocommit=True)
    assert solution_id is not None
    with Session(engine) as session:
        assignment_id = session.scalars(select(Assignment.id)).one()
    sent = SubmissionInput.model_validate(
        {"steps": [{"rating": 1}] * len(STEPS), "finish_reason": "solution", "total_time": 9}
    )
    tabs = 8
    barrier = threading.Barrier(tabs)

    def submit(_tab: int) -> submission.SavedLabel:
        barrier.wait()
        with core_autocommit(engine) as connection:
            task = submission.leased_task(connection, assignment_id)
            assert task is not None
            labeler = _labeler(connection, labeler_id)
            return submission.save_label(connection, task, labeler, sent, overlap=1, now=NOW)

    with ThreadPoolExecutor(max_workers=tabs) as pool:
        saved = list(pool.map(submit, range(tabs)))
    with Session(engine) as session:
        labels = session.scalars(select(Label.id)).all()
        completed = session.scalars(select(Assignment.label_id)).one()
    assert len(labels) == 1 and completed == labels[0]
    assert {label.label_id for label in saved} == set(labels)
    assert sum(label.created for label in saved) == 1
