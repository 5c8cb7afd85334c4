"""The demo set: MATH-shaped problems and PRM800K-shaped solutions, checked independently."""

import math
import re
from collections import Counter, defaultdict
from fractions import Fraction

import pytest

from app.datasets.demo import (
    GENERATOR,
    SUBJECT_SLUGS,
    demo_gold_solutions,
    demo_phase1_solutions,
    demo_problems,
    demo_slips,
    demo_solutions,
    draw_problem,
    problem_number,
)
from app.datasets.demo_families import FAMILIES

Record = dict[str, object]
ANSWER_SECTION = "\n\n# Answer\n\n"
EXACT_NUMBER = re.compile(r"(-?)(?:(\d+)|\\frac\{(\d+)\}\{(\d+)\})")


def last_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{...}``, matching braces so nested ones stay whole."""
    start = text.rfind("\\boxed{")
    if start == -1:
        return None
    depth = 0
    for i in range(start + len("\\boxed"), len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[start + len("\\boxed{") : i]
    return None


def exact_value(answer: str) -> Fraction:
    """An answer written as an integer or a reduced ``\\frac``; anything else fails the test."""
    match = EXACT_NUMBER.fullmatch(answer)
    assert match is not None, f"not an exact number: {answer!r}"
    sign, integer, numerator, denominator = match.groups()
    if integer is not None:
        value = Fraction(int(integer))
    else:
        assert int(denominator) > 1 and math.gcd(int(numerator), int(denominator)) == 1, answer
        value = Fraction(int(numerator), int(denominator))
    return -value if sign else value


def balanced(text: str) -> bool:
    """Braces nest and inline math closes (``\\$`` is a dollar sign, not a delimiter)."""
    depth = 0
    for char in text:
        depth += {"{": 1, "}": -1}.get(char, 0)
        if depth < 0:
            return False
    return depth == 0 and text.replace("\\$", "").count("$") % 2 == 0


def steps_of(solution: Record) -> list[str]:
    steps = solution["steps"]
    assert isinstance(steps, list)
    return [str(step) for step in steps]


@pytest.fixture(scope="module")
def problems() -> list[Record]:
    return demo_problems()


@pytest.fixture(scope="module")
def solutions(problems: list[Record]) -> list[Record]:
    return demo_solutions(problems)


@pytest.fixture(scope="module")
def answers(problems: list[Record]) -> dict[str, str]:
    return {str(p["unique_id"]): str(p["answer"]) for p in problems}


def test_same_seed_gives_the_same_set() -> None:
    assert demo_problems(seed=7) == demo_problems(seed=7)
    problems = demo_problems(seed=7)
    assert demo_solutions(problems, seed=3) == demo_solutions(problems, seed=3)


def test_different_seeds_give_different_sets(problems: list[Record]) -> None:
    assert demo_problems(seed=1) != problems
    assert demo_solutions(problems, seed=1) != demo_solutions(problems)


def test_problems_have_the_math_split_shape(problems: list[Record]) -> None:
    assert len(problems) == 24
    for record in problems:
        assert set(record) == {"problem", "solution", "answer", "subject", "level", "unique_id"}
        assert record["subject"] in SUBJECT_SLUGS
        level = record["level"]
        assert isinstance(level, int) and 1 <= level <= 5
        slug = SUBJECT_SLUGS[str(record["subject"])]
        assert re.fullmatch(rf"demo/{slug}/\d+\.json", str(record["unique_id"]))


def test_texts_and_ids_are_unique() -> None:
    problems = demo_problems(seed=5, count=200)
    assert len({p["problem"] for p in problems}) == 200
    assert len({p["unique_id"] for p in problems}) == 200


def test_every_family_and_subject_appears(problems: list[Record]) -> None:
    families = {draw_problem(problem_number(str(p["unique_id"]))).family for p in problems}
    assert len(families) == len(FAMILIES)
    assert {p["subject"] for p in problems} == set(SUBJECT_SLUGS)


def test_answer_is_the_last_boxed_content(problems: list[Record]) -> None:
    for record in problems:
        assert last_boxed(str(record["solution"])) == record["answer"]
        exact_value(str(record["answer"]))


def test_latex_is_balanced(problems: list[Record], solutions: list[Record]) -> None:
    texts = [str(p[key]) for p in problems for key in ("problem", "solution")]
    texts += [step for s in solutions for step in steps_of(s)]
    assert all(balanced(text) for text in texts)


def test_solutions_have_the_prm800k_shape(problems: list[Record], solutions: list[Record]) -> None:
    assert len(solutions) == 4 * len(problems)
    for solution in solutions:
        steps = steps_of(solution)
        assert 3 <= len(steps) <= 8
        assert all(step.strip() for step in steps)
        assert not any(ANSWER_SECTION in step for step in steps[:-1])
        assert steps[-1].endswith(ANSWER_SECTION + str(solution["answer"]))
        assert steps[-1].split(ANSWER_SECTION)[0].strip()
        assert solution["generator"] == GENERATOR
        score = solution["score"]
        assert isinstance(score, float) and 0 <= score <= 1
        exact_value(str(solution["answer"]))


def test_solutions_of_a_problem_are_distinct(solutions: list[Record]) -> None:
    by_problem: defaultdict[object, list[tuple[str, ...]]] = defaultdict(list)
    for solution in solutions:
        by_problem[solution["unique_id"]].append(tuple(steps_of(solution)))
    for step_lists in by_problem.values():
        assert len(set(step_lists)) == len(step_lists)


@pytest.mark.parametrize("seed", range(4))
def test_about_half_the_answers_are_wrong(seed: int) -> None:
    problems = demo_problems(seed=seed)
    answers = {p["unique_id"]: exact_value(str(p["answer"])) for p in problems}
    solutions = demo_solutions(problems, seed=seed, per_problem=5)
    wrong = [s for s in solutions if exact_value(str(s["answer"])) != answers[s["unique_id"]]]
    assert 0.3 <= len(wrong) / len(solutions) <= 0.7


def test_each_problem_has_right_and_wrong_solutions(
    solutions: list[Record], answers: dict[str, str]
) -> None:
    # Compared as numbers, so a wrong answer is never a right one written differently.
    wrong = Counter(
        s["unique_id"]
        for s in solutions
        if exact_value(str(s["answer"])) != exact_value(answers[str(s["unique_id"])])
    )
    assert set(wrong.values()) == {2}
    assert len(wrong) == len(answers)


def test_correct_solutions_score_higher_on_average(
    solutions: list[Record], answers: dict[str, str]
) -> None:
    scores: defaultdict[bool, list[float]] = defaultdict(list)
    for s in solutions:
        score = s["score"]
        assert isinstance(score, float)
        scores[s["answer"] == answers[str(s["unique_id"])]].append(score)
    assert sum(scores[True]) / len(scores[True]) > sum(scores[False]) / len(scores[False])


def test_linear_equation_answers_satisfy_the_equation() -> None:
    checked = 0
    for problem in demo_problems(seed=2, count=60):
        drawn = draw_problem(problem_number(str(problem["unique_id"])))
        if drawn.family != "linear_equation":
            continue
        a, b, c = drawn.params["a"], drawn.params["b"], drawn.params["c"]
        assert f"{a}x" in drawn.text and f"= {c}$" in drawn.text
        assert a * exact_value(str(problem["answer"])) + b == c
        checked += 1
    assert checked > 0


def test_wrong_linear_answers_do_not_satisfy_the_equation() -> None:
    problems = demo_problems(seed=4, count=45)
    truth = {p["unique_id"]: str(p["answer"]) for p in problems}
    checked = 0
    for solution in demo_solutions(problems, seed=4):
        drawn = draw_problem(problem_number(str(solution["unique_id"])))
        if drawn.family != "linear_equation" or solution["answer"] == truth[solution["unique_id"]]:
            continue
        a, b, c = drawn.params["a"], drawn.params["b"], drawn.params["c"]
        assert a * exact_value(str(solution["answer"])) + b != c
        checked += 1
    assert checked > 0


@pytest.mark.parametrize("seed", range(3))
def test_many_distinct_solutions_per_problem(seed: int) -> None:
    problems = demo_problems(seed=seed, count=18)
    solutions = demo_solutions(problems, seed=seed, per_problem=8)
    assert len({tuple(steps_of(s)) for s in solutions}) == len(solutions) == 8 * 18


def test_solutions_do_not_depend_on_the_rest_of_the_list(problems: list[Record]) -> None:
    alone = demo_solutions(problems[3:4])
    assert alone == [s for s in demo_solutions(problems) if s["unique_id"] == alone[0]["unique_id"]]


def test_rejects_problems_it_did_not_draw(problems: list[Record]) -> None:
    edited = {**problems[0], "problem": "What is $1 + 1$?"}
    with pytest.raises(ValueError, match="not the demo problem"):
        demo_solutions([edited])
    with pytest.raises(ValueError, match="not a demo unique_id"):
        demo_solutions([{**problems[0], "unique_id": "test/algebra/1.json"}])


def test_rejects_bad_sizes(problems: list[Record]) -> None:
    assert demo_problems(count=0) == []
    with pytest.raises(ValueError):
        demo_problems(count=-1)
    with pytest.raises(ValueError):
        demo_solutions(problems, per_problem=0)


def test_gold_solutions_alternate_a_slip_and_a_correct_solution(problems: list[Record]) -> None:
    taken = demo_solutions(problems)
    gold = demo_gold_solutions(problems, taken)
    assert gold == demo_gold_solutions(problems, taken)
    written = {(s["unique_id"], tuple(steps_of(s))) for s in taken}
    for index, (problem, key) in enumerate(zip(problems, gold, strict=True)):
        assert key.unique_id == problem["unique_id"]
        assert (key.unique_id, tuple(key.steps)) not in written
        line = key.line()
        assert (line["steps"], line["answer"], line["score"]) == (key.steps, key.answer, key.score)
        right = exact_value(key.answer) == exact_value(str(problem["answer"]))
        if index % 2 == 0:
            assert not right and key.finish_reason == "found_error"
            *before, error = key.ratings
            assert error == -1 and set(before) <= {1} and len(key.ratings) <= len(key.steps)
        else:
            assert right and key.finish_reason == "solution"
            assert key.ratings == [1] * len(key.steps)


def test_a_gold_first_error_is_the_first_step_stating_a_wrong_value() -> None:
    """Checked on linear equations, whose steps are read back here: step 2 states c - b,
    step 3 divides it by a (steps counted from 1)."""
    drawn = [(p, draw_problem(problem_number(str(p["unique_id"])))) for p in demo_problems(3, 150)]
    equations = [
        (record, problem) for record, problem in drawn if problem.family == "linear_equation"
    ]
    gold = demo_gold_solutions([record for record, _ in equations])
    checked = 0
    for (_, problem), key in zip(equations, gold, strict=True):
        if key.finish_reason != "found_error":
            continue
        b, c = problem.params["b"], problem.params["c"]
        stated = re.search(r"= (\S+)\$\.$", key.steps[1])
        assert stated is not None, key.steps[1]
        first_error = 1 if exact_value(stated.group(1)) != c - b else 2
        assert key.ratings == [1] * first_error + [-1]
        checked += 1
    assert checked >= 4


def test_phase1_tasks_have_candidates_and_a_step_with_none_right(
    problems: list[Record], answers: dict[str, str]
) -> None:
    taken = demo_solutions(problems)
    tasks = demo_phase1_solutions(problems, taken)
    assert tasks == demo_phase1_solutions(problems, taken)
    written = {(s["unique_id"], tuple(steps_of(s))) for s in taken}
    for index, task in enumerate(tasks):
        steps, alternatives = steps_of(task), task["alternatives"]
        assert task["style"] == "phase1" and (task["unique_id"], tuple(steps)) not in written
        assert isinstance(alternatives, list) and len(alternatives) == len(steps)
        assert any(alternatives), "no step has candidates to choose from"
        for text, others in zip(steps, alternatives, strict=True):
            assert text not in others and len(set(others)) == len(others)
            assert all(balanced(other) for other in others)
        right = exact_value(str(task["answer"])) == exact_value(answers[str(task["unique_id"])])
        # Every other task follows a slipped solution: at the slip, its step stands alone,
        # and the last step has a candidate with the right answer to go on with.
        assert right == (index % 2 == 0)
        if not right:
            assert [] in alternatives
            finals = [other.split(ANSWER_SECTION)[-1] for other in alternatives[-1]]
            assert answers[str(task["unique_id"])] in finals


def test_the_slips_are_where_the_wrong_answers_go_wrong() -> None:
    problems = demo_problems(seed=3, count=30)
    solutions = demo_solutions(problems, seed=3, per_problem=4)
    slips = demo_slips(problems, seed=3, per_problem=4)
    answers = {record["unique_id"]: record["answer"] for record in problems}
    assert len(slips) == len(solutions)
    for solution in solutions:
        slip = slips[tuple(steps_of(solution))]
        wrong = solution["answer"] != answers[solution["unique_id"]]
        assert (slip is not None) == wrong
        if slip is not None:
            assert 0 <= slip.index < len(steps_of(solution))


def test_a_slips_step_has_the_right_step_and_another_slip_as_alternatives(
    problems: list[Record], solutions: list[Record]
) -> None:
    slips = demo_slips(problems)
    assert slips == demo_slips(problems)
    for solution in solutions:
        steps = steps_of(solution)
        slip = slips[tuple(steps)]
        if slip is None:
            continue
        # One right way to write the step, one more wrong one, none the step itself.
        assert sorted(slip.alternatives.values()) == [-1, 1]
        assert steps[slip.index] not in slip.alternatives
        assert all(balanced(text) for text in slip.alternatives)
        # As a solution line gives them: PRM800K's completions after the first, per step.
        line_alternatives = slip.line_alternatives()
        assert len(line_alternatives) == slip.index + 1
        assert line_alternatives[:-1] == [[]] * slip.index
        assert line_alternatives[-1] == list(slip.alternatives)
    assert any(slip is not None for slip in slips.values())


def test_alternatives_at_a_slip_are_rated_by_the_value_they_state() -> None:
    """Checked on linear equations, whose steps are read back here: step 2 states c - b,
    step 3 divides it by a (steps counted from 1)."""
    drawn = [(p, draw_problem(problem_number(str(p["unique_id"])))) for p in demo_problems(3, 90)]
    equations = [
        (record, problem) for record, problem in drawn if problem.family == "linear_equation"
    ]
    records = [record for record, _ in equations]
    params = {str(record["unique_id"]): problem.params for record, problem in equations}
    slips = demo_slips(records)
    checked = Counter[int]()
    for solution in demo_solutions(records):
        slip = slips[tuple(steps_of(solution))]
        if slip is None:
            continue
        a, b, c = (params[str(solution["unique_id"])][name] for name in "abc")
        truth = {1: Fraction(c - b), 2: Fraction(c - b, a)}[slip.index]
        for text, rating in slip.alternatives.items():
            stated = re.search(r"= (\S+)\$\.$", text)
            assert stated is not None, text
            assert rating == (1 if exact_value(stated.group(1)) == truth else -1), text
        checked[slip.index] += 1
    assert checked[1] >= 3 and checked[2] >= 3
