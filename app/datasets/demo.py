"""A demo set of MATH-style problems and model solutions, generated from templates.

Nothing here is copied from MATH or any other dataset: every problem is drawn from a template
with random numbers, and every solution is worked out by code, step by step. Some solutions
carry a planted slip (a wrong sum or a dropped sign at one step) that propagates to a wrong
final answer, so a new user has real mistakes to find; :func:`demo_slips` says where each
slip shows and gives that step alternatives to rate (PRM800K's alternative completions): the
step without the slip, and with another slip. A few more solutions come with their answer
key (:func:`demo_gold_solutions`), to serve as quality-control questions.

The number in a problem's ``unique_id`` (``demo/algebra/4321.json``) is the seed its problem
was drawn from, so :func:`demo_solutions` can rebuild a problem from its record alone. The
numbers are stable only for one version of the list of families (app/datasets/demo_families.py).
"""

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from random import Random
from typing import Any, Literal

from app.datasets.demo_families import FAMILIES, DemoProblem, Scratch, Slip, tex

GENERATOR = "steplabel-demo"
MAX_SOLUTIONS_PER_PROBLEM = 8
SUBJECT_SLUGS = {
    "Algebra": "algebra",
    "Counting & Probability": "counting_and_probability",
    "Geometry": "geometry",
    "Intermediate Algebra": "intermediate_algebra",
    "Number Theory": "number_theory",
    "Prealgebra": "prealgebra",
}
_UNIQUE_ID = re.compile(r"demo/([a-z_]+)/(\d+)\.json")
_ATTEMPTS = 100

Kind = Literal["correct", "flawed", "wrong"]
"""Correct; correct with one irrelevant or false-but-unused step; or with a planted slip."""


def problem_number(unique_id: str) -> int:
    """The seed number in a demo ``unique_id``; ValueError for any other id."""
    match = _UNIQUE_ID.fullmatch(unique_id)
    if match is None:
        raise ValueError(f"not a demo unique_id: {unique_id!r}")
    return int(match.group(2))


def draw_problem(number: int) -> DemoProblem:
    """The problem behind a ``unique_id`` number: its family is the number modulo the count."""
    return FAMILIES[number % len(FAMILIES)](Random(number))


def _unique_id(number: int, problem: DemoProblem) -> str:
    return f"demo/{SUBJECT_SLUGS[problem.subject]}/{number}.json"


def _finish(steps: list[str], answer: Fraction) -> list[str]:
    """The steps with PRM800K's answer section closing the last one."""
    return [*steps[:-1], f"{steps[-1]}\n\n# Answer\n\n{tex(answer)}"]


def _record(number: int, problem: DemoProblem) -> dict[str, object]:
    steps, answer = problem.solve(Scratch())
    # The boxed answer takes the place of the model's closing restatement.
    solution = " ".join(steps[:-1]) + rf" The answer is $\boxed{{{tex(answer)}}}$."
    return {
        "problem": problem.text,
        "solution": solution,
        "answer": tex(answer),
        "subject": problem.subject,
        "level": problem.level,
        "unique_id": _unique_id(number, problem),
    }


def demo_problems(seed: int = 0, count: int = 24) -> list[dict[str, object]]:
    """``count`` demo problems in PRM800K's math_splits format, the same for the same seed."""
    if count < 0:
        raise ValueError(f"count must be at least 0, not {count}")
    rng = Random(seed)
    order = list(range(len(FAMILIES)))
    rng.shuffle(order)
    records: list[dict[str, object]] = []
    texts: set[str] = set()
    for i in range(count):
        family = order[i % len(order)]
        for _ in range(_ATTEMPTS):
            number = rng.randrange(1, 10_000) * len(FAMILIES) + family
            problem = draw_problem(number)
            if problem.text not in texts:
                break
        else:
            raise ValueError(f"cannot draw {count} distinct demo problems")
        texts.add(problem.text)
        records.append(_record(number, problem))
    return records


def _slip(rng: Random, computed: int) -> Slip:
    # Dropped signs are rarer than arithmetic slips, as they are in real model output.
    delta = 0 if rng.random() < 0.25 else rng.choice((-10, -2, -1, 1, 2, 10))
    return Slip(rng.randrange(computed), delta)


