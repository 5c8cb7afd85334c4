"""The task queue: which solution a labeler labels next, leased for a while.

Rules, in order:
1. A labeler with an unfinished task gets it back (its lease renewed if it ran out and no
   one else took the task meanwhile). ``leased_at`` stays when a lease is renewed: it is
   when the labeler started, which bounds the time they can claim to have spent.
2. A labeler not yet approved gets the screening questions (generation -1), then waits.
3. At ``qc_rate``, a quality-control question (a solution with a gold label) the labeler
   has not answered yet: once the worker has opened generations, one of the questions added
   to the generation being labeled (the lowest with open solutions), once per generation,
   and the label belongs to that generation; before, any gold solution, once.
4. Otherwise the first open solution by generation, then queue order, that this labeler
   has not labeled and that has a free slot: fewer than ``overlap`` labelers hold a live
   lease on it or have finished it. An expired lease's slot can be taken over.

Each regular assignment takes a numbered slot below the solution's overlap, and (solution,
slot) is unique, so no database, under any concurrency, hands out more than the overlap.
On Postgres, candidate rows are locked with SKIP LOCKED so concurrent requests spread out
instead of colliding; on SQLite, write transactions are serialized (app/db.py).

Every labeler asks for a task after every submit, so the statements are Core, built once,
and a new task usually costs three: the current lease, the head of the queue, the insert
(on Postgres two: the head is claimed by the statement that finds it).
"""

import random
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Protocol

from sqlalchemy import (
    ColumnElement,
    Connection,
    DateTime,
    Insert,
    Integer,
    Select,
    and_,
    bindparam,
    exists,
    func,
    or_,
    select,
    true,
    update,
)

from app.models import (
    ASSIGNMENTS,
    GENERATION_QUALITY_CONTROL,
    GOLD_LABELS,
    PROBLEMS,
    SCREENING_GENERATION,
    SOLUTIONS,
    QueueState,
    Role,
    utc_now,
)
from app.statements import INSERTS, AnyRow, rows_changed, run

CANDIDATES_PER_TRY = 8


@dataclass(frozen=True)
class QueueRules:
    lease: timedelta
    overlap: int
    qc_rate: float


class Labeler(Protocol):
    """Who asks for a task: a User row, or the request's plain copy of it."""

    @property
    def id(self) -> int: ...

    @property
    def role(self) -> str: ...

    @property
    def is_approved(self) -> bool: ...


@dataclass(frozen=True)
class TaskContent:
    """What a task shows: the problem and the solution's steps."""

    problem: str
    reference_answer: str | None
    steps: list[str] | None
    alternatives: list[list[str]] | None
    style: str


@dataclass(frozen=True)
class Lease:
    """A task leased to a labeler: a row of ``assignments``."""

    id: int
    solution_id: int
    labeler_id: int
    slot: int | None
    """The overlap slot a regular task takes; None for QC and screening questions."""
    leased_at: datetime
    expires_at: datetime
    qc_generation: int | None = None
    """The generation whose quality-control questions this one came from, if it is one."""
    content: TaskContent | None = None
    """What the task shows, when the query that found the task fetched it too."""


_A = ASSIGNMENTS.c
_S = SOLUTIONS.c
LEASE_COLUMNS = (
    _A.id.label("lease_id"),
    _A.solution_id,
    _A.labeler_id,
    _A.slot,
    _A.leased_at,
    _A.expires_at,
    _A.qc_generation,
)

