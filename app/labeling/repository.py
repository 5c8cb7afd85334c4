"""Every statement of the labeling requests, and the one place where SQLite and Postgres
take different paths.

Why one module over 500 lines: every statement of the labeling requests is compiled here
once for both dialects, and this is the one place SQLite and Postgres take different paths,
so a statement and its Postgres twin are read and changed together.

Each statement is a Core statement built once here. ``execute`` runs it through
SQLAlchemy's ``Connection.execute`` on SQLite. On Postgres it sends the statement's SQL,
compiled once at import, to psycopg directly, which prepares it after five runs (its
``prepare_threshold``): the labeling requests run four statements a task, and SQLAlchemy's
execution layer (parameter and result processing, execution contexts) cost about as much
CPU as the driver there. The statements' own values (``LIMIT 1``, ``= 'open'``) are written
in as SQL (``_constant``, ``_LIMIT_1``): with them sent as parameters, Postgres could not
plan the prepared head-of-queue query once for every call, and planned it anew each time
(0.5 ms under load).

Statements run this way must not need SQLAlchemy's processing of their values (JSON
parameters, Python-side defaults): every value they take or give is one psycopg handles
itself. The tests run each on both databases.
"""

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, cast

from psycopg.rows import namedtuple_row
from sqlalchemy import (
    ClauseElement,
    ColumnElement,
    Connection,
    DateTime,
    Executable,
    Integer,
    Select,
    Table,
    and_,
    bindparam,
    case,
    exists,
    func,
    literal,
    literal_column,
    or_,
    select,
    true,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite

from app.auth.sessions import LOGIN_COLUMNS, LOGIN_USER
from app.models import (
    ASSIGNMENTS,
    GENERATION_QUALITY_CONTROL,
    GOLD_LABELS,
    LABEL_STEPS,
    LABELS,
    PROBLEMS,
    SCREENING_GENERATION,
    SOLUTIONS,
    STEP_COMPLETIONS,
    USERS,
    QueueState,
)

CANDIDATES_PER_TRY = 8
"""Heads of the queue one request tries before it gives up (see app/labeling/queue.py)."""


class Rows(Protocol):
    """What ``execute`` gives back: psycopg's cursor or SQLAlchemy's result, whose rows
    both name their columns as attributes."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> Sequence[Any]: ...


_POSTGRES = postgresql.psycopg.dialect()  # type: ignore[no-untyped-call]
_SQLITE = sqlite.dialect()


@dataclass(frozen=True)
class Statement:
    """A Core statement, and its SQL as psycopg takes it on Postgres."""

    core: Executable
    postgres_sql: str


def _statement(core: Executable, postgres: Executable | None = None) -> Statement:
    """``core``, compiled once for Postgres (``postgres`` instead, where the two differ)."""
    compiled = cast(ClauseElement, core if postgres is None else postgres).compile(
        dialect=_POSTGRES
    )
    # Each value left must be the caller's: psycopg gets only the caller's parameters.
    built_in = [name for name, value in compiled.params.items() if value is not None]
    assert not built_in, f"write {built_in} in as constants (_constant, _LIMIT_1)"
    return Statement(core, compiled.string)


def execute(
    connection: Connection, statement: Statement, params: Mapping[str, Any] | None = None
) -> Rows:
    """Run ``statement``: on Postgres through psycopg, as a prepared statement."""
    if connection.dialect.name != "postgresql":
        return cast(Rows, connection.execute(statement.core, dict(params or {})))
    driver_connection = connection.connection.driver_connection
    assert driver_connection is not None
    cursor = driver_connection.cursor(row_factory=namedtuple_row)
    return cast(Rows, cursor.execute(statement.postgres_sql, params or {}))


def _constant(value: int | str) -> ColumnElement[Any]:
    """A value of the statement itself, written into its SQL rather than sent."""
    # Rendered as SQLite would (quotes doubled, no placeholder escapes): each database's
    # compiler then escapes the text for its own driver.
    sql = literal(value).compile(dialect=_SQLITE, compile_kwargs={"literal_binds": True})
    return literal_column(str(sql), literal(value).type)


_LIMIT_1 = literal_column("1", Integer)


DialectInsert = Callable[[Table], postgresql.Insert | sqlite.Insert]
"""``postgresql.insert`` or ``sqlite.insert``: each database's INSERT, for ON CONFLICT."""


# Both databases read ON CONFLICT DO NOTHING alike, each through its own dialect's insert.
def _insert_or_nothing(build: Callable[[DialectInsert], Executable]) -> Statement:
    """A statement built by ``build`` from each database's INSERT."""
    return _statement(build(sqlite.insert), build(postgresql.insert))


# --- What the statements fetch, and the plain objects made of it ---------------------


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
_LEASE_COLUMNS = (
    _A.id.label("lease_id"),
    _A.solution_id,
    _A.labeler_id,
    _A.slot,
    _A.leased_at,
    _A.expires_at,
    _A.qc_generation,
)
_CONTENT_COLUMNS = (
    PROBLEMS.c.text.label("problem_text"),
    PROBLEMS.c.ground_truth_answer.label("reference_answer"),
    _S.steps,
    _S.alternatives,
    _S.style,
)
_WITH_CONTENT = (_S.problem_id == PROBLEMS.c.id,)
_IS_GOLD = exists().where(GOLD_LABELS.c.solution_id == _S.id)
_TASK_COLUMNS = (
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
    (func.coalesce(_S.generation, _constant(0)) == _constant(SCREENING_GENERATION)).label(
        "is_screening"
    ),
    _IS_GOLD.label("is_gold"),
)
_TASK_FIELDS = [column.name for column in _TASK_COLUMNS]
_LEASED_TASKS = ASSIGNMENTS.join(SOLUTIONS, _A.solution_id == _S.id)


def lease_from(row: Any) -> Lease | None:
    """The Lease in a row of _LEASE_COLUMNS; None for no row, or an outer join's nulls."""
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


def content_from(row: Any) -> TaskContent | None:
    """The TaskContent in a row of _CONTENT_COLUMNS; None for an outer join's nulls."""
    if row.problem_text is None:
        return None
    return TaskContent(
        row.problem_text, row.reference_answer, row.steps, row.alternatives, row.style
    )


def _task_from(row: Any) -> LeasedTask | None:
    if row is None or row.assignment_id is None:
        return None
    return LeasedTask(**{name: getattr(row, name) for name in _TASK_FIELDS})


# --- The labeler and their task, in a request's first query --------------------------

# A labeling request checks the login with the query it starts with anyway (one round
# trip fewer): the user's row, outer-joined with what the request needs.
_OPEN_LEASE = and_(_A.labeler_id == bindparam("labeler_id"), _A.completed_at.is_(None))
"""A labeler's unfinished task: the first by id, should there be two (two tabs at once)."""
_LABELER_AND_OPEN_LEASE = _statement(
    select(*LOGIN_COLUMNS, *_LEASE_COLUMNS, *_CONTENT_COLUMNS)
    .select_from(
        USERS.outerjoin(ASSIGNMENTS, _OPEN_LEASE)
        .outerjoin(SOLUTIONS, _A.solution_id == _S.id)
        .outerjoin(PROBLEMS, *_WITH_CONTENT)
    )
    .where(LOGIN_USER)
    .order_by(_A.id)
    .limit(_LIMIT_1)
)
_LABELER_AND_TASK = _statement(
    select(*LOGIN_COLUMNS, *_TASK_COLUMNS)
    .select_from(USERS.outerjoin(_LEASED_TASKS, _A.id == bindparam("assignment_id")))
    .where(LOGIN_USER)
)


def labeler_and_open_lease(connection: Connection, user_id: int) -> tuple[Any, Lease | None]:
    """The active user's LOGIN_COLUMNS row (None if there is none) and their open task."""
    params = {"user_id": user_id, "labeler_id": user_id}
    row = execute(connection, _LABELER_AND_OPEN_LEASE, params).fetchone()
    return row, lease_from(row)


def labeler_and_task(
    connection: Connection, user_id: int, assignment_id: int
) -> tuple[Any, LeasedTask | None]:
    """The active user's LOGIN_COLUMNS row (None if there is none) and the task
    ``assignment_id``, whoever holds it."""
    params = {"user_id": user_id, "assignment_id": assignment_id}
    row = execute(connection, _LABELER_AND_TASK, params).fetchone()
    return row, _task_from(row)


# --- Leases ----------------------------------------------------------------------------

_LEASE_OF = _statement(select(*_LEASE_COLUMNS).where(_A.id == bindparam("assignment_id")))
_EXTEND = _statement(
    update(ASSIGNMENTS)
    .where(
        _A.id == bindparam("assignment_id"),
        _A.labeler_id == bindparam("holder_id"),
        _A.completed_at.is_(None),
    )
    .values(expires_at=bindparam("until"))
)


def lease_of(connection: Connection, assignment_id: int) -> Lease | None:
    """The lease with this id, finished or not; None if there is none."""
    params = {"assignment_id": assignment_id}
    return lease_from(execute(connection, _LEASE_OF, params).fetchone())


def extend_lease(connection: Connection, lease: Lease, until: datetime) -> bool:
    """Move the open lease's end to ``until``; False if it is finished or someone else's."""
    params = {"assignment_id": lease.id, "holder_id": lease.labeler_id, "until": until}
    return execute(connection, _EXTEND, params).rowcount == 1


def _insert_assignment(insert: DialectInsert) -> Executable:
    # A concurrent request that took the same slot, or the same solution for this
    # labeler, makes the insert do nothing instead of failing the transaction.
    columns = ("solution_id", "labeler_id", "slot", "leased_at", "expires_at", "qc_generation")
    values = {name: bindparam(name, type_=ASSIGNMENTS.c[name].type) for name in columns}
    return insert(ASSIGNMENTS).values(values).on_conflict_do_nothing().returning(_A.id)


_INSERT_ASSIGNMENT = _insert_or_nothing(_insert_assignment)


def insert_lease(
    connection: Connection,
    solution_id: int,
    labeler_id: int,
    slot: int | None,
    leased_at: datetime,
    expires_at: datetime,
    qc_generation: int | None = None,
) -> Lease | None:
    """Insert the assignment; None if a concurrent request took that slot first."""
    params = {
        "solution_id": solution_id,
        "labeler_id": labeler_id,
        "slot": slot,
        "leased_at": leased_at,
        "expires_at": expires_at,
        "qc_generation": qc_generation,
    }
    row = execute(connection, _INSERT_ASSIGNMENT, params).fetchone()
    if row is None:
        return None
    return Lease(row.id, solution_id, labeler_id, slot, leased_at, expires_at, qc_generation)


# --- Screening and quality-control questions -----------------------------------------

# "Not this labeler's before", as a count per candidate solution: Postgres keeps that a
# probe of the solution's few assignments. Written as NOT EXISTS, it may plan an anti join
# that reads every assignment the labeler ever had, for each candidate, and keep that plan
# (psycopg prepares the statement) while the labeler's history grows.
_NOT_MINE = select(func.count()).where(
    _A.solution_id == _S.id, _A.labeler_id == bindparam("labeler_id")
).correlate(SOLUTIONS).scalar_subquery() == _constant(0)
_SCREENING = _statement(
    select(_S.id)
    .where(
        _S.generation == _constant(SCREENING_GENERATION),
        _S.queue_state != _constant(QueueState.NOT_QUEUED.value),
        _NOT_MINE,
    )
    .order_by(_S.id)
    .limit(_LIMIT_1)
)
_ANY_QUALITY_CONTROL = _statement(
    select(_S.id).where(_IS_GOLD, _NOT_MINE).order_by(_S.id).limit(_LIMIT_1)
)
_Q = GENERATION_QUALITY_CONTROL.c
_GENERATION_BEING_LABELED = (
    select(func.min(_S.generation))
    .where(
        _S.queue_state == _constant(QueueState.OPEN.value), _S.generation >= _constant(0), ~_IS_GOLD
    )
    .scalar_subquery()
)
# The newest generation with QC questions, up to the one being labeled (when nothing is
# open, the newest of all).
_QUALITY_CONTROL_ROUND = _statement(
    select(func.max(_Q.generation)).where(
        or_(_GENERATION_BEING_LABELED.is_(None), _Q.generation <= _GENERATION_BEING_LABELED)
    )
)
_QUALITY_CONTROL_OF_ROUND = _statement(
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
    .limit(_LIMIT_1)
)


def screening_question(connection: Connection, labeler_id: int) -> int | None:
    """The first screening question the labeler has not had."""
    return _scalar(execute(connection, _SCREENING, {"labeler_id": labeler_id}))


_HAD_SCREENING = _statement(
    select(_A.id)
    .join(SOLUTIONS, _S.id == _A.solution_id)
    .where(
        _A.labeler_id == bindparam("labeler_id"),
        _S.generation == _constant(SCREENING_GENERATION),
    )
    .limit(_LIMIT_1)
)


def had_screening(connection: Connection, labeler_id: int) -> bool:
    """Whether the labeler was ever given a screening question."""
    return _scalar(execute(connection, _HAD_SCREENING, {"labeler_id": labeler_id})) is not None


def any_quality_control_question(connection: Connection, labeler_id: int) -> int | None:
    """The first gold solution the labeler has not had."""
    return _scalar(execute(connection, _ANY_QUALITY_CONTROL, {"labeler_id": labeler_id}))


def quality_control_round(connection: Connection) -> int | None:
    """The generation whose QC questions are served now; None before the worker's first."""
    return _scalar(execute(connection, _QUALITY_CONTROL_ROUND))


def quality_control_question(connection: Connection, labeler_id: int, round_: int) -> int | None:
    """A QC question of ``round_`` the labeler has not answered in that round."""
    params = {"round": round_, "labeler_id": labeler_id}
    return _scalar(execute(connection, _QUALITY_CONTROL_OF_ROUND, params))


def _scalar(rows: Rows) -> int | None:
    """The first column of the first row: an id, or a generation."""
    row = rows.fetchone()
    value: int | None = None if row is None else row[0]
    return value


# --- The head of the queue, and its slots --------------------------------------------

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
            func.count().filter(_A.labeler_id == bindparam("labeler_id")) == _constant(0),
            func.count().filter(_A.slot.is_not(None), _LIVE) < _OVERLAP,
        )
    )
    .where(_A.solution_id == _S.id)
    .correlate(SOLUTIONS)
    .scalar_subquery()
)
# The candidate comes with its content: a claim then needs no query to show the task.
_REGULAR = (
    select(_S.id, _OVERLAP.label("overlap"), *_CONTENT_COLUMNS)
    .join_from(SOLUTIONS, PROBLEMS, *_WITH_CONTENT)
    .where(
        _S.queue_state == _constant(QueueState.OPEN.value),
        _S.generation != _constant(SCREENING_GENERATION),
        ~_IS_GOLD,
        _OPEN_TO_LABELER,
    )
    .order_by(_S.generation, _S.id)
    .limit(_LIMIT_1)
)