def _detour(rng: Random) -> str:
    """A step that is irrelevant, or false but never used, so the answer stays right."""
    n = rng.randint(6, 15)
    return rng.choice(
        (
            f"I notice that ${n}^2 = {n * n + rng.choice((-1, 1))}$, "
            "though I don't think I need that.",
            f"Note that ${2 * n}$ is a prime number, which might matter later.",
            "Hmm, maybe I should draw a picture first. Actually, I don't think it helps here.",
            "Let me try plugging in a few small numbers to get a feel for it. "
            "That doesn't lead anywhere, so I'll go back to the algebra.",
        )
    )


@dataclass(frozen=True)
class SlippedStep:
    """Where a planted slip shows, and other ways to write that step, as PRM800K's phase 2
    offers alternative completions at a step rated negative."""

    index: int
    """The first step that states a wrong value: what a careful labeler rates -1."""
    alternatives: dict[str, int]
    """Each alternative with the rating a careful labeler gives it: +1 for the step written
    without the slip, -1 for the same value slipped another way."""

    def line_alternatives(self) -> list[list[str]]:
        """The alternatives as a solution line gives them: per step, none before the slip."""
        return [*([] for _ in range(self.index)), list(self.alternatives)]


@dataclass(frozen=True)
class Written:
    """A worked solution, its steps finished with the answer section, and where its planted
    slip shows, None without one."""

    steps: list[str]
    answer: Fraction
    slip: SlippedStep | None


_OTHER_DELTAS = (-10, -2, -1, 0, 1, 2, 10)


def _attempt(problem: DemoProblem, kind: Kind, rng: Random, computed: int) -> Written | None:
    """One solution of the given kind, or None where its slip divided by zero."""
    slip = _slip(rng, computed) if kind == "wrong" else None
    phrasing = rng.getstate()
    try:
        steps, answer = problem.solve(Scratch(rng, slip))
    except ZeroDivisionError:
        return None
    slipped = None if slip is None else _slipped_step(problem, phrasing, slip, steps, answer)
    if kind == "flawed":
        steps.insert(rng.randrange(1, len(steps)), _detour(rng))
    return Written(_finish(steps, answer), answer, slipped)


def _rephrased(problem: DemoProblem, phrasing: Any, slip: Slip | None) -> list[str] | None:
    """The finished steps drawn with the same phrasing and this slip instead (None where it
    divides by zero); the generator the phrasing came from stays where it was."""
    replay = Random()
    replay.setstate(phrasing)
    try:
        steps, answer = problem.solve(Scratch(replay, slip))
    except ZeroDivisionError:
        return None
    return _finish(steps, answer)


def _slipped_step(
    problem: DemoProblem, phrasing: Any, slip: Slip, steps: list[str], answer: Fraction
) -> SlippedStep | None:
    """Where ``slip`` shows in ``steps``, drawn with ``phrasing``; None where it changes
    nothing. The same phrasing without the slip reads the same up to that step, so the
    first step that reads differently is the first to state a wrong value."""
    slipped = _finish(steps, answer)
    right = _rephrased(problem, phrasing, None)
    assert right is not None, "a solution without a slip divides by zero"
    pairs = enumerate(zip(slipped, right, strict=True))
    index = next((i for i, (mine, theirs) in pairs if mine != theirs), None)
    if index is None:
        return None
    alternatives = {right[index]: 1}
    taken = {slipped[index], right[index]}
    # Seeded by the step, so that neither the other slip nor the order follows a pattern,
    # and the draw of the solutions after this one is left alone.
    order = Random(slipped[index])
    deltas = [delta for delta in _OTHER_DELTAS if delta != slip.delta]
    order.shuffle(deltas)
    for delta in deltas:
        other = _rephrased(problem, phrasing, Slip(slip.target, delta))
        # Slipped another way, the step must follow the same earlier steps and read anew.
        if other is None or other[:index] != slipped[:index] or other[index] in taken:
            continue
        alternatives[other[index]] = -1
        break
    rated = list(alternatives.items())
    order.shuffle(rated)
    return SlippedStep(index, dict(rated))


def _fresh_solution(
    problem: DemoProblem, kind: Kind, rng: Random, seen: set[tuple[str, ...]]
) -> Written:
    """A solution of the given kind whose steps are not among those already written."""
    scratch = Scratch()
    correct = problem.solve(scratch)[1]
    for _ in range(_ATTEMPTS):
        written = _attempt(problem, kind, rng, scratch.computed)
        # A slip can leave the answer right (abs of a positive value, a remainder that
        # absorbs it): such a draw, or a correct-kind one that came out wrong, is redrawn.
        if written is None or (written.answer != correct) != (kind == "wrong"):
            continue
        if tuple(written.steps) not in seen:
            return written
    raise RuntimeError(f"cannot write another distinct {kind} solution for: {problem.text}")


