"""The task queue: which solution a labeler labels next, leased for a while.

Rules, in order:
1. A labeler with an unfinished task gets it back (its lease renewed if it ran out and no
   one else took the task meanwhile). ``leased_at`` stays when a lease is renewed: it is
   when the labeler started, which bounds the time they can claim to have spent.
2. A labeler not yet approved gets the screening questions (generation -1), then waits.
3. At ``qc_rate``, a quality-control question (a solution with a gold label) the labeler
   has not answered yet.
4. Otherwise the first open solution by generation, then queue order, that this labeler
   has not labeled and that has a free slot: fewer than ``overlap`` labelers hold a live
   lease on it or have finished it. An expired lease's slot can be taken over.

Each regular assignment takes a numbered slot below the solution's overlap, and (solution,
slot) is unique, so no database, under any concurrency, hands out more than the overlap.
On Postgres, candidate rows are locked with SKIP LOCKED so concurrent requests spread out
instead of colliding; on SQLite, write transactions are serialized (app/db.py).
"""

import random
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, Select, exists, func, insert, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.db import rows_changed
from app.models import (
    SCREENING_GENERATION,
    Assignment,
    GoldLabel,
    QueueState,
    Role,
    Solution,
    User,
    utc_now,
)

CANDIDATES_PER_TRY = 8


@dataclass(frozen=True)
class QueueRules:
    lease: timedelta
    overlap: int
    qc_rate: float


def next_assignment(
    session: Session,
    labeler: User,
    rules: QueueRules,
    now: datetime | None = None,
    rng: random.Random | None = None,
) -> Assignment | None:
    """The labeler's current task, or a new one; None when nothing is left for them."""
    now = now or utc_now()
    current = _current_assignment(session, labeler, rules, now)
    if current is not None:
        return current
    if not _is_approved(labeler):
        return _assign_shared(session, labeler, rules, now, _screening_solutions())
    if (rng or random).random() < rules.qc_rate:
        quality_control = _assign_shared(session, labeler, rules, now, _gold_solutions())
        if quality_control is not None:
            return quality_control
    return _assign_regular(session, labeler, rules, now)


def _is_approved(user: User) -> bool:
    return user.is_approved or user.role == Role.ADMIN.value


def _current_assignment(
    session: Session, labeler: User, rules: QueueRules, now: datetime
) -> Assignment | None:
    current = session.scalar(
        select(Assignment)
        .where(Assignment.labeler_id == labeler.id, Assignment.completed_at.is_(None))
        .order_by(Assignment.id)
        .limit(1)
    )
    if current is None or current.expires_at > now:
        return current
    # Expired: renew it unless another labeler took the slot over in the meantime.
    renewed = extend_lease(session, current, rules, now)
    session.refresh(current)
    return current if renewed else None


def extend_lease(
    session: Session, assignment: Assignment, rules: QueueRules, now: datetime | None = None
) -> bool:
    """Keep an open task with its labeler while their page is open; False if it is gone."""
    now = now or utc_now()
    extended = session.execute(
        update(Assignment)
        .where(
            Assignment.id == assignment.id,
            Assignment.labeler_id == assignment.labeler_id,
            Assignment.completed_at.is_(None),
        )
        .values(expires_at=now + rules.lease)
    )
    return rows_changed(extended) == 1


def _not_mine(labeler: User) -> ColumnElement[bool]:
    return ~exists().where(
        Assignment.solution_id == Solution.id, Assignment.labeler_id == labeler.id
    )


def _screening_solutions() -> Select[int]:
    return select(Solution.id).where(
        Solution.generation == SCREENING_GENERATION,
        Solution.queue_state != QueueState.NOT_QUEUED.value,
    )


def _gold_solutions() -> Select[int]:
    return select(Solution.id).join(GoldLabel, GoldLabel.solution_id == Solution.id)


def _assign_shared(
    session: Session, labeler: User, rules: QueueRules, now: datetime, candidates: Select[int]
) -> Assignment | None:
    """Screening and QC questions go to every labeler once: no slot, no overlap."""
    solution_id = session.scalar(
        candidates.where(_not_mine(labeler)).order_by(Solution.id).limit(1)
    )
    if solution_id is None:
        return None
    return _claim(session, labeler, rules, now, solution_id, slot=None)