CONTENT_COLUMNS = (
    PROBLEMS.c.text.label("problem_text"),
    PROBLEMS.c.ground_truth_answer.label("reference_answer"),
    _S.steps,
    _S.alternatives,
    _S.style,
)
"""What ``content_from`` reads, from the solution joined with its problem."""
WITH_CONTENT = (SOLUTIONS.c.problem_id == PROBLEMS.c.id,)
OPEN_LEASE = and_(_A.labeler_id == bindparam("labeler_id"), _A.completed_at.is_(None))
"""A labeler's unfinished task: the first by id, should there be two (two tabs at once)."""
_OPEN_LEASE = select(*LEASE_COLUMNS).where(OPEN_LEASE).order_by(_A.id).limit(1)
_EXTEND = (
    update(ASSIGNMENTS)
    .where(
        _A.id == bindparam("assignment_id"),
        _A.labeler_id == bindparam("holder_id"),
        _A.completed_at.is_(None),
    )
    .values(expires_at=bindparam("until"))
)
# "Not this labeler's before", as a count per candidate solution: Postgres keeps that a
# probe of the solution's few assignments. Written as NOT EXISTS, it may plan an anti join
# that reads every assignment the labeler ever had, for each candidate, and keep that plan
# (psycopg prepares the statement) while the labeler's history grows.
_NOT_MINE = (
    select(func.count())
    .where(_A.solution_id == _S.id, _A.labeler_id == bindparam("labeler_id"))
    .correlate(SOLUTIONS)
    .scalar_subquery()
    == 0
)
_IS_GOLD = exists().where(GOLD_LABELS.c.solution_id == _S.id)
_SCREENING = (
    select(_S.id)
    .where(
        _S.generation == SCREENING_GENERATION,
        _S.queue_state != QueueState.NOT_QUEUED.value,
        _NOT_MINE,
    )
    .order_by(_S.id)
    .limit(1)
)
_QUALITY_CONTROL = select(_S.id).where(_IS_GOLD, _NOT_MINE).order_by(_S.id).limit(1)

_Q = GENERATION_QUALITY_CONTROL.c
_GENERATION_BEING_LABELED = (
    select(func.min(_S.generation))
    .where(_S.queue_state == QueueState.OPEN.value, _S.generation >= 0, ~_IS_GOLD)
    .scalar_subquery()
)
# The newest generation with QC questions, up to the one being labeled (when nothing is
# open, the newest of all).
_QUALITY_CONTROL_ROUND = select(func.max(_Q.generation)).where(
    or_(_GENERATION_BEING_LABELED.is_(None), _Q.generation <= _GENERATION_BEING_LABELED)
)
_QUALITY_CONTROL_OF_ROUND = (
    select(_Q.solution_id)
    .where(
        _Q.generation == bindparam("round"),
        ~exists().where(
            _A.solution_id == _Q.solution_id,
            _A.labeler_id == bindparam("labeler_id"),
            _A.qc_generation == _Q.generation,
        ),
    )
    .order_by(_Q.solution_id)
    .limit(1)
)


_OVERLAP = func.coalesce(_S.overlap, bindparam("overlap"))
_LIVE = or_(_A.completed_at.is_not(None), _A.expires_at > bindparam("now"))
# Open to this labeler: none of the solution's assignments is theirs (as _NOT_MINE) and
# fewer than its overlap hold a live slot, both from one probe of its few assignments.
# Under load the head of the queue is a run of solutions leased to others, which every
# request walks past: one probe each, not two (with 64 labelers at work, the head query
# read 178 buffers a call instead of 307; BENCHMARKS.md).
_OPEN_TO_LABELER = (
    select(
        and_(
            func.count().filter(_A.labeler_id == bindparam("labeler_id")) == 0,
            func.count().filter(_A.slot.is_not(None), _LIVE) < _OVERLAP,
        )
    )
    .where(_A.solution_id == _S.id)
    .correlate(SOLUTIONS)
    .scalar_subquery()
)
# The candidate comes with its content: a claim then needs no query to show the task.
_REGULAR = (
    select(_S.id, _OVERLAP.label("overlap"), *CONTENT_COLUMNS)
    .join_from(SOLUTIONS, PROBLEMS, *WITH_CONTENT)
    .where(
        _S.queue_state == QueueState.OPEN.value,
        _S.generation != SCREENING_GENERATION,
        ~_IS_GOLD,
        _OPEN_TO_LABELER,
    )
    .order_by(_S.generation, _S.id)
    .limit(1)
)
# FOR NO KEY UPDATE (key_share) leaves the foreign-key checks of inserts unblocked.
_HEAD_UNLOCKED = _REGULAR.with_for_update(of=SOLUTIONS, skip_locked=True, key_share=True)
_HEAD_WAIT = _REGULAR.with_for_update(of=SOLUTIONS, key_share=True)
# The head without the k candidates a request already tried, one statement for each k:
# built here, not per try, since `run` compiles each statement object once and keeps it.
_HEADS_UNLOCKED_EXCEPT = (
    _HEAD_UNLOCKED,
    *(
        _HEAD_UNLOCKED.where(_S.id.not_in([bindparam(f"tried_{i}") for i in range(k)]))
        for k in range(1, CANDIDATES_PER_TRY)
    ),
)

