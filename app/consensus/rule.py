"""The consensus rule on plain values (the package docstring says it in words)."""

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from app.models import FinishReason

JUDGING = frozenset({FinishReason.FOUND_ERROR.value, FinishReason.SOLUTION.value})
"""Finish reasons of labels that judge the solution's steps, and so vote."""


class Method(enum.StrEnum):
    UNANIMOUS = "unanimous"
    MAJORITY = "majority"
    SINGLE = "single"
    ADJUDICATED = "adjudicated"
    PHASE1 = "phase1"


class Status(enum.StrEnum):
    DECIDED = "decided"
    NEEDS_ADJUDICATION = "needs_adjudication"
    NO_VOTES = "no_votes"
    """No label judges the solution: nothing to give."""


@dataclass(frozen=True)
class Vote:
    """One label's ratings of a solution's own steps (None: not reached or not rated)."""

    label_id: int
    finish_reason: str | None
    ratings: Sequence[int | None]

    @property
    def judges(self) -> bool:
        return self.finish_reason in JUDGING


@dataclass(frozen=True)
class Consensus:
    status: Status
    method: Method | None
    ratings: tuple[int, ...]
    """Per step from the first, up to and including the first -1; empty unless decided."""
    voters: tuple[int, ...]
    """Label ids of the labels that voted."""
    tied_step: int | None = None
    """Where the vote tied (from 0), when marked for adjudication."""

    @property
    def finish_reason(self) -> str | None:
        if self.status != Status.DECIDED:
            return None
        negative = bool(self.ratings) and self.ratings[-1] == -1
        return (FinishReason.FOUND_ERROR if negative else FinishReason.SOLUTION).value


def consensus(votes: Sequence[Vote], step_count: int) -> Consensus:
    """The consensus of ``votes`` on a solution of ``step_count`` steps."""
    voting = [vote for vote in votes if vote.judges]
    voters = tuple(vote.label_id for vote in voting)
    if not voting:
        return Consensus(Status.NO_VOTES, None, (), voters)
    ratings: list[int] = []
    for step in range(step_count):
        rated = [r for vote in voting if (r := _rating(vote, step)) is not None]
        negative = sum(1 for rating in rated if rating == -1)
        others = len(rated) - negative
        if not rated:
            # Nobody reached the step: a voter finished as "solution" without rating it.
            return Consensus(Status.NEEDS_ADJUDICATION, None, (), voters, tied_step=step)
        if negative == others:
            return Consensus(Status.NEEDS_ADJUDICATION, None, (), voters, tied_step=step)
        if negative > others:
            ratings.append(-1)
            break
        positive = sum(1 for rating in rated if rating == 1)
        ratings.append(1 if positive > others - positive else 0)
    return Consensus(Status.DECIDED, _method(voting, ratings), tuple(ratings), voters)


def _rating(vote: Vote, step: int) -> int | None:
    """The vote's rating of ``step``; None past its first negative step or its end."""
    ratings = vote.ratings
    if step >= len(ratings) or any(r == -1 for r in ratings[:step]):
        return None
    return ratings[step]


def _method(voting: Sequence[Vote], ratings: Sequence[int]) -> Method:
    if len(voting) == 1:
        return Method.SINGLE
    own = [tuple(_rating(vote, step) for step in range(len(ratings))) for vote in voting]
    return Method.UNANIMOUS if all(path == tuple(ratings) for path in own) else Method.MAJORITY


def valid_path(ratings: Sequence[int], step_count: int) -> str | None:
    """Why ``ratings`` cannot be a solution's final ratings, or None when they can: each in
    -1, 0, +1, ending at the first -1, covering every step when none is -1."""
    if any(rating not in (-1, 0, 1) for rating in ratings):
        return "a rating must be -1, 0 or +1"
    if len(ratings) > step_count:
        return f"the solution has {step_count} steps, not {len(ratings)}"
    if -1 in ratings and ratings.index(-1) != len(ratings) - 1:
        return f"step {ratings.index(-1) + 1} is negative: the steps after it cannot be rated"
    if -1 not in ratings and len(ratings) < step_count:
        return f"rate every step (only {len(ratings)} of {step_count} are), or one as negative"
    return None
