"""Many labelers asking at once never get more assignments of a solution than its overlap."""

import dataclasses
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import Engine, select, text
from sqlalchemy.orm import Session

from app.auth import sessions as auth
from app.core.db import core_autocommit, transaction
from app.labeling import repository, service, submission
from app.labeling.submission import SubmissionInput
from app.models import Assignment, Label, Solution, User
from tests.factories import make_solution, make_user, next_lease
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
                _, assignment = service.next_lease(connection, _login(labeler_id), NOW, RULES)
        else:
            with transaction(engine) as session:
                user = session.get(User, labeler_id)
                assert user is not None
                assignment = next_lease(session.connection(), user, RULES, NOW)
        return None if assignment is None else assignment.solution_id

    with ThreadPoolExecutor(max_workers=len(labeler_ids)) as pool:
        return list(pool.map(ask, labeler_ids))


def _login(labeler_id: int) -> auth.Login:
    """A request's login of a user made by the test (whose session version is 0)."""
    return auth.Login(labeler_id, 0, {})


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
            login = _login(labeler_id)
            return service.submit_label(connection, login, assignment_id, sent, NOW, RULES)

    with ThreadPoolExecutor(max_workers=tabs) as pool:
        saved = list(pool.map(submit, range(tabs)))
    with Session(engine) as session:
        labels = session.scalars(select(Label.id)).all()
        completed = session.scalars(select(Assignment.label_id)).one()
    assert len(labels) == 1 and completed == labels[0]
    assert {label.label_id for label in saved} == set(labels)
    assert sum(label.created for label in saved) == 1


def _waiting_for_locks(engine: Engine, count: int) -> None:
    """Return once ``count`` sessions of the test's database wait for a lock."""
    deadline = time.monotonic() + 10
    with engine.connect() as connection:
        while time.monotonic() < deadline:
            waiting = connection.scalar(
                text(
                    "SELECT count(*) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND wait_event_type = 'Lock'"
                )
            )
            connection.rollback()
            if waiting == count:
                return
            time.sleep(0.01)
    raise AssertionError(f"{count} sessions never waited for a lock")


def test_a_claim_and_a_submit_meeting_at_a_solution_do_not_deadlock(engine: Engine) -> None:
    # A claim holds the solution's row while it inserts its slot, whose count came from a
    # snapshot taken before it waited for that row. A slot taken meanwhile (a claim after a
    # lost race takes one without the row) whose holder submits at once: the submit must
    # not hold that slot's assignment while it waits for the solution's row, or the claim's
    # insert waits for the submit, and the submit for the claim.
    if engine.dialect.name != "postgresql":
        pytest.skip("SQLite's writers take turns: no two of them wait for each other")
    with transaction(engine) as session:
        solution_id = make_solution(session, STEPS, overlap=2).id
        alice_id, bob_id = make_user(session, "alice").id, make_user(session, "bob").id
    sent = SubmissionInput.model_validate(
        {"steps": [{"rating": 1}] * len(STEPS), "finish_reason": "solution", "total_time": 9}
    )
    until = NOW + RULES.lease

    def bobs_claim() -> repository.Head | None:
        with core_autocommit(engine) as connection:
            return repository.claim_head(connection, bob_id, 2, NOW, until, wait=True)

    def alices_submit(assignment_id: int) -> submission.SavedLabel:
        with core_autocommit(engine) as connection:
            rules = dataclasses.replace(RULES, overlap=2)
            return service.submit_label(
                connection, _login(alice_id), assignment_id, sent, NOW, rules
            )

    with ThreadPoolExecutor(max_workers=2) as pool, engine.connect() as third:
        # A third session holds the solution's row (another labeler's submit or claim).
        third.execute(
            select(Solution.id).where(Solution.id == solution_id).with_for_update(key_share=True)
        )
        claim = pool.submit(bobs_claim)
        _waiting_for_locks(engine, 1)
        with core_autocommit(engine) as connection:
            alices = repository.insert_lease(connection, solution_id, alice_id, 0, NOW, until)
        assert alices is not None
        submit = pool.submit(alices_submit, alices.id)
        _waiting_for_locks(engine, 2)
        third.rollback()
        saved, head = submit.result(timeout=30), claim.result(timeout=30)
    assert saved.created
    assert head is not None and head.solution_id == solution_id and head.claimed_id is None
    with Session(engine) as session:
        assignments = session.execute(select(Assignment.labeler_id, Assignment.label_id)).all()
    assert assignments == [(alice_id, saved.label_id)]
