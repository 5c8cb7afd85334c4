"""Many labelers asking at once never get more assignments of a solution than its overlap."""

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from app.db import transaction
from app.labeling.queue import next_assignment
from app.models import Assignment, User
from tests.factories import make_solution, make_user
from tests.labeling.test_queue import NOW, RULES

LABELERS = 50


def test_fifty_labelers_at_once_respect_overlap(engine: Engine) -> None:
    with transaction(engine) as session:
        for _ in range(10):
            make_solution(session, overlap=2)
        make_solution(session, overlap=5)
        labeler_ids = [make_user(session, f"labeler{i}").id for i in range(LABELERS)]
    barrier = threading.Barrier(LABELERS)

    def ask(labeler_id: int) -> int | None:
        barrier.wait()
        with transaction(engine) as session:
            labeler = session.get(User, labeler_id)
            assert labeler is not None
            assignment = next_assignment(session.connection(), labeler, RULES, NOW)
            return None if assignment is None else assignment.solution_id

    with ThreadPoolExecutor(max_workers=LABELERS) as pool:
        results = list(pool.map(ask, labeler_ids))

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