# SQLite's claim counts the slot in the insert itself, in a snapshot taken once the
# solution's row is locked: every claim of a slot holds that lock until it commits, so the
# count is exact. (Counted by the head-of-queue query, it could miss a claim that
# committed between that query's snapshot and its lock, and the insert would then wait on
# a slot in use.) Slots are numbered from 0 up and their rows never deleted, so the count
# is the next free one.
_NEW_SLOT_COLUMNS = ["solution_id", "labeler_id", "slot", "leased_at", "expires_at"]
_USED_SLOTS = select(_A.slot).where(
    _A.solution_id == bindparam("solution_id"), _A.slot.is_not(None)
)
_EXPIRED_SLOT = (
    select(_A.id)
    .where(
        _A.solution_id == bindparam("of_solution"),
        _A.slot.is_not(None),
        _A.completed_at.is_(None),
        _A.expires_at <= bindparam("now"),
    )
    .order_by(_A.id)
    .limit(1)
    .scalar_subquery()
)
_TAKE_OVER = (
    update(ASSIGNMENTS)
    .where(_A.id == _EXPIRED_SLOT, _A.completed_at.is_(None), _A.expires_at <= bindparam("now"))
    .values(
        labeler_id=bindparam("taker_id"),
        leased_at=bindparam("now"),
        expires_at=bindparam("until"),
    )
    .returning(*LEASE_COLUMNS)
)
# A concurrent request that took the same slot, or the same solution for this labeler,
# makes an insert do nothing instead of failing the transaction.
_INSERT: dict[str, Insert] = {
    name: insert(ASSIGNMENTS).on_conflict_do_nothing().returning(_A.id)
    for name, insert in INSERTS.items()
}


def _slot_claim(
    dialect: str,
    solution_id: ColumnElement[int],
    overlap: ColumnElement[int],
) -> Insert:
    """An insert of the solution's next slot for the labeler, if one is below the overlap."""
    used = (
        select(func.count())
        .where(_A.solution_id == solution_id, _A.slot.is_not(None))
        .scalar_subquery()
    )
    new_slot = select(
        solution_id,
        bindparam("labeler_id", type_=Integer),
        used,
        bindparam("now", type_=DateTime),
        bindparam("until", type_=DateTime),
    ).where(used < overlap)
    return (
        INSERTS[dialect](ASSIGNMENTS)
        .from_select(_NEW_SLOT_COLUMNS, new_slot)
        .on_conflict_do_nothing()
        .returning(_A.id, _A.slot)
    )


# SQLite's claim, after its head-of-queue query (on Postgres that query claims, below).
_CLAIM_COUNTED_SLOT = _slot_claim(
    "sqlite",
    bindparam("claimed", type_=Integer),
    bindparam("slots", type_=Integer),
)


def _head_and_claim(head_query: Select[Any]) -> Select[Any]:
    """The head of the queue and, in the same statement, a claim of its next slot (Postgres:
    one round trip instead of two). The count of slots used comes from the statement's
    snapshot, taken before the head's row lock: a claim that committed in between is
    missed, and the insert then meets its slot and does nothing (the caller falls back on
    ``_claim_after_race``). Any claim still open holds the row lock, which SKIP LOCKED skips
    and a waiting lock outlasts, so the insert never waits on a slot in use."""
    head = head_query.cte("head")
    claimed = _slot_claim("postgresql", head.c.id, head.c.overlap).cte("claimed")
    return select(
        head, claimed.c.id.label("claimed_id"), claimed.c.slot.label("claimed_slot")
    ).select_from(head.outerjoin(claimed, true()))


# Each database's head-of-queue statements: the tries that skip locked rows, and the wait.
_HEADS = {
    "postgresql": (
        tuple(_head_and_claim(head) for head in _HEADS_UNLOCKED_EXCEPT),
        _head_and_claim(_HEAD_WAIT),
    ),
    "sqlite": (_HEADS_UNLOCKED_EXCEPT, _HEAD_WAIT),
}


