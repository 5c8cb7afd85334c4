"""Synthetic PRM800K label lines of realistic shape and size, for benchmarks.

``synthetic_lines(count, seed)`` yields lines that ``json.dumps`` wrote with default settings,
in the official key order (built with app/prm800k.py's export helpers): ~90% phase 2, ~10%
phase 1, 50 labelers, increasing timestamps, QC and initial-screening lines. Questions come
from a pool of ~12,000 problems, and ~10% of lines label a question another labeler already
labeled, so an import's get-or-create paths find existing problems and solutions.
"""

import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from app import prm800k

PROBLEM_POOL = 12_000
LABELERS = 50
SCREENING_QUESTIONS = 8
CLAUSE_POOL = 4_000
RECENT_QUESTIONS = 2_000
OVERLAP = 0.10
PHASE1 = 0.10
SCREENING = 0.01
QUALITY_CONTROL = 0.02
START = datetime(2022, 7, 1, 9, 0, 0, 1)

# fmt: off
WORDS = (
    "the", "so", "we", "have", "that", "is", "of", "to", "and", "this", "means", "then",
    "which", "gives", "a", "number", "sum", "product", "roots", "equation", "value", "side",
    "angle", "term", "terms", "factor", "both", "sides", "by", "each", "since", "must", "be",
    "can", "use", "find", "let", "call", "first", "second", "last", "remaining", "divide",
    "multiply", "subtract", "add", "equal", "equals", "integer", "positive", "negative",
    "circle", "triangle", "area", "length", "probability", "ways", "choose", "count", "digits",
    "prime", "divisor", "remainder", "when", "modulo", "function", "graph", "slope", "line",
    "point", "coordinates", "square", "cube", "root", "solution", "answer", "check", "plug",
    "in", "simplify", "expand", "notice", "recall", "formula", "case", "cases", "odd", "even",
    "greater", "less", "than", "at", "most", "least",
)
# fmt: on
UNICODE_WORDS = ("≤", "π", "\u00d7", "→", "²", "√")
PHASE2_FINISH = (("solution", 45), ("found_error", 48), ("give_up", 4), ("bad_problem", 3))
PHASE1_FINISH = (("solution", 85), ("give_up", 10), ("bad_problem", 5))
STEP_CLAUSES = ((2, 35), (3, 35), (4, 15), (5, 10), (6, 5))
CLAUSE_LENGTH = range(30, 51)
RATINGS = (1, 1, 1, 1, 1, 1, 1, 1, 0, 0)
ALTERNATIVE_RATINGS = (1, 1, 1, 0, -1, -1, None)


@dataclass(frozen=True)
class Problem:
    text: str
    solution: str | None
    answer: str | None


@dataclass(frozen=True)
class Question:
    """A labeled question: its JSON dict, and the pre-generated steps in phase 2."""

    data: dict[str, Any]
    steps: list[str] | None
    generation: int | None
    labeler: int


def _math(rng: random.Random) -> str:
    a, b, c = rng.randint(2, 99), rng.randint(2, 99), rng.randint(2, 12)
    forms = (
        f"$x^{c} + {a}x - {b} = 0$",
        f"$\\frac{{{a}}}{{{b}}}$",
        f"$\\sqrt{{{a}}} \\cdot {c}$",
        f"$a_{{n+1}} = {c}a_n + {a}$",
        f"$\\binom{{{c}}}{{2}} = {c * (c - 1) // 2}$",
        f"$\\angle ABC = {a}^\\circ$",
        f"${a} \\times {b} = {a * b}$",
        f"$f(x) = {a}x^2 - {b}$",
        f"$\\pi r^2 = {a}\\pi$",
        f"$|{a} - {b}| \\le {c}$",
    )
    return rng.choice(forms)


def _clause(rng: random.Random) -> str:
    words = rng.choices(WORDS, k=rng.randint(2, 6))
    if rng.random() < 0.6:
        words.append(_math(rng))
    if rng.random() < 0.02:
        words.append(rng.choice(UNICODE_WORDS))
    return " ".join(words)


