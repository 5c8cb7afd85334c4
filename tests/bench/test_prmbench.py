"""bench/prmbench.py: PRMBench's trajectories as labeled solutions, grouped by problem."""

from collections import Counter
from pathlib import Path

from app.content_keys import normalized_problem
from bench.prm_quality_data import split
from bench.prmbench import (
    drop_problems,
    load_prmbench,
    problem_group,
    sample_trajectories,
    states_answer,
    without_numbers,
)


def test_numbered_steps_lose_their_numbers_only_when_all_are_numbered() -> None:
    assert without_numbers(["1. Let x = 2.", "2. So 2x = 4."]) == ["Let x = 2.", "So 2x = 4."]
    assert without_numbers(["1. Let x = 2.", "So 2x = 4."]) == ["1. Let x = 2.", "So 2x = 4."]


def test_an_answer_is_stated_whatever_its_typesetting() -> None:
    steps = ["We add.", "So the answer is $\\dfrac{5}{9}$."]
    assert states_answer(steps, "\\frac{5}{9}")
    assert not states_answer(steps, "\\frac{4}{9}")
    assert not states_answer(["The answer is 7.", "Then we rest.", "Done."], "7")


def test_each_trajectory_is_its_original_then_its_variants(shared_data: Path) -> None:
    items = load_prmbench(shared_data)

    per_trajectory = Counter(problem_group(i) for i in items)
    assert len(per_trajectory) == 357 and len(items) == 357 + 2848 - 4
    originals = [i for i in items if i.id.endswith(":original")]
    assert len(originals) == 357
    assert all(i.label == -1 and i.final_answer_correct for i in originals)
    variants = [i for i in items if not i.id.endswith(":original")]
    assert all(0 <= i.label < len(i.steps) for i in variants)
    # Some variants keep the right answer (a circular argument), most do not.
    right = sum(i.final_answer_correct for i in variants)
    assert 0.2 * len(variants) < right < 0.6 * len(variants)
    first = items[: per_trajectory[problem_group(items[0])]]
    assert {problem_group(i) for i in first} == {problem_group(items[0])}


def test_a_dropped_problem_takes_its_whole_trajectory(shared_data: Path) -> None:
    items = load_prmbench(shared_data)
    problem = normalized_problem(items[0].problem)
    # Two trajectories (a phase-1 and a phase-2 one) can share a problem: both go.
    sharing = {problem_group(i) for i in items if normalized_problem(i.problem) == problem}

    kept, dropped = drop_problems(items, {problem})

    assert dropped == len(sharing) >= 1
    assert not sharing & {problem_group(i) for i in kept}
    assert len(kept) == len(items) - sum(problem_group(i) in sharing for i in items)


def test_a_sample_of_trajectories_falls_on_both_sides_of_the_split(shared_data: Path) -> None:
    items = load_prmbench(shared_data)

    sample = sample_trajectories(items, 40)

    trajectories = {problem_group(i) for i in sample}
    assert len(trajectories) == 40
    assert sample == [i for i in items if problem_group(i) in trajectories]
    test = split(sample, 0.5, 0, problem_group).test
    assert 10 < len({problem_group(i) for i in test}) < 30  # a sample by the split's own
    # hash would put all 40 on one side