def _head_except(tried: int, skip_locked: bool) -> Select[Any]:
    """The head of the queue, locked, without the ``tried`` candidates already tried."""
    # FOR NO KEY UPDATE (key_share) leaves the foreign-key checks of inserts unblocked.
    head = _REGULAR.with_for_update(of=SOLUTIONS, skip_locked=skip_locked, key_share=True)
    if tried:
        head = head.where(_S.id.not_in([bindparam(f"tried_{i}") for i in range(tried)]))
    return head


def _slot_claim(
    insert: DialectInsert, solution_id: ColumnElement[int], overlap: ColumnElement[int]
) -> Any:
    """An insert of the solution's next slot for the labeler, if one is below the overlap.

    Slots are numbered from 0 up and their rows never deleted, so the count of the
    solution's slots is the next free one.
    """
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
    columns = ["solution_id", "labeler_id", "slot", "leased_at", "expires_at"]
    return (
        insert(ASSIGNMENTS)
        .from_select(columns, new_slot)
        .on_conflict_do_nothing()
        .returning(_A.id, _A.slot)
    )


def _head_and_claim(head_query: Select[Any]) -> Select[Any]:
    """The head of the queue and, in the same statement, a claim of its next slot (Postgres:
    one round trip instead of two). The count of slots used comes from the statement's
    snapshot, taken before the head's row lock: a slot taken in between (by a claim that
    committed, or after a lost race, which takes a slot without the row lock) is missed,
    and the insert then meets it and does nothing (the caller then looks for another slot).
    Meeting it, the insert waits for any statement that is writing that slot's assignment,
    while it holds the solution's row. That wait ends: a statement that writes an
    assignment either waits for nothing more (a heartbeat, a take-over) or took the
    solution's row first (a submit, ``_WRITE_AT_ONCE``)."""
    head = head_query.cte("head")
    claimed = _slot_claim(postgresql.insert, head.c.id, head.c.overlap).cte("claimed")
    return select(
        head, claimed.c.id.label("claimed_id"), claimed.c.slot.label("claimed_slot")
    ).select_from(head.outerjoin(claimed, true()))