def _answer(rng: random.Random) -> str:
    a, b = rng.randint(1, 999), rng.randint(2, 40)
    return rng.choice((str(a), f"\\frac{{{a}}}{{{b}}}", f"{b}\\sqrt{{{a}}}", f"({a}, {b})"))


def _weighted(rng: random.Random, options: tuple[tuple[Any, int], ...]) -> Any:
    return rng.choices([value for value, _ in options], [weight for _, weight in options])[0]


class _Generator:
    """The state behind one synthetic file: pools, labelers, the clock and recent questions."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.clauses = self._clause_pool()
        self.labelers = [
            str(uuid.UUID(int=self.rng.getrandbits(128), version=4)) for _ in range(LABELERS)
        ]
        self.problems = [self._problem() for _ in range(PROBLEM_POOL)]
        self.screening = [self._screening_question(i) for i in range(SCREENING_QUESTIONS)]
        self.recent: dict[bool, list[Question]] = {True: [], False: []}
        self.clock = START

    def _clause_pool(self) -> list[str]:
        """Clauses of 30-50 characters, so that steps of 2-6 clauses are 60-300 long."""
        clauses: list[str] = []
        while len(clauses) < CLAUSE_POOL:
            clause = _clause(self.rng)
            if len(clause) in CLAUSE_LENGTH:
                clauses.append(clause)
        return clauses

    def text(self, clauses: int) -> str:
        return " ".join(self.rng.choices(self.clauses, k=clauses)) + "."

    def step(self) -> str:
        return self.text(_weighted(self.rng, STEP_CLAUSES))

    def _problem(self) -> Problem:
        answer = _answer(self.rng)
        solution = f"{self.text(self.rng.randint(6, 30))} So the answer is $\\boxed{{{answer}}}$."
        return Problem(self.text(self.rng.randint(3, 9)), solution, answer)

    def _solution_steps(self, answer: str) -> list[str]:
        count = int(self.rng.triangular(4, 25, 8))  # mostly short, up to 24 steps
        steps = [self.step() for _ in range(count)]
        return [*steps, f"# Answer\n\n{answer}"]

    def _phase2_question(self, problem: Problem, generation: int | None) -> Question:
        answer = problem.answer if problem.answer and self.rng.random() < 0.5 else _answer(self.rng)
        steps = self._solution_steps(answer)
        score = self.rng.random() ** 3
        data = prm800k.question_dict(
            problem.text, problem.solution, problem.answer, (steps, answer, score)
        )
        return Question(data, steps, generation, self.rng.randrange(LABELERS))

    def _screening_question(self, index: int) -> Question:
        problem = self._problem()
        if index % 3 == 0:
            # Real screening questions can come without any ground truth.
            problem = Problem(problem.text, None, None)
        return self._phase2_question(problem, -1)

    def question(self, phase2: bool) -> Question:
        """A new question, or (for ~10% of lines) one another labeler already labeled."""
        recent = self.recent[phase2]
        if recent and self.rng.random() < OVERLAP:
            seen = self.rng.choice(recent)
            other = (seen.labeler + self.rng.randint(1, LABELERS - 1)) % LABELERS
            return Question(seen.data, seen.steps, seen.generation, other)
        problem = self.rng.choice(self.problems)
        if phase2:
            question = self._phase2_question(problem, self.rng.randint(0, 10))
        else:
            data = prm800k.question_dict(problem.text, None, problem.answer, None)
            question = Question(data, None, None, self.rng.randrange(LABELERS))
        recent.append(question)
        if len(recent) > RECENT_QUESTIONS:
            recent.pop(0)
        return question

    def timestamp(self) -> datetime:
        self.clock += timedelta(
            seconds=self.rng.randint(1, 300), microseconds=self.rng.randint(1, 999_999)
        )
        if self.clock.microsecond == 0:
            self.clock += timedelta(microseconds=1)
        return self.clock

    def _rated(self, text: str, flagged: bool | None) -> dict[str, Any]:
        return prm800k.step_dict(
            [prm800k.completion_dict(text, self.rng.choice(RATINGS), flagged)], None, 0
        )

    def _error_step(self, text: str) -> dict[str, Any]:
        """The first -1 step of phase 2: the pre-generated step and 1-4 rated alternatives."""
        alternatives = [
            prm800k.completion_dict(self.step(), self.rng.choice(ALTERNATIVE_RATINGS), False)
            for _ in range(self.rng.randint(1, 4))
        ]
        return prm800k.step_dict(
            [prm800k.completion_dict(text, -1, None), *alternatives], None, None
        )

    def phase2_steps(self, steps: list[str], finish: str) -> list[dict[str, Any]]:
        stop = {
            "solution": len(steps),
            "found_error": self.rng.randrange(len(steps)),
            "give_up": self.rng.randrange(len(steps)),
            "bad_problem": self.rng.randint(0, 1),
        }[finish]
        label = [self._rated(text, None) for text in steps[:stop]]
        if finish == "found_error":
            label.append(self._error_step(steps[stop]))
        return label

    def _phase1_step(self, text: str) -> dict[str, Any]:
        """A live-sampled step: mostly one completion, some alternatives, rarely a human step."""
        kind = self.rng.random()
        if kind < 0.75:
            return self._rated(text, False)
        count = self.rng.randint(2, 7)
        if kind < 0.95:
            ratings = [self.rng.choice(ALTERNATIVE_RATINGS) for _ in range(count - 1)]
            chosen = self.rng.randrange(count)
            ratings.insert(chosen, 1)
            texts = [self.step() if i != chosen else text for i in range(count)]
            completions = [
                prm800k.completion_dict(t, r, False) for t, r in zip(texts, ratings, strict=True)
            ]
            return prm800k.step_dict(completions, None, chosen)
        completions = [prm800k.completion_dict(self.step(), -1, False) for _ in range(count)]
        human = {"text": text, "rating": None, "source": "human", "flagged": False}
        return prm800k.step_dict(completions, human, None)

    def phase1_steps(self, answer: str | None, finish: str) -> list[dict[str, Any]]:
        texts = [self.step() for _ in range(self.rng.randint(3, 12))]
        if finish == "solution":
            texts.append(f"# Answer\n\n{answer}")
        elif finish == "bad_problem":
            texts = texts[: self.rng.randint(0, 1)]
        return [self._phase1_step(text) for text in texts]

    def _next_question(self) -> Question:
        kind = self.rng.random()
        if kind < SCREENING:
            screening = self.rng.choice(self.screening)
            return Question(screening.data, screening.steps, -1, self.rng.randrange(LABELERS))
        return self.question(phase2=kind >= SCREENING + PHASE1)

    def _label(self, question: Question) -> tuple[str, list[dict[str, Any]]]:
        """(finish reason, label steps) of one labeler's work on ``question``."""
        if question.steps is None:
            finish = _weighted(self.rng, PHASE1_FINISH)
            return finish, self.phase1_steps(question.data["ground_truth_answer"], finish)
        finish = _weighted(self.rng, PHASE2_FINISH)
        return finish, self.phase2_steps(question.steps, finish)

    def line(self) -> str:
        question = self._next_question()
        finish, steps = self._label(question)
        screening = question.generation == -1
        return prm800k.dumps(
            prm800k.record_dict(
                labeler=self.labelers[question.labeler],
                timestamp=self.timestamp(),
                generation=question.generation,
                is_quality_control=not screening and self.rng.random() < QUALITY_CONTROL,
                is_initial_screening=screening,
                question=question.data,
                steps=steps,
                total_time=self.rng.randint(15_000, 900_000),
                finish_reason=finish,
            )
        )


def synthetic_lines(count: int, seed: int = 0) -> Iterator[str]:
    """``count`` PRM800K JSONL lines (without the newline), the same ones for the same seed."""
    generator = _Generator(seed)
    for _ in range(count):
        yield generator.line()