def _assign_regular(
    session: Session, labeler: User, rules: QueueRules, now: datetime
) -> Assignment | None:
    overlap = func.coalesce(Solution.overlap, rules.overlap)
    live = or_(Assignment.completed_at.is_not(None), Assignment.expires_at > now)
    taken = (
        select(func.count())
        .where(Assignment.solution_id == Solution.id, Assignment.slot.is_not(None), live)
        .correlate(Solution)
        .scalar_subquery()
    )
    candidates = (
        select(Solution.id, overlap)
        .where(
            Solution.queue_state == QueueState.OPEN.value,
            Solution.generation != SCREENING_GENERATION,
            ~exists().where(GoldLabel.solution_id == Solution.id),
            _not_mine(labeler),
            taken < overlap,
        )
        .order_by(Solution.generation, Solution.id)
    )
    # Each try takes the head of the queue that no concurrent request has locked (Postgres
    # skips their rows; SQLite serializes writers anyway), so requests spread over the
    # queue instead of queueing behind one row. A row this request locked itself is not
    # skipped, hence the exclusion of those tried. The slot constraint settles any race.
    # FOR NO KEY UPDATE (key_share) leaves the foreign-key checks of inserts unblocked.
    # When every candidate is locked by others, the first try waits for the head instead:
    # its holder may leave a slot free, and "nothing to label" should mean nothing. Only
    # the first: a request that holds a lock and waits for another could deadlock.
    tried: list[int] = []
    for _ in range(CANDIDATES_PER_TRY):
        query = (candidates.where(Solution.id.not_in(tried)) if tried else candidates).limit(1)
        locked = query.with_for_update(of=Solution, skip_locked=True, key_share=True)
        row = session.execute(locked).first()
        if row is None and not tried:
            row = session.execute(query.with_for_update(of=Solution, key_share=True)).first()
        if row is None:
            return None
        solution_id, solution_overlap = row
        assignment = _claim_slot(session, labeler, rules, now, solution_id, solution_overlap)
        if assignment is not None:
            return assignment
        tried.append(solution_id)
    return None


def _claim_slot(
    session: Session,
    labeler: User,
    rules: QueueRules,
    now: datetime,
    solution_id: int,
    overlap: int,
) -> Assignment | None:
    """A free slot of the solution, or one whose lease expired; None if none is left."""
    slots = session.execute(
        select(
            Assignment.id, Assignment.slot, Assignment.completed_at, Assignment.expires_at
        ).where(Assignment.solution_id == solution_id, Assignment.slot.is_not(None))
    ).all()
    used = {row.slot for row in slots}
    for slot in range(overlap):
        if slot not in used:
            assignment = _claim(session, labeler, rules, now, solution_id, slot)
            if assignment is not None:
                return assignment
    for row in slots:
        if row.completed_at is None and row.expires_at <= now:
            taken_over = session.execute(
                update(Assignment)
                .where(
                    Assignment.id == row.id,
                    Assignment.completed_at.is_(None),
                    Assignment.expires_at <= now,
                )
                .values(labeler_id=labeler.id, leased_at=now, expires_at=now + rules.lease)
            )
            if rows_changed(taken_over) == 1:
                return session.get(Assignment, row.id, populate_existing=True)
    return None


def _claim(
    session: Session,
    labeler: User,
    rules: QueueRules,
    now: datetime,
    solution_id: int,
    slot: int | None,
) -> Assignment | None:
    """Insert the assignment; None if a concurrent request took that slot first."""
    try:
        with session.begin_nested():
            assignment_id = session.scalar(
                insert(Assignment)
                .values(
                    solution_id=solution_id,
                    labeler_id=labeler.id,
                    slot=slot,
                    leased_at=now,
                    expires_at=now + rules.lease,
                )
                .returning(Assignment.id)
            )
    except IntegrityError:
        return None
    return session.get(Assignment, assignment_id)
