"""Consensus and adjudication against the database: the votes of each solution's counted
labels, the adjudications that override them, and an adjudicator's decision."""

import uuid
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import BaseModel
from sqlalchemy import ColumnElement, select
from sqlalchemy.orm import Session

from app import audit, prm800k
from app.consensus.rule import Consensus, Method, Status, Vote, consensus, valid_path
from app.figures import newest_first, regular_label_conditions
from app.models import (
    LABELS,
    PROBLEMS,
    SOLUTIONS,
    STEP_COMPLETIONS,
    USERS,
    Adjudication,
    TaskStyle,
    User,
    utc_now,
)

CONSENSUS_LABELER = str(uuid.uuid5(uuid.NAMESPACE_URL, "https://steplabel/consensus"))
"""The ``labeler`` of a consensus line: one fixed UUID that no person has."""
PROVENANCE_KEY = prm800k.CONSENSUS_KEY
"""The side field of a consensus line; PRM800K's readers ignore keys they do not know."""


class AdjudicationError(ValueError):
    """An adjudication that cannot be stored; the message says why."""


@dataclass(frozen=True)
class CountedLabel:
    label_id: int
    solution_id: int | None
    labeler_uuid: str
    labeler_name: str
    finish_reason: str | None
    timestamp: datetime
    generation: int | None
    phase1: bool


@dataclass
class SolutionVotes:
    """A solution's counted labels, their votes, and its adjudication if it has one."""

    solution_id: int
    step_count: int
    labels: list[CountedLabel] = field(default_factory=list)
    votes: list[Vote] = field(default_factory=list)
    adjudication: Adjudication | None = None
    adjudicator: tuple[str, str] | None = None
    """(UUID, name) of the adjudicator."""

    @property
    def phase1(self) -> bool:
        return any(label.phase1 for label in self.labels)

    def consensus(self) -> Consensus:
        """The adjudicated ratings where there are some, else the vote's consensus."""
        voted = consensus(self.votes, self.step_count)
        if self.adjudication is None:
            return voted
        ratings = tuple(self.adjudication.ratings)
        return Consensus(Status.DECIDED, Method.ADJUDICATED, ratings, voted.voters)


def counted_labels(
    session: Session, conditions: Sequence[ColumnElement[bool]] = (), solution_id: int | None = None
) -> list[CountedLabel]:
    """The regular labels consensus counts, each labeler's latest on a solution (every
    phase-1 label without a solution), within ``conditions`` on labels and users."""
    where = [*regular_label_conditions(None), *conditions]
    if solution_id is not None:
        where.append(LABELS.c.solution_id == solution_id)
    ranked = (
        select(
            LABELS.c.id,
            LABELS.c.solution_id,
            USERS.c.uuid,
            USERS.c.name,
            LABELS.c.finish_reason,
            LABELS.c.timestamp,
            LABELS.c.generation,
            SOLUTIONS.c.style,
            newest_first().label("newest_first"),
        )
        .join(USERS, USERS.c.id == LABELS.c.labeler_id)
        .outerjoin(SOLUTIONS, SOLUTIONS.c.id == LABELS.c.solution_id)
        .where(*where)
        .subquery()
    )
    rows = session.execute(
        select(ranked)
        .where((ranked.c.newest_first == 1) | ranked.c.solution_id.is_(None))
        .order_by(ranked.c.id)
    ).all()
    return [
        CountedLabel(
            label_id=row.id,
            solution_id=row.solution_id,
            labeler_uuid=row.uuid,
            labeler_name=row.name,
            finish_reason=row.finish_reason,
            timestamp=row.timestamp,
            generation=row.generation,
            phase1=row.solution_id is None or row.style == TaskStyle.PHASE1.value,
        )
        for row in rows
    ]


def solution_votes(session: Session, labels: Sequence[CountedLabel]) -> dict[int, SolutionVotes]:
    """Per solution of ``labels`` (phase-1 labels without one aside): its votes and its
    adjudication."""
    on_solutions = [label for label in labels if label.solution_id is not None]
    solution_ids = sorted({label.solution_id for label in on_solutions if label.solution_id})
    step_counts = dict(
        session.execute(
            select(SOLUTIONS.c.id, SOLUTIONS.c.steps).where(SOLUTIONS.c.id.in_(solution_ids))
        ).all()
    )
    by_solution = {
        solution_id: SolutionVotes(solution_id, len(step_counts[solution_id] or []))
        for solution_id in solution_ids
    }
    ratings = _own_ratings(session, [label.label_id for label in on_solutions])
    for label in on_solutions:
        assert label.solution_id is not None
        votes = by_solution[label.solution_id]
        votes.labels.append(label)
        own = ratings.get(label.label_id, {})
        path = [own.get(step) for step in range(max(own, default=-1) + 1)]
        votes.votes.append(Vote(label.label_id, label.finish_reason, path))
    for adjudication, adjudicator_uuid, adjudicator_name in session.execute(
        select(Adjudication, User.uuid, User.name)
        .join(User, User.id == Adjudication.adjudicator_id)
        .where(Adjudication.solution_id.in_(solution_ids))
    ).all():
        votes = by_solution[adjudication.solution_id]
        votes.adjudication = adjudication
        votes.adjudicator = (adjudicator_uuid, adjudicator_name)
    return by_solution