def _head_statement(tried: int, skip_locked: bool) -> Statement:
    head = _head_except(tried, skip_locked)
    return _statement(head, _head_and_claim(head))


# The tries that skip locked rows, one statement for each number of candidates tried, and
# the one that waits for the head.
_HEADS_UNLOCKED = tuple(_head_statement(tried, True) for tried in range(CANDIDATES_PER_TRY))
_HEAD_WAIT = _head_statement(0, False)

# SQLite's claim counts the slot in the insert itself, in a snapshot taken once the
# solution's row is locked: every claim of a slot holds that lock until it commits, so the
# count is exact. (Counted by the head-of-queue query, it could miss a claim that
# committed between that query's snapshot and its lock, and the insert would then wait on
# a slot in use.)
_CLAIM_COUNTED_SLOT = _insert_or_nothing(
    lambda insert: _slot_claim(
        insert, bindparam("claimed", type_=Integer), bindparam("slots", type_=Integer)
    )
)


@dataclass(frozen=True)
class Head:
    """The head of the queue for a labeler, and the slot claimed of it (if any)."""

    solution_id: int
    overlap: int
    content: TaskContent | None
    claimed_id: int | None
    claimed_slot: int | None


def claim_head(
    connection: Connection,
    labeler_id: int,
    overlap: int,
    now: datetime,
    until: datetime,
    tried: Sequence[int] = (),
    *,
    wait: bool = False,
) -> Head | None:
    """The head of the queue open to the labeler, not among ``tried``, and a claim of its
    next slot (None if that slot was taken meanwhile); None if nothing is open to them.

    Without ``wait``, rows that concurrent requests locked are skipped (Postgres); with it,
    the head is waited for. On Postgres one statement finds and claims it; on SQLite an
    insert after the query claims it.
    """
    params: dict[str, Any] = {"labeler_id": labeler_id, "overlap": overlap, "now": now}
    params |= {"until": until} | {f"tried_{i}": id_ for i, id_ in enumerate(tried)}
    statement = _HEAD_WAIT if wait else _HEADS_UNLOCKED[len(tried)]
    row = execute(connection, statement, params).fetchone()
    if row is None:
        return None
    if connection.dialect.name == "postgresql":
        claimed_id, claimed_slot = row.claimed_id, row.claimed_slot
    else:
        claim = {"claimed": row.id, "slots": row.overlap, "labeler_id": labeler_id}
        claimed = execute(connection, _CLAIM_COUNTED_SLOT, claim | {"now": now, "until": until})
        claimed_row = claimed.fetchone()
        claimed_id, claimed_slot = claimed_row or (None, None)
    return Head(row.id, row.overlap, content_from(row), claimed_id, claimed_slot)


