"""Active learning: choose the solutions humans should label next.

A selection takes K solutions per problem (problems in the strategy's order, up to a size
cap), or the top K of the whole pool (``global_top_k``). The strategies
(``STEPLABEL_SELECT_STRATEGY``; bench/active_learning.py measures them and BENCHMARKS.md
holds the figures):

- ``convincing_wrong``, the rule of "Let's Verify Step by Step" (section 4.2): per problem,
  ``wrong_share`` of the K (rounded half up: 3 of 4, 4 of 5) are the highest-scored
  solutions whose final answer is wrong (the PRM is fooled by them), the rest the
  highest-scored of what remains, right or wrong;
- ``uniform``: at random;
- ``random_wrong``: the paper's shape, with its picks at random (wrong, not convincing);
- ``uncertain``: the largest entropy of the PRM's first-error prediction (where is the first
  error, if any?), the ensemble's mixture where the head has several members;
- ``disagreement``: the members' disagreement alone (BALD: the mutual information between
  the first error and which member predicts it), what more labels can settle;
- ``ensemble``: ActPRM's rule (Duan et al. 2025): a step is uncertain when its P(fine) is
  near one half (aleatoric) or its members disagree (epistemic); a solution ranks by its
  most uncertain step up to the first one the PRM calls wrong (the steps a labeler rates);
- ``convincing_uncertain``, the paper's intent with uncertainty: the first-error entropy
  times the chance that the PRM's verdict on the whole solution contradicts its graded
  answer (its score for a wrong answer, one minus it for a right one);
- ``diverse``: ``ensemble``'s ranking, spread over the feature space: each pick's priority
  is discounted by its nearness to the picks before it, so one round does not spend its
  labels on near-copies.

Uncertainty comes from the head's members (worker/head.py): several heads on the same
cached features, so it costs one cheap pass over them.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from app.core.config import STRATEGIES, Strategy


def as_strategy(name: str) -> Strategy:
    """``name`` as a strategy, or ValueError naming the strategies there are."""
    for strategy in STRATEGIES:
        if strategy == name:
            return strategy
    raise ValueError(f"no selection strategy {name!r}: one of {', '.join(STRATEGIES)}")


@dataclass(frozen=True)
class Uncertainty:
    """How unsure the PRM is of a solution (see ``uncertainty_of``)."""

    total: float = 0.0
    """Entropy (nats) of the first error's distribution under the members' mixture."""
    epistemic: float = 0.0
    """Its part the members disagree on: the mutual information (0 with one member)."""
    steps: float = 0.0
    """ActPRM's: the most uncertain step up to the predicted first error, in [0, 1]; a
    step's uncertainty is the mean of its aleatoric part (the binary entropy of its mean
    P(fine), in bits) and its epistemic part (twice the members' standard deviation)."""


@dataclass(frozen=True)
class Candidate:
    solution_id: int
    problem_id: int
    score: float
    """The PRM's solution score: the product of its step scores."""
    answer_correct: bool | None
    """The graded final answer; None where it could not be graded."""
    uncertainty: Uncertainty = Uncertainty()
    embedding: np.ndarray | None = field(default=None, compare=False)
    """Where the solution sits in feature space (``diverse``): ``StepHead.embedding``."""


def first_error_masses(step_scores: Sequence[float]) -> list[float]:
    """P(first error at step i) = prod(p[:i]) (1 - p[i]), then P(none) = prod(p)."""
    masses = []
    survive = 1.0
    for score in step_scores:
        masses.append(survive * (1.0 - score))
        survive *= score
    masses.append(survive)
    return masses


def _entropy(masses: Iterable[float]) -> float:
    return -sum(m * math.log(m) for m in masses if m > 0)


def first_error_entropy(step_scores: Sequence[float]) -> float:
    """Entropy (nats) of the first-error distribution, given P(step is fine) per step.

    High when the PRM cannot tell where (or whether) the solution goes wrong.
    """
    return _entropy(first_error_masses(step_scores))


def uncertainty_of(member_scores: np.ndarray) -> Uncertainty:
    """The uncertainties of one solution from (members, steps) P(step is fine)."""
    if member_scores.shape[1] == 0:
        return Uncertainty()
    members = np.array([first_error_masses(row) for row in member_scores])
    mixture = members.mean(axis=0)
    total = _entropy(mixture)
    aleatoric = float(np.mean([_entropy(row) for row in members]))
    mean = member_scores.mean(axis=0)
    wrong = np.flatnonzero(mean < 0.5)
    rated = mean[: wrong[0] + 1 if len(wrong) else len(mean)]
    spread = 2 * member_scores.std(axis=0)[: len(rated)]
    binary = np.array([_entropy([p, 1 - p]) / math.log(2) for p in rated])
    steps = float(np.max((binary + spread) / 2))
    return Uncertainty(total, max(0.0, total - aleatoric), steps)


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
    chosen: list[int] = []
    for group, size in zip(groups, sizes, strict=True):
        chosen += [c.solution_id for c in _pick(group, size, plan, rng)]
    return chosen


def _pick(
    group: list[Candidate], size: int, plan: SelectionPlan, rng: random.Random
) -> list[Candidate]:
    if plan.strategy == "uniform":
        return rng.sample(group, size)
    if plan.strategy == "convincing_wrong":
        return paper_rule(_ranked(group), size, plan.wrong_share)
    if plan.strategy == "random_wrong":
        return paper_rule(rng.sample(group, len(group)), size, plan.wrong_share)
    if plan.strategy == "diverse":
        return _spread(group, size)
    priority = PRIORITY[plan.strategy]
    return sorted(group, key=lambda c: (-priority(c), c.solution_id))[:size]


def paper_rule(ordered: list[Candidate], size: int, share: float) -> list[Candidate]:
    """The paper's picks of one problem, from its solutions in order of preference:
    ``share`` of ``size`` (rounded half up) wrong answers, then the first of what remains,
    right or wrong. Fewer wrong ones where the problem has fewer."""
    quota = math.floor(size * share + 0.5)
    taken = [c for c in ordered if c.answer_correct is False][:quota]
    taken += [c for c in ordered if c not in taken][: size - len(taken)]
    return _ranked(taken)


def _fooled(candidate: Candidate) -> float:
    """The chance the PRM's verdict on the whole solution contradicts its graded answer."""
    if candidate.answer_correct is None:
        return 0.5
    return candidate.score if candidate.answer_correct is False else 1.0 - candidate.score


PRIORITY: dict[str, Callable[[Candidate], float]] = {
    "convincing_wrong": lambda c: c.score,
    "uncertain": lambda c: c.uncertainty.total,
    "disagreement": lambda c: c.uncertainty.epistemic,
    "ensemble": lambda c: c.uncertainty.steps,
    "diverse": lambda c: c.uncertainty.steps,
    "convincing_uncertain": lambda c: c.uncertainty.total * _fooled(c),
}
"""What each ranking strategy takes first (``uniform`` and ``random_wrong`` take at random)."""


def _spread(group: list[Candidate], size: int) -> list[Candidate]:
    """Greedy picks by priority times the distance to the nearest pick so far, relative
    to the largest such distance: the first pick is the most uncertain, and a near-copy of
    a pick waits behind a less uncertain solution elsewhere."""
    ordered = sorted(group, key=lambda c: c.solution_id)
    if not ordered or any(c.embedding is None for c in ordered):
        return sorted(ordered, key=lambda c: (-c.uncertainty.steps, c.solution_id))[:size]
    points = np.stack([c.embedding for c in ordered if c.embedding is not None])
    points = (points - points.mean(axis=0)) / points.std(axis=0).clip(min=1e-6)
    priority = np.array([c.uncertainty.steps for c in ordered])
    nearest = np.full(len(ordered), np.inf)
    picked: list[int] = []
    for _ in range(size):
        reach = nearest / nearest[np.isfinite(nearest)].max() if picked else np.ones(len(ordered))
        value = priority * np.nan_to_num(reach, posinf=1.0)
        value[picked] = -np.inf
        choice = int(np.argmax(value))
        picked.append(choice)
        distance = np.linalg.norm(points - points[choice], axis=1)
        nearest = np.minimum(nearest, distance)
    return [ordered[i] for i in picked]


def _problems_in_turn(
    pool: list[Candidate], strategy: Strategy, rng: random.Random
) -> list[list[Candidate]]:
    """The candidates grouped by problem, in the order problems are taken under a cap.

    Ranking strategies take first the problems whose first candidate ranks highest; the
    others take problems in a random (seeded) order.
    """
    by_problem: dict[int, list[Candidate]] = defaultdict(list)
    for candidate in pool:
        by_problem[candidate.problem_id].append(candidate)
    groups = [by_problem[p] for p in sorted(by_problem)]
    priority = PRIORITY.get(strategy)
    if priority is None:
        rng.shuffle(groups)
    else:
        groups.sort(key=lambda g: -max(priority(c) for c in g))
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
