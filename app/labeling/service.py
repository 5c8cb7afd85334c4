"""The labeling requests' units of work, and the plain functions behind the labeling pages.

``take_next_task``, ``submit`` and ``keep_lease`` come with every task a labeler does. Each
does its whole unit of work (check the login, the queue or the label) on one plain
connection, instead of an ORM session; on Postgres each of its writes is one statement that
commits by itself (see ``core_autocommit``). The routes call them in a database thread, and
bench/labeling_database.py calls them directly. Each is safe to run twice, and is run again
once when Postgres ends it to break a deadlock (``retried_once_on_conflict``).
"""

import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from fastapi import HTTPException
from sqlalchemy import Connection, Engine
from sqlalchemy.orm import Session

from app.auth.sessions import Login, Viewer, check_login, viewer_of
from app.core.config import Settings, get_settings
from app.core.db import core_autocommit, retried_once_on_conflict
from app.labeling import repository
from app.labeling.queue import QueueRules, assign_new, extend_lease, resume
from app.labeling.repository import Lease
from app.labeling.submission import SavedLabel, SubmissionInput, save_label
from app.models import utc_now
from app.project_settings import get_value, runtime_settings, set_value

DEFAULT_GUIDELINES = (Path(__file__).parent / "guidelines.md").read_text()
GUIDELINES_KEY = "guidelines"


def queue_rules(connection: Connection, settings: Settings) -> QueueRules:
    values = runtime_settings(connection, settings)
    return QueueRules(
        lease=timedelta(minutes=settings.lease_minutes),
        overlap=int(values["overlap"]),
        qc_rate=float(values["qc_rate"]),
    )


@dataclass(frozen=True)
class TaskView:
    """What the labeling page shows for one task."""

    assignment_id: int
    problem: str
    reference_answer: str | None
    steps: list[str]
    alternatives: list[list[str]]
    style: str
    leased_at: datetime
    """When the labeler took the task: with their id, it tells the page's drafts of one
    holder of the task from another's (a take-over moves the row to a new labeler)."""
    expires_at: datetime


def task_view(connection: Connection, lease: Lease) -> TaskView:
    """What the labeling page shows for the leased task."""
    content = lease.content or repository.task_content(connection, lease.solution_id)
    steps = content.steps or []
    alternatives = list(content.alternatives or [])
    alternatives += [[] for _ in range(len(steps) - len(alternatives))]
    return TaskView(
        assignment_id=lease.id,
        problem=content.problem,
        reference_answer=content.reference_answer,
        steps=steps,
        alternatives=alternatives[: len(steps)],
        style=content.style,
        leased_at=lease.leased_at,
        expires_at=lease.expires_at,
    )


@retried_once_on_conflict
def take_next_task(login: Login) -> tuple[Viewer, TaskView | None]:
    """The logged-in labeler (401 if the login ended) and their current task or a new one;
    None when nothing is left for them."""
    with core_autocommit() as connection:
        viewer, lease = next_lease(connection, login, utc_now())
        return viewer, task_view(connection, lease) if lease else None


def next_lease(
    connection: Connection,
    login: Login,
    now: datetime,
    rules: QueueRules | None = None,
    rng: random.Random | None = None,
) -> tuple[Viewer, Lease | None]:
    """The logged-in labeler (401 if the login ended) and their current task back (its
    lease renewed if it ran out) or a new one; None when nothing is left for them.

    ``rules``: the project's (``queue_rules``) unless given; ``rng`` draws the QC share."""
    # The login is checked by the query that finds the open task (one round trip).
    row, current = repository.labeler_and_open_lease(connection, login.user_id)
    viewer = viewer_of(row, login)
    rules = rules or queue_rules(connection, get_settings())
    lease = resume(connection, current, rules, now) or assign_new(
        connection, viewer, rules, now, rng
    )
    return viewer, lease


def had_screening(login: Login) -> bool:
    """Whether the labeler was given screening questions: a labeler who waits for approval
    without any learns that none were set, not that their screening is done."""
    with core_autocommit() as connection:
        return repository.had_screening(connection, login.user_id)


@retried_once_on_conflict
def submit(login: Login, assignment_id: int, body: SubmissionInput) -> SavedLabel:
    """Store the task's label once (SubmissionError if it breaks a rule, LeaseLost if the
    task is no longer the labeler's); 404 for a task that is not theirs."""
    with core_autocommit() as connection:
        return submit_label(connection, login, assignment_id, body, utc_now())


def submit_label(
    connection: Connection,
    login: Login,
    assignment_id: int,
    body: SubmissionInput,
    now: datetime,
    rules: QueueRules | None = None,
) -> SavedLabel:
    """``submit``'s work on ``connection``; ``rules``: the project's unless given."""
    # The login is checked by the query that finds the task (one round trip).
    row, task = repository.labeler_and_task(connection, login.user_id, assignment_id)
    viewer = viewer_of(row, login)
    if task is None or task.labeler_id != viewer.id:
        raise _not_yours()
    rules = rules or queue_rules(connection, get_settings())
    return save_label(connection, task, viewer, body, overlap=rules.overlap, now=now)


@retried_once_on_conflict
def keep_lease(login: Login, assignment_id: int) -> None:
    """Keep the labeler's open task theirs while their page is open: 404 for a task that is
    not theirs (one taken over after its lease ran out is another labeler's now), 409 for
    one that is finished, or taken over while this request ran."""
    with core_autocommit() as connection:
        viewer = check_login(connection, login)
        lease = repository.lease_of(connection, assignment_id)
        if lease is None or lease.labeler_id != viewer.id:
            raise _not_yours()
        if not extend_lease(connection, lease, queue_rules(connection, get_settings())):
            raise HTTPException(409, "This task is finished or no longer yours.")


def _not_yours() -> HTTPException:
    # 404, not 403, for anyone else's task: ids reveal nothing.
    return HTTPException(404, "There is no such task of yours.")


def guidelines(session: Session) -> str:
    text: str = get_value(session, GUIDELINES_KEY, DEFAULT_GUIDELINES)
    return text


def set_default_overlap(session: Session, overlap: int) -> int:
    """The project's overlap changed to ``overlap``: the queue follows (solutions opened or
    filled, ``repository.follow_default_overlap``); how many changed."""
    return repository.follow_default_overlap(session.connection(), overlap)


def follow_configured_overlap(engine: Engine, settings: Settings) -> int:
    """At process start: the queue follows the project's overlap as it stands, as
    ``set_default_overlap`` does when an admin changes it. An operator may have changed
    STEPLABEL_OVERLAP since the last start (an admin's overlap, stored, wins over it); how
    many solutions changed."""
    with engine.begin() as connection:
        overlap = int(runtime_settings(connection, settings)["overlap"])
        return repository.follow_default_overlap(connection, overlap)


def save_guidelines(session: Session, text: str) -> None:
    set_value(session, GUIDELINES_KEY, text)