_USED_SLOTS = _statement(
    select(_A.slot).where(_A.solution_id == bindparam("solution_id"), _A.slot.is_not(None))
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
    .limit(_LIMIT_1)
    .scalar_subquery()
)
_TAKE_OVER = _statement(
    update(ASSIGNMENTS)
    .where(_A.id == _EXPIRED_SLOT, _A.completed_at.is_(None), _A.expires_at <= bindparam("now"))
    .values(
        labeler_id=bindparam("taker_id"),
        leased_at=bindparam("now"),
        expires_at=bindparam("until"),
    )
    .returning(*_LEASE_COLUMNS)
)


def used_slots(connection: Connection, solution_id: int) -> set[int]:
    """The slots of the solution that assignments hold, finished or not."""
    rows = execute(connection, _USED_SLOTS, {"solution_id": solution_id}).fetchall()
    return {row.slot for row in rows}


def take_over_expired_slot(
    connection: Connection, solution_id: int, taker_id: int, now: datetime, until: datetime
) -> Lease | None:
    """An expired lease on one of the solution's slots, moved to ``taker_id``; None if the
    solution has none."""
    params = {"of_solution": solution_id, "taker_id": taker_id, "now": now, "until": until}
    return lease_from(execute(connection, _TAKE_OVER, params).fetchone())