def next_assignment(
    connection: Connection,
    labeler: Labeler,
    rules: QueueRules,
    now: datetime | None = None,
    rng: random.Random | None = None,
) -> Lease | None:
    """The labeler's current task, or a new one; None when nothing is left for them."""
    now = now or utc_now()
    current = open_lease(connection, labeler.id)
    return resume(connection, current, rules, now) or assign_new(
        connection, labeler, rules, now, rng
    )


def open_lease(connection: Connection, labeler_id: int) -> Lease | None:
    """The labeler's unfinished task, its lease current or not."""
    return lease_from(run(connection, _OPEN_LEASE, {"labeler_id": labeler_id}).first())


def lease_from(row: AnyRow | None) -> Lease | None:
    """The Lease in a row of LEASE_COLUMNS; None for no row, or an outer join's nulls."""
    if row is None or row.lease_id is None:
        return None
    return Lease(
        row.lease_id,
        row.solution_id,
        row.labeler_id,
        row.slot,
        row.leased_at,
        row.expires_at,
        row.qc_generation,
        content_from(row) if hasattr(row, "problem_text") else None,
    )


def content_from(row: AnyRow) -> TaskContent | None:
    """The TaskContent in a row of CONTENT_COLUMNS; None for an outer join's nulls."""
    if row.problem_text is None:
        return None
    return TaskContent(
        row.problem_text, row.reference_answer, row.steps, row.alternatives, row.style
    )


def resume(
    connection: Connection, current: Lease | None, rules: QueueRules, now: datetime
) -> Lease | None:
    """The unfinished task back, its lease renewed if it ran out; None if it is gone."""
    if current is None or current.expires_at > now:
        return current
    # Expired: renew it unless another labeler took the slot over in the meantime.
    if extend_lease(connection, current, rules, now):
        return replace(current, expires_at=now + rules.lease)
    return None


def assign_new(
    connection: Connection,
    labeler: Labeler,
    rules: QueueRules,
    now: datetime,
    rng: random.Random | None = None,
) -> Lease | None:
    """A new task for a labeler who has none: screening, QC or a regular one."""
    if not _is_approved(labeler):
        return _assign_shared(connection, labeler, rules, now, _SCREENING)
    if (rng or random).random() < rules.qc_rate:
        quality_control = _assign_quality_control(connection, labeler, rules, now)
        if quality_control is not None:
            return quality_control
    return _assign_regular(connection, labeler, rules, now)


def _is_approved(labeler: Labeler) -> bool:
    return labeler.is_approved or labeler.role == Role.ADMIN.value


def extend_lease(
    connection: Connection, lease: Lease, rules: QueueRules, now: datetime | None = None
) -> bool:
    """Keep an open task with its labeler while their page is open; False if it is gone."""
    until = (now or utc_now()) + rules.lease
    params = {"assignment_id": lease.id, "holder_id": lease.labeler_id, "until": until}
    return rows_changed(run(connection, _EXTEND, params)) == 1


def _assign_shared(
    connection: Connection,
    labeler: Labeler,
    rules: QueueRules,
    now: datetime,
    candidates: Select[int],
) -> Lease | None:
    """Screening and QC questions go to every labeler once: no slot, no overlap."""
    solution_id = run(connection, candidates, {"labeler_id": labeler.id}).scalar()
    if solution_id is None:
        return None
    return _insert_lease(connection, labeler, rules, now, solution_id, slot=None)


def _assign_quality_control(
    connection: Connection, labeler: Labeler, rules: QueueRules, now: datetime
) -> Lease | None:
    """A QC question of the current round if the worker has opened generations, else any."""
    round_ = run(connection, _QUALITY_CONTROL_ROUND).scalar()
    if round_ is None:
        return _assign_shared(connection, labeler, rules, now, _QUALITY_CONTROL)
    params = {"round": round_, "labeler_id": labeler.id}
    solution_id = run(connection, _QUALITY_CONTROL_OF_ROUND, params).scalar()
    if solution_id is None:
        return None
    return _insert_lease(connection, labeler, rules, now, solution_id, None, qc_generation=round_)