def _own_ratings(session: Session, label_ids: Sequence[int]) -> dict[int, dict[int, int | None]]:
    """Per label, its rating of each step's own completion (completion 0)."""
    ratings: dict[int, dict[int, int | None]] = defaultdict(dict)
    completions = STEP_COMPLETIONS.c
    # In chunks: a list of bound parameters has limits on both databases.
    for start in range(0, len(label_ids), 5000):
        chunk = label_ids[start : start + 5000]
        for label_id, step_index, rating in session.execute(
            select(completions.label_id, completions.step_index, completions.rating).where(
                completions.label_id.in_(chunk), completions.completion_index == 0
            )
        ).all():
            ratings[label_id][step_index] = rating
    return ratings


def consensus_record(session: Session, votes: SolutionVotes) -> dict[str, Any] | None:
    """The one PRM800K line of a decided, voted or adjudicated solution, its provenance in
    ``PROVENANCE_KEY``; None when the solution has no consensus (marked or no votes)."""
    decided = votes.consensus()
    if decided.status != Status.DECIDED:
        return None
    solution = session.execute(
        select(
            SOLUTIONS.c.steps,
            SOLUTIONS.c.answer,
            SOLUTIONS.c.verifier_score,
            SOLUTIONS.c.source_id,
            PROBLEMS.c.text,
            PROBLEMS.c.ground_truth_solution,
            PROBLEMS.c.ground_truth_answer,
        )
        .join(PROBLEMS, PROBLEMS.c.id == SOLUTIONS.c.problem_id)
        .where(SOLUTIONS.c.id == votes.solution_id)
    ).one()
    texts = solution.steps or []
    steps = [
        prm800k.step_dict(
            [prm800k.completion_dict(texts[index], rating, None)], None, 0 if rating >= 0 else None
        )
        for index, rating in enumerate(decided.ratings)
    ]
    voters = [label for label in votes.labels if label.label_id in decided.voters]
    adjudication = votes.adjudication
    timestamp = (
        adjudication.decided_at
        if adjudication is not None
        else max(label.timestamp for label in voters)
    )
    line = prm800k.record_dict(
        labeler=CONSENSUS_LABELER,
        timestamp=timestamp,
        generation=_generation(votes.labels),
        is_quality_control=False,
        is_initial_screening=False,
        question=prm800k.question_dict(
            solution.text,
            solution.ground_truth_solution,
            solution.ground_truth_answer,
            (texts, solution.answer, solution.verifier_score),
        ),
        steps=steps,
        total_time=None,
        finish_reason=decided.finish_reason,
        external_id=solution.source_id,  # as every export writes it: pipelines join by it
    )
    line[PROVENANCE_KEY] = provenance(votes, decided)
    return line


def _generation(labels: Iterable[CountedLabel]) -> int | None:
    """The generation of the solution's latest counted label."""
    latest = max(labels, key=lambda label: (label.timestamp, label.label_id))
    return latest.generation


def provenance(
    votes: SolutionVotes | None, decided: Consensus, label: CountedLabel | None = None
) -> dict[str, Any]:
    """What a consensus line says about where it came from."""
    adjudication = votes.adjudication if votes is not None else None
    labels = votes.labels if votes is not None else [label] if label is not None else []
    return {
        "solution_id": votes.solution_id if votes is not None else None,
        "method": decided.method.value if decided.method is not None else None,
        "labels": [
            {
                "label_id": counted.label_id,
                "labeler": counted.labeler_uuid,
                "voted": counted.label_id in decided.voters,
            }
            for counted in labels
        ],
        "adjudicated_by": votes.adjudicator[0] if votes and votes.adjudicator else None,
        "adjudicated_at": adjudication.decided_at.isoformat() if adjudication else None,
        "source_label_id": adjudication.source_label_id if adjudication else None,
    }


# Adjudication.


class AdjudicationView(BaseModel):
    """A solution's consensus as its drill-down page shows it."""

    status: str
    method: str | None
    ratings: list[int]
    tied_step: int | None
    """From 0."""
    finish_reason: str | None
    phase1: bool
    adjudicated_by: str | None
    adjudicated_at: datetime | None
    source_label_id: int | None