_SCORE_MEANS: dict[Kind, float] = {"correct": 0.74, "flawed": 0.6, "wrong": 0.36}


def _kinds(rng: Random, per_problem: int) -> list[Kind]:
    """About half wrong, the rest correct, one of them sometimes with a flawed step."""
    wrong = per_problem // 2 + (per_problem % 2 == 1 and rng.random() < 0.5)
    rest = per_problem - wrong
    flawed = 1 if rest >= 2 and rng.random() < 0.5 else 0
    counts: dict[Kind, int] = {"wrong": wrong, "flawed": flawed, "correct": rest - flawed}
    kinds = [kind for kind, n in counts.items() for _ in range(n)]
    rng.shuffle(kinds)
    return kinds


def _score(kind: Kind, rng: Random) -> float:
    """A verifier-like score: higher for correct solutions, on average."""
    return round(min(1.0, max(0.0, rng.gauss(_SCORE_MEANS[kind], 0.16))), 3)


def _solution_line(uid: str, steps: list[str], answer: str, score: float) -> dict[str, object]:
    """A solution as ``steplabel import solutions`` reads it."""
    return {
        "unique_id": uid,
        "steps": steps,
        "answer": answer,
        "generator": GENERATOR,
        "score": score,
    }


def _drawn_problem(record: dict[str, object]) -> tuple[str, DemoProblem]:
    """The record's ``unique_id`` and the problem drawn from it, checked against its text."""
    uid = str(record["unique_id"])
    problem = draw_problem(problem_number(uid))
    if problem.text != record["problem"]:
        raise ValueError(f"{uid} is not the demo problem it names")
    return uid, problem


def _problem_solutions(
    record: dict[str, object], seed: int, per_problem: int
) -> list[tuple[Written, dict[str, object]]]:
    """The problem's solutions, each as written and as its line."""
    uid, problem = _drawn_problem(record)
    # Seeded per problem, so a problem's solutions do not depend on the rest of the list.
    rng = Random(f"{seed}:{uid}")
    solutions: list[tuple[Written, dict[str, object]]] = []
    seen: set[tuple[str, ...]] = set()
    for kind in _kinds(rng, per_problem):
        written = _fresh_solution(problem, kind, rng, seen)
        seen.add(tuple(written.steps))
        line = _solution_line(uid, written.steps, tex(written.answer), _score(kind, rng))
        solutions.append((written, line))
    return solutions


def _written_solutions(
    problems: list[dict[str, object]], seed: int, per_problem: int
) -> list[tuple[Written, dict[str, object]]]:
    if not 1 <= per_problem <= MAX_SOLUTIONS_PER_PROBLEM:
        raise ValueError(
            f"per_problem must be between 1 and {MAX_SOLUTIONS_PER_PROBLEM}, not {per_problem}"
        )
    return [pair for record in problems for pair in _problem_solutions(record, seed, per_problem)]


def demo_solutions(
    problems: list[dict[str, object]], seed: int = 0, per_problem: int = 4
) -> list[dict[str, object]]:
    """``per_problem`` model solutions for each demo problem, about half with a planted slip."""
    return [line for _, line in _written_solutions(problems, seed, per_problem)]


def demo_slips(
    problems: list[dict[str, object]], seed: int = 0, per_problem: int = 4
) -> dict[tuple[str, ...], SlippedStep | None]:
    """Where each :func:`demo_solutions` solution's planted slip shows (None without one),
    with alternatives for its step, keyed by its steps: what a careful labeler finds, for
    simulations and benchmarks, and what gives a solution line its ``alternatives``."""
    return {
        tuple(written.steps): written.slip
        for written, _ in _written_solutions(problems, seed, per_problem)
    }


GOLD_SEED = 2


@dataclass(frozen=True)
class GoldSolution:
    """A demo solution with its answer key, fit to be a quality-control question's gold label:
    every step rated +1 up to the planted slip, which is rated -1 (``found_error``), or every
    step +1 where there is no slip (``solution``)."""

    unique_id: str
    steps: list[str]
    answer: str
    score: float
    ratings: list[int]
    finish_reason: Literal["found_error", "solution"]

    def line(self) -> dict[str, object]:
        """The solution as :func:`demo_solutions` writes them."""
        return _solution_line(self.unique_id, self.steps, self.answer, self.score)


