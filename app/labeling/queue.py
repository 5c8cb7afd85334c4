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
instead of colliding; on SQLite, write transactions are serialized (app/core/db.py).

Every labeler asks for a task after every submit: a new task usually costs three
statements, the current lease, the head of the queue, the insert (on Postgres two: the head
is claimed by the statement that finds it). The statements are in app/labeling/repository.py.
"""

import random
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Protocol

from sqlalchemy import Connection

from app.labeling import repository
from app.labeling.repository import CANDIDATES_PER_TRY, Lease
from app.models import Role, utc_now


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
        question = repository.screening_question(connection, labeler.id)
        return _assign_shared(connection, labeler, rules, now, question)
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
    return repository.extend_lease(connection, lease, (now or utc_now()) + rules.lease)


def _assign_shared(
    connection: Connection,
    labeler: Labeler,
    rules: QueueRules,
    now: datetime,
    solution_id: int | None,
    qc_generation: int | None = None,
) -> Lease | None:
    """Screening and QC questions go to every labeler once: no slot, no overlap."""
    if solution_id is None:
        return None
    return repository.insert_lease(
        connection, solution_id, labeler.id, None, now, now + rules.lease, qc_generation
    )


def _assign_quality_control(
    connection: Connection, labeler: Labeler, rules: QueueRules, now: datetime
) -> Lease | None:
    """A QC question of the current round if the worker has opened generations, else any."""
    round_ = repository.quality_control_round(connection)
    if round_ is None:
        question = repository.any_quality_control_question(connection, labeler.id)
        return _assign_shared(connection, labeler, rules, now, question)
    question = repository.quality_control_question(connection, labeler.id, round_)
    return _assign_shared(connection, labeler, rules, now, question, qc_generation=round_)


def _assign_regular(
    connection: Connection, labeler: Labeler, rules: QueueRules, now: datetime
) -> Lease | None:
    until = now + rules.lease
    # Each try takes the head of the queue that no concurrent request has locked (Postgres
    # skips their rows; SQLite serializes writers anyway), so requests spread over the
    # queue instead of queueing behind one row. Those tried are excluded: they have no slot
    # for this labeler, and a row this request locked itself (in a transaction; the
    # labeling requests' statements commit alone) is not skipped. The slot constraint
    # settles any race.
    # When every candidate is locked by others, the first try waits for the head instead:
    # its holder may leave a slot free, and "nothing to label" should mean nothing. Only
    # the first: a request that holds a lock and waits for another could deadlock.
    tried: list[int] = []
    for _ in range(CANDIDATES_PER_TRY):
        head = repository.claim_head(connection, labeler.id, rules.overlap, now, until, tried)
        if head is None and not tried:
            head = repository.claim_head(
                connection, labeler.id, rules.overlap, now, until, wait=True
            )
        if head is None:
            return None
        lease: Lease | None
        if head.claimed_id is not None:
            lease = Lease(
                head.claimed_id, head.solution_id, labeler.id, head.claimed_slot, now, until
            )
        else:
            lease = _claim_after_race(
                connection, labeler, rules, now, head.solution_id, head.overlap
            )
        if lease is not None:
            return replace(lease, content=head.content)
        tried.append(head.solution_id)
    return None


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
    used = repository.used_slots(connection, solution_id)
    for slot in sorted(set(range(overlap)) - used):
        lease = repository.insert_lease(connection, solution_id, labeler.id, slot, now, until)
        if lease is not None:
            return lease
    return repository.take_over_expired_slot(connection, solution_id, labeler.id, now, until)