def final_labels(session: Session, solution_ids: Sequence[int]) -> dict[int, str]:
    """Per solution, its final label in a word or two: "needs adjudication", "adjudicated",
    "majority", "unanimous", "single", "phase 1" or "no judging label"."""
    if not solution_ids:
        return {}
    labels = counted_labels(session, [LABELS.c.solution_id.in_(solution_ids)])
    words = {}
    for solution_id, votes in solution_votes(session, labels).items():
        decided = votes.consensus()
        if votes.phase1:
            words[solution_id] = "phase 1"
        elif decided.status == Status.DECIDED and decided.method is not None:
            words[solution_id] = decided.method.value
        else:
            words[solution_id] = decided.status.value.replace("_", " ").replace(
                "no votes", "no judging label"
            )
    return words


def solution_consensus(session: Session, solution_id: int) -> AdjudicationView:
    """The consensus of one solution, with who adjudicated it and when."""
    labels = counted_labels(session, solution_id=solution_id)
    votes = solution_votes(session, labels).get(solution_id)
    if votes is None:
        decided = consensus([], 0)
        return AdjudicationView(
            status=decided.status.value,
            method=None,
            ratings=[],
            tied_step=None,
            finish_reason=None,
            phase1=False,
            adjudicated_by=None,
            adjudicated_at=None,
            source_label_id=None,
        )
    decided = (
        Consensus(Status.DECIDED, Method.PHASE1, (), ()) if votes.phase1 else votes.consensus()
    )
    adjudication = votes.adjudication
    return AdjudicationView(
        status=decided.status.value,
        method=decided.method.value if decided.method else None,
        ratings=list(decided.ratings),
        tied_step=decided.tied_step,
        finish_reason=decided.finish_reason if not votes.phase1 else None,
        phase1=votes.phase1,
        adjudicated_by=votes.adjudicator[1] if votes.adjudicator else None,
        adjudicated_at=adjudication.decided_at if adjudication else None,
        source_label_id=adjudication.source_label_id if adjudication else None,
    )


def adjudicate(
    session: Session,
    solution_id: int,
    adjudicator_id: int,
    *,
    ratings: Sequence[int] | None = None,
    source_label_id: int | None = None,
) -> Adjudication:
    """Store the final ratings of a solution: one counted label's (``source_label_id``) or
    ``ratings`` as given. Replaces an earlier decision; flushes, never commits."""
    labels = counted_labels(session, solution_id=solution_id)
    votes = solution_votes(session, labels).get(solution_id)
    if votes is None or not votes.labels:
        raise AdjudicationError(f"solution {solution_id} has no labels to adjudicate")
    if votes.phase1:
        raise AdjudicationError("phase-1 labels are not voted on: each stays its own line")
    if source_label_id is not None:
        vote = next((v for v in votes.votes if v.label_id == source_label_id), None)
        if vote is None:
            raise AdjudicationError(
                f"label {source_label_id} is not a counted label of this solution"
            )
        if not vote.judges:
            raise AdjudicationError(f"label {source_label_id} did not judge the solution's steps")
        path = consensus([vote], votes.step_count).ratings
        ratings = list(path)
    if ratings is None:
        raise AdjudicationError("choose a label or give the ratings")
    problem = valid_path(ratings, votes.step_count)
    if problem is not None:
        raise AdjudicationError(problem)
    row = session.get(Adjudication, solution_id)
    # A new decision overwrites the row: the audit log keeps the one it replaces.
    before = None if row is None else _decision(row)
    if row is None:
        row = Adjudication(solution_id=solution_id)
        session.add(row)
    row.ratings = list(ratings)
    row.source_label_id = source_label_id
    row.adjudicator_id = adjudicator_id
    row.decided_at = utc_now()
    session.flush()
    adjudicator = session.get(User, adjudicator_id)
    audit.record(
        session,
        adjudicator,
        "consensus.adjudicate",
        f"solution {solution_id}",
        before,
        _decision(row),
    )
    return row


def clear_adjudication(session: Session, solution_id: int, admin: User) -> None:
    """Undo a solution's adjudication: its labels' vote decides again (a tie needs
    adjudication again). The audit log keeps the decision cleared. AdjudicationError when
    there is none; flushes, never commits."""
    row = session.get(Adjudication, solution_id)
    if row is None:
        raise AdjudicationError(f"solution {solution_id} is not adjudicated: nothing to clear")
    before = _decision(row)
    session.delete(row)
    session.flush()
    audit.record(session, admin, "consensus.clear", f"solution {solution_id}", before, None)


def _decision(row: Adjudication) -> dict[str, Any]:
    """An adjudication as the audit log keeps it."""
    return {
        "ratings": list(row.ratings),
        "source_label_id": row.source_label_id,
        "adjudicator_id": row.adjudicator_id,
        "decided_at": row.decided_at.isoformat() if row.decided_at else None,
    }