# --- What a task shows ----------------------------------------------------------------

_TASK_CONTENT = _statement(
    select(*_CONTENT_COLUMNS)
    .join_from(SOLUTIONS, PROBLEMS, *_WITH_CONTENT)
    .where(_S.id == bindparam("solution_id"))
)


def task_content(connection: Connection, solution_id: int) -> TaskContent:
    """What the solution's task shows."""
    row = execute(connection, _TASK_CONTENT, {"solution_id": solution_id}).fetchone()
    content = content_from(row)
    assert content is not None, f"solution {solution_id} has no problem"
    return content


# --- Storing a label ------------------------------------------------------------------

LABEL_COLUMNS = (
    "dedupe_key", "labeler_id", "problem_id", "solution_id", "timestamp", "generation",
    "is_quality_control", "is_initial_screening", "total_time", "finish_reason", "note",
    "created_at", "prm800k_label",
)  # fmt: skip
STEP_COLUMNS = ("step_index", "chosen_completion", "human_completion")
COMPLETION_COLUMNS = ("step_index", "completion_index", "text", "rating", "flagged")


@dataclass(frozen=True)
class LabelWrites:
    """What storing a label writes, whichever way: the label, its steps and their
    completions (rows of LABEL_COLUMNS, STEP_COLUMNS, COMPLETION_COLUMNS, without the new
    label's id), the assignment it completes and, for a task that took a slot, the
    solution's count of completed labels."""

    label: dict[str, Any]
    steps: list[dict[str, Any]]
    completions: list[dict[str, Any]]
    assignment_id: int
    holder_id: int
    counted_solution: int | None
    overlap: int
    """The project's overlap, for a solution without one of its own."""
    now: datetime

    def __post_init__(self) -> None:
        assert tuple(self.label) == LABEL_COLUMNS, "a label row has LABEL_COLUMNS"
        assert all(tuple(row) == STEP_COLUMNS for row in self.steps)
        assert all(tuple(row) == COMPLETION_COLUMNS for row in self.completions)