def demo_gold_solutions(
    problems: list[dict[str, object]],
    taken: Iterable[Mapping[str, Any]] = (),
    seed: int = GOLD_SEED,
) -> list[GoldSolution]:
    """One more solution of each problem, alternately with a slip and correct, with its
    answer key; none repeats the steps of a solution in ``taken`` (lines of the same shape)."""
    written_before: defaultdict[str, set[tuple[str, ...]]] = defaultdict(set)
    for line in taken:
        written_before[line["unique_id"]].add(tuple(line["steps"]))
    kinds: tuple[Kind, Kind] = ("wrong", "correct")
    return [
        _gold_solution(record, kinds[index % 2], seed, written_before)
        for index, record in enumerate(problems)
    ]


def _gold_solution(
    record: dict[str, object],
    kind: Kind,
    seed: int,
    written_before: dict[str, set[tuple[str, ...]]],
) -> GoldSolution:
    uid, problem = _drawn_problem(record)
    rng = Random(f"gold:{seed}:{uid}")
    written = _fresh_solution(problem, kind, rng, written_before[uid])
    answer, score = tex(written.answer), _score(kind, rng)
    if written.slip is None:
        ratings = [1] * len(written.steps)
        return GoldSolution(uid, written.steps, answer, score, ratings, "solution")
    ratings = [1] * written.slip.index + [-1]
    return GoldSolution(uid, written.steps, answer, score, ratings, "found_error")


PHASE1_SEED = 3


def demo_phase1_solutions(
    problems: list[dict[str, object]],
    taken: Iterable[Mapping[str, Any]] = (),
    seed: int = PHASE1_SEED,
) -> list[dict[str, object]]:
    """One phase-1 task for each problem: every step with candidates to rate and choose from.

    The candidates of a step are other draws of the same step. Every other task follows a
    solution with a planted slip: at its slip the only candidate is wrong, so the labeler
    writes the step, and after it the draws without the slip follow the labeler's path
    while the task's own steps follow the wrong one. None repeats a solution in ``taken``.
    """
    written_before: defaultdict[str, set[tuple[str, ...]]] = defaultdict(set)
    for line in taken:
        written_before[line["unique_id"]].add(tuple(line["steps"]))
    return [
        _phase1_task(record, index % 2 == 1, seed, written_before)
        for index, record in enumerate(problems)
    ]


def _phase1_task(
    record: dict[str, object],
    slipped: bool,
    seed: int,
    written_before: dict[str, set[tuple[str, ...]]],
) -> dict[str, object]:
    uid, problem = _drawn_problem(record)
    rng = Random(f"phase1:{seed}:{uid}")
    kind: Kind = "wrong" if slipped else "correct"
    own = _fresh_solution(problem, kind, rng, written_before[uid])
    # Candidates may repeat other tasks' steps: only the task's own steps must be new.
    seen = {tuple(own.steps)}
    right = _other_draws(problem, "correct", rng, seen, 2)
    wrong = own if slipped else _fresh_solution(problem, "wrong", rng, seen)
    slip = len(wrong.steps) if wrong.slip is None else wrong.slip.index
    alternatives = []
    for index, text in enumerate(own.steps):
        if slipped:
            # At the slip no draw is right; past it, the right draws follow a corrected path.
            drawn = [] if index == slip else [draft.steps[index] for draft in right]
        else:
            # The slipped draw is a wrong candidate at its slip, and off the path after it.
            drafts = [*right, *([wrong] if index <= slip else [])]
            drawn = [draft.steps[index] for draft in drafts]
        alternatives.append(list(dict.fromkeys(c for c in drawn if c != text)))
    line = _solution_line(uid, own.steps, tex(own.answer), _score(kind, rng))
    return {**line, "alternatives": alternatives, "style": "phase1"}


def _other_draws(
    problem: DemoProblem, kind: Kind, rng: Random, seen: set[tuple[str, ...]], count: int
) -> list[Written]:
    """Up to ``count`` more distinct solutions of the kind: fewer where the phrasings run out."""
    drafts: list[Written] = []
    for _ in range(count):
        try:
            draft = _fresh_solution(problem, kind, rng, seen)
        except RuntimeError:
            break
        seen.add(tuple(draft.steps))
        drafts.append(draft)
    return drafts
