"""A generation's uniform control share: solutions drawn at random from the whole pool,
beside what the selection strategy picks.

Their labels are a uniform sample of the pool, which no PRM chose: the PRM page sets the
selection's yield beside theirs (does the selection pay?), and the held-out figures come
from them (worker/split.py). They are drawn from the whole pool, not from what the strategy
left: a draw from the rest would lack exactly the solutions the PRM found most convincing.
A drawn solution the strategy also picked counts as control; since the draw ignores the
strategy, the strategy's picks left are still a fair sample of its picks.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence
from dataclasses import dataclass

from worker.select import Candidate, SelectionPlan, select


@dataclass(frozen=True)
class Picks:
    selected: list[int]
    """The strategy's picks, the control share's aside."""
    control: list[int]

    def __len__(self) -> int:
        return len(self.selected) + len(self.control)


def with_control(candidates: Sequence[Candidate], plan: SelectionPlan, share: float) -> Picks:
    """The strategy's picks and a control share of about ``share`` of the generation,
    which stays within ``plan.max_size``; both seeded by ``plan.seed`` (the run's id)."""
    pool = list(candidates)
    room = None if plan.max_size is None else plan.max_size - round(plan.max_size * share)
    chosen = select(pool, dataclasses.replace(plan, max_size=room))
    size = round(len(chosen) * share / (1 - share))
    if plan.max_size is not None:
        size = min(size, plan.max_size - len(chosen))
    # A seed of its own: the same one as the strategy's would tie the two draws together.
    rng = random.Random(f"control-{plan.seed}")
    control = [c.solution_id for c in rng.sample(pool, min(size, len(pool)))]
    drawn = set(control)
    return Picks([i for i in chosen if i not in drawn], control)
