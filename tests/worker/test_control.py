"""The control share: drawn uniformly from the whole pool, beside the strategy's picks."""

from collections import Counter

from worker.control import with_control
from worker.select import Candidate, SelectionPlan, select

# 60 problems of 5 solutions each; in each, the highest-scored solution is a wrong answer:
# the convincing wrong answer the default strategy picks first.
POOL = [
    Candidate(10 * p + s, p, score=1.0 - s / 10, answer_correct=s != 0)
    for p in range(60)
    for s in range(5)
]
PLAN = SelectionPlan(per_problem=2, max_size=400)


def test_a_tenth_of_the_generation_beside_the_strategys_picks() -> None:
    picks = with_control(POOL, PLAN, 0.1)

    strategy = set(select(POOL, PLAN))
    assert len(strategy) == 120 and len(picks.control) == round(120 * 0.1 / 0.9) == 13
    # What the strategy picked and the draw also took counts as control.
    assert set(picks.selected) == strategy - set(picks.control)
    assert with_control(POOL, PLAN, 0.1) == picks  # seeded by the plan's seed (the run)
    assert with_control(POOL, PLAN, 0.0).control == []


def test_the_generation_stays_within_its_size() -> None:
    picks = with_control(POOL, SelectionPlan(per_problem=2, max_size=50), 0.1)

    assert len(picks.control) == 5 and len(picks) <= 50


def test_the_control_share_is_drawn_uniformly_from_the_whole_pool() -> None:
    """The strategy's favourites are drawn as often as any other solution: a draw from
    what the strategy left would miss the very answers the PRM found most convincing."""
    drawn: Counter[int] = Counter()
    runs = 600
    for seed in range(runs):
        drawn.update(with_control(POOL, SelectionPlan(per_problem=2, seed=seed), 0.1).control)

    expected = runs * 13 / len(POOL)  # 26 draws for each solution
    favourites = [drawn[10 * p] for p in range(60)]
    others = [drawn[c.solution_id] for c in POOL if c.solution_id % 10]
    assert abs(sum(favourites) / len(favourites) - expected) < 0.1 * expected
    assert abs(sum(others) / len(others) - expected) < 0.1 * expected
    # No solution is far from its share (a binomial's spread is about 5 draws here).
    assert all(abs(drawn[c.solution_id] - expected) < 25 for c in POOL)