def write_label(connection: Connection, writes: LabelWrites) -> tuple[int | None, bool]:
    """Store ``writes``: the new label's id (None if the task has a label already) and
    whether the assignment was completed (if not, the caller's transaction must roll
    back: it is no longer the holder's)."""
    if connection.dialect.name == "postgresql":
        return write_label_at_once(connection, writes)
    return write_label_in_turn(connection, writes)


# The label's dedupe key is the assignment's: a second submit of one task inserts nothing.
_INSERT_LABEL = _insert_or_nothing(
    lambda insert: (
        insert(LABELS)
        .values({name: bindparam(name, type_=LABELS.c[name].type) for name in LABEL_COLUMNS})
        .on_conflict_do_nothing()
        .returning(LABELS.c.id)
    )
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
# A solution labeled ``overlap`` times leaves the queue.
_QUEUE_STATE_AFTER = case(
    (
        _completed_after >= func.coalesce(_S.overlap, bindparam("default_overlap")),
        QueueState.FULL.value,
    ),
    else_=_S.queue_state,
)
_COUNT_COMPLETION = (
    update(SOLUTIONS)
    .where(_S.id == bindparam("counted_solution"))
    .values(completed_count=_completed_after, queue_state=_QUEUE_STATE_AFTER)
)


def follow_default_overlap(connection: Connection, default_overlap: int) -> int:
    """Put each queued solution without an overlap of its own in the state the project's
    ``default_overlap`` gives it, as ``_QUEUE_STATE_AFTER`` does one label at a time: full
    once labeled that many times, else open. A raised overlap reopens the solutions the old
    one had filled (else they would wait forever, and their generation with them); a lowered
    one fills those it now covers. Returns how many solutions changed state."""
    state = case(
        (_S.completed_count >= default_overlap, QueueState.FULL.value),
        else_=QueueState.OPEN.value,
    )
    changed = connection.execute(
        update(SOLUTIONS)
        .where(
            _S.overlap.is_(None),
            _S.queue_state.in_((QueueState.OPEN.value, QueueState.FULL.value)),
            _S.queue_state != state,
        )
        .values(queue_state=state)
    )
    return changed.rowcount


def write_label_in_turn(connection: Connection, writes: LabelWrites) -> tuple[int | None, bool]:
    """``write_label`` one statement after another, in the caller's transaction (SQLite)."""
    label_id = _scalar(execute(connection, _INSERT_LABEL, writes.label))
    if label_id is None:
        return None, False
    completed = connection.execute(
        _COMPLETE,
        {
            "assignment_id": writes.assignment_id,
            "holder_id": writes.holder_id,
            "now": writes.now,
            "new_label_id": label_id,
        },
    )
    if completed.rowcount != 1:
        return label_id, False
    for table, rows in ((LABEL_STEPS, writes.steps), (STEP_COMPLETIONS, writes.completions)):
        if rows:
            connection.execute(table.insert(), [{"label_id": label_id, **row} for row in rows])
    if writes.counted_solution is not None:
        connection.execute(
            _COUNT_COMPLETION,
            {"counted_solution": writes.counted_solution, "default_overlap": writes.overlap},
        )
    return label_id, True


def _postgres_type(table: Table, name: str) -> str:
    return str(table.c[name].type.compile(dialect=_POSTGRES))


def _typed_parameters(table: Table, names: Sequence[str]) -> str:
    # Typed: in a SELECT list Postgres reads a parameter of no type (psycopg sends None so)
    # as text, which an integer column refuses.
    return ", ".join(f"CAST(%({name})s AS {_postgres_type(table, name)})" for name in names)


def _recordset(parameter: str, table: Table, names: Sequence[str]) -> str:
    """The rows of a JSON array parameter, as a table of the columns ``names``."""
    columns = ", ".join(f"{name} {_postgres_type(table, name)}" for name in names)
    return f"json_to_recordset(%({parameter})s::json) AS given ({columns})"


# The same writes in one statement, made from the same columns: one round trip instead of
# five, which on a busy server costs more than the writes (each wakes the database and the
# worker thread). The statement stands alone, with no transaction around it (app/core/db.py,
# core_autocommit): it locks the assignment and writes only while the assignment is this
# labeler's and open, so a label is stored with its assignment completed, or not at all.
# The solution's row, which a task with a slot counts its label in, is locked before the
# assignment (open_task waits for locked_solution), in the order a claim takes them: a
# claim holds that row while its insert waits for whoever holds the slot's assignment, so
# a submit that held the assignment while it waited for the row would deadlock with it.
# The sub-statements share one snapshot; foreign keys are checked at the statement's end,
# when the new label's rows exist. Steps and completions come as one JSON document
# each, so the SQL is the same for any number of them and Postgres prepares it once (and
# psycopg sends one string, which costs far less to encode than an array per column).
_WRITE_AT_ONCE = f"""
WITH locked_solution AS (
    SELECT id FROM solutions WHERE id = %(counted_solution)s FOR NO KEY UPDATE
), open_task AS (
    SELECT id FROM assignments
    WHERE id = %(assignment_id)s AND labeler_id = %(holder_id)s AND completed_at IS NULL
        AND (%(counted_solution)s IS NULL OR EXISTS (SELECT FROM locked_solution))
    FOR NO KEY UPDATE
), new_label AS (
    INSERT INTO labels ({", ".join(LABEL_COLUMNS)})
    SELECT {_typed_parameters(LABELS, LABEL_COLUMNS)}
    FROM open_task
    ON CONFLICT DO NOTHING
    RETURNING id
), completed AS (
    UPDATE assignments SET completed_at = %(now)s, label_id = new_label.id
    FROM new_label
    WHERE assignments.id = %(assignment_id)s
    RETURNING assignments.id
), steps AS (
    INSERT INTO label_steps (label_id, {", ".join(STEP_COLUMNS)})
    SELECT new_label.id, given.*
    FROM new_label, {_recordset("steps", LABEL_STEPS, STEP_COLUMNS)}
    WHERE EXISTS (SELECT FROM completed)
), completions AS (
    INSERT INTO step_completions (label_id, {", ".join(COMPLETION_COLUMNS)})
    SELECT new_label.id, given.*
    FROM new_label, {_recordset("completions", STEP_COMPLETIONS, COMPLETION_COLUMNS)}
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


def write_label_at_once(connection: Connection, writes: LabelWrites) -> tuple[int | None, bool]:
    """``write_label`` in one statement (Postgres)."""
    params = {
        **writes.label,
        "now": writes.now,
        "assignment_id": writes.assignment_id,
        "holder_id": writes.holder_id,
        "steps": json.dumps(writes.steps),
        "completions": json.dumps(writes.completions),
        "default_overlap": writes.overlap,
        "counted_solution": writes.counted_solution,
    }
    driver_connection = connection.connection.driver_connection
    assert driver_connection is not None
    row = driver_connection.execute(_WRITE_AT_ONCE, params).fetchone()
    assert row is not None
    return row[0], row[1]


_SAVED_LABEL = _statement(
    select(LABELS.c.id, LABELS.c.labeler_id).where(LABELS.c.dedupe_key == bindparam("dedupe_key"))
)


def saved_label(connection: Connection, dedupe_key: str) -> tuple[int, int] | None:
    """The id and labeler of the label stored under ``dedupe_key``, if there is one."""
    row = execute(connection, _SAVED_LABEL, {"dedupe_key": dedupe_key}).fetchone()
    return None if row is None else (row.id, row.labeler_id)