def _assign_regular(
    connection: Connection, labeler: Labeler, rules: QueueRules, now: datetime
) -> Lease | None:
    until = now + rules.lease  # for the claims made by the query itself (Postgres)
    params = {"labeler_id": labeler.id, "overlap": rules.overlap, "now": now, "until": until}
    # Each try takes the head of the queue that no concurrent request has locked (Postgres
    # skips their rows; SQLite serializes writers anyway), so requests spread over the
    # queue instead of queueing behind one row. Those tried are excluded: they have no slot
    # for this labeler, and a row this request locked itself (in a transaction; the
    # labeling requests' statements commit alone) is not skipped. The slot constraint
    # settles any race.
    # When every candidate is locked by others, the first try waits for the head instead:
    # its holder may leave a slot free, and "nothing to label" should mean nothing. Only
    # the first: a request that holds a lock and waits for another could deadlock.
    heads, head_wait = _HEADS[connection.dialect.name]
    tried: list[int] = []
    for _ in range(CANDIDATES_PER_TRY):
        excluded = {f"tried_{i}": solution_id for i, solution_id in enumerate(tried)}
        row = run(connection, heads[len(tried)], params | excluded).first()
        if row is None and not tried:
            row = run(connection, head_wait, params).first()
        if row is None:
            return None
        lease = _claim_head(connection, labeler, rules, now, row)
        if lease is not None:
            return replace(lease, content=content_from(row))
        tried.append(row.id)
    return None


def _claim_head(
    connection: Connection, labeler: Labeler, rules: QueueRules, now: datetime, head: AnyRow
) -> Lease | None:
    """A slot of the head of the queue: the next one, claimed by the query that found the
    head (Postgres) or by an insert now; else a free or expired one; None if none is left."""
    until = now + rules.lease
    if connection.dialect.name == "postgresql":
        claimed_id, slot = head.claimed_id, head.claimed_slot
    else:
        params = {
            "claimed": head.id,
            "labeler_id": labeler.id,
            "now": now,
            "until": until,
            "slots": head.overlap,
        }
        claimed = run(connection, _CLAIM_COUNTED_SLOT, params).first()
        claimed_id, slot = (claimed.id, claimed.slot) if claimed else (None, None)
    if claimed_id is not None:
        return Lease(claimed_id, head.id, labeler.id, slot, now, until)
    return _claim_after_race(connection, labeler, rules, now, head.id, head.overlap)


def _claim_after_race(
    connection: Connection,
    labeler: Labeler,
    rules: QueueRules,
    now: datetime,
    solution_id: int,
    overlap: int,
) -> Lease | None:
    """When the counted next slot was taken: a free slot below the overlap, or one whose
    lease expired; None if none is left."""
    until = now + rules.lease
    # Should slots ever have gaps (the count then names a slot in use), fill the gaps.
    used = set(connection.scalars(_USED_SLOTS, {"solution_id": solution_id}))
    for slot in sorted(set(range(overlap)) - used):
        lease = _insert_lease(connection, labeler, rules, now, solution_id, slot)
        if lease is not None:
            return lease
    taken_over = run(
        connection,
        _TAKE_OVER,
        {"of_solution": solution_id, "taker_id": labeler.id, "now": now, "until": until},
    ).first()
    return lease_from(taken_over)


def _insert_lease(
    connection: Connection,
    labeler: Labeler,
    rules: QueueRules,
    now: datetime,
    solution_id: int,
    slot: int | None,
    *,
    qc_generation: int | None = None,
) -> Lease | None:
    """Insert the assignment; None if a concurrent request took that slot first."""
    expires_at = now + rules.lease
    assignment_id = run(
        connection,
        _INSERT[connection.dialect.name],
        {
            "solution_id": solution_id,
            "labeler_id": labeler.id,
            "slot": slot,
            "leased_at": now,
            "expires_at": expires_at,
            "qc_generation": qc_generation,
        },
    ).scalar()
    if assignment_id is None:
        return None
    return Lease(assignment_id, solution_id, labeler.id, slot, now, expires_at, qc_generation)


def lease_of(connection: Connection, assignment_id: int) -> Lease | None:
    """The lease with this id, finished or not; None if there is none."""
    return lease_from(
        connection.execute(select(*LEASE_COLUMNS).where(_A.id == assignment_id)).first()
    )
