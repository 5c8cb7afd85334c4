"""Active learning: choose the solutions humans should label next.

The default is the rule of "Let's Verify Step by Step" (section 4.2): per problem, rank
the unlabeled solutions by the current PRM's score and take K, mostly the highest-scored
solutions whose final answer is wrong (the PRM is fooled by them, so their labels teach it
the most), the rest the highest-scored of the others (right or ungraded; wrong ones only
where a problem has too few others). The share of wrong answers holds for the whole
selection, exactly where the pool allows: problems' quotas are rounded by largest remainder.

Other strategies, for comparison (bench/active_learning.py measures them):
- ``uniform``: K solutions per problem at random;
- ``random_wrong``: the same share of wrong answers, but picked at random (wrong, not
  necessarily convincing);
- ``uncertain``: the solutions whose first error the PRM is least sure of (the entropy of
  its distribution over "first error at step i, or none").
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

Strategy = Literal["convincing_wrong", "uniform", "random_wrong", "uncertain"]
STRATEGIES: tuple[Strategy, ...] = ("convincing_wrong", "uniform", "random_wrong", "uncertain")


@dataclass(frozen=True)
class Candidate:
    solution_id: int
    problem_id: int
    score: float
    """The PRM's solution score: the product of its step scores."""
    answer_correct: bool | None
    """The graded final answer; None where it could not be graded."""
    uncertainty: float = 0.0
    """The entropy of the PRM's first-error prediction (``first_error_entropy``)."""


def first_error_entropy(step_scores: Sequence[float]) -> float:
    """Entropy (nats) of P(first error at step i) = prod(p[:i]) (1 - p[i]), P(none) = prod(p).

    ``step_scores`` are P(step is fine). High when the PRM cannot tell where (or whether)
    the solution goes wrong.
    """
    masses = []
    survive = 1.0
    for score in step_scores:
        masses.append(survive * (1.0 - score))
        survive *= score
    masses.append(survive)
    return -sum(m * math.log(m) for m in masses if m > 0)


@dataclass(frozen=True)
class SelectionPlan:
    strategy: Strategy = "convincing_wrong"
    per_problem: int = 4
    wrong_share: float = 0.8
    global_top_k: int | None = None
    """Select this many over the whole pool instead of ``per_problem`` per problem."""
    max_size: int | None = None
    """At most this many in all: whole problems are taken in turn until it is reached."""
    seed: int = 0


def select(candidates: Iterable[Candidate], plan: SelectionPlan) -> list[int]:
    """Solution ids to queue, grouped by problem (in the order problems were taken)."""
    pool = list(candidates)
    rng = random.Random(plan.seed)
    if plan.global_top_k is not None:
        groups = [pool]
        sizes = [min(plan.global_top_k, len(pool), plan.max_size or len(pool))]
    else:
        groups = _problems_in_turn(pool, plan.strategy, rng)
        sizes = _capped([min(plan.per_problem, len(g)) for g in groups], plan.max_size)
    pairs = list(zip(groups, sizes, strict=True))
    if plan.strategy == "uniform":
        return [c.solution_id for group, size in pairs for c in rng.sample(group, size)]
    if plan.strategy == "uncertain":
        return [c.solution_id for group, size in pairs for c in _most_uncertain(group, size)]
    wrong = [sum(c.answer_correct is False for c in g) for g in groups]
    floors = [max(0, size - (len(g) - w)) for (g, size), w in zip(pairs, wrong, strict=True)]
    capacities = [min(size, w) for size, w in zip(sizes, wrong, strict=True)]
    quotas = wrong_quotas(sizes, capacities, plan.wrong_share, floors)
    at_random = plan.strategy == "random_wrong"
    chosen: list[int] = []
    for group, size, quota in zip(groups, sizes, quotas, strict=True):
        chosen += _take(group, size, quota, rng if at_random else None)
    return chosen


def wrong_quotas(
    sizes: Sequence[int],
    capacities: Sequence[int],
    share: float,
    floors: Sequence[int] | None = None,
) -> list[int]:
    """How many wrong answers each group gives, ``share`` of all exactly where possible.

    The total is ``share`` of the sizes' sum, rounded half up. Each group first gets the
    whole part of its own share (at least its floor: a group with too few other answers
    must give wrong ones); the units left go one at a time to the groups with the largest
    remainders (then any with room), never beyond a group's ``capacities``.
    """
    floors = floors or [0] * len(sizes)
    target = math.floor(sum(sizes) * share + 0.5)
    ideal = [size * share for size in sizes]
    quotas = [
        min(max(math.floor(q), f), c) for q, f, c in zip(ideal, floors, capacities, strict=True)
    ]
    order = sorted(range(len(sizes)), key=lambda i: (-(ideal[i] - math.floor(ideal[i])), i))
    left = target - sum(quotas)
    while left > 0 and any(q < c for q, c in zip(quotas, capacities, strict=True)):
        for index in order:
            if left and quotas[index] < capacities[index]:
                quotas[index] += 1
                left -= 1
    while left < 0 and any(q > f for q, f in zip(quotas, floors, strict=True)):
        for index in reversed(order):
            if left and quotas[index] > floors[index]:
                quotas[index] -= 1
                left += 1
    return quotas


def _problems_in_turn(
    pool: list[Candidate], strategy: Strategy, rng: random.Random
) -> list[list[Candidate]]:
    """The candidates grouped by problem, in the order problems are taken under a cap.

    Convincing strategies take first the problems whose most convincing solution scores
    highest; the others take problems in a random (seeded) order.
    """
    by_problem: dict[int, list[Candidate]] = defaultdict(list)
    for candidate in pool:
        by_problem[candidate.problem_id].append(candidate)
    groups = [by_problem[p] for p in sorted(by_problem)]
    if strategy == "convincing_wrong":
        groups.sort(key=lambda g: -max(c.score for c in g))
    elif strategy == "uncertain":
        groups.sort(key=lambda g: -max(c.uncertainty for c in g))
    else:
        rng.shuffle(groups)
    return groups


def _capped(sizes: list[int], max_size: int | None) -> list[int]:
    if max_size is None:
        return sizes
    capped = []
    room = max_size
    for size in sizes:
        capped.append(min(size, room))
        room -= capped[-1]
    return capped


def _ranked(group: list[Candidate]) -> list[Candidate]:
    # Ties in score go to the older solution, so selections are reproducible.
    return sorted(group, key=lambda c: (-c.score, c.solution_id))


def _most_uncertain(group: list[Candidate], size: int) -> list[Candidate]:
    return sorted(group, key=lambda c: (-c.uncertainty, c.solution_id))[:size]


def _take(group: list[Candidate], size: int, wrong: int, rng: random.Random | None) -> list[int]:
    """``wrong`` wrong answers and ``size - wrong`` others, right or ungraded ones first:
    the highest scored, or with ``rng`` at random."""
    ordered = _ranked(group) if rng is None else rng.sample(group, len(group))
    wrong_ones = [c for c in ordered if c.answer_correct is False]
    others = [c for c in ordered if c.answer_correct is not False]
    taken = wrong_ones[:wrong]
    taken += (others + wrong_ones[wrong:])[: size - len(taken)]
    return [c.solution_id for c in _ranked(taken)]
