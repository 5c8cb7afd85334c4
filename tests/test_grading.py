"""MATH answer equivalence: the conventions, the time limit off the main thread, grading rows."""

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app import grading
from app.grading import (
    GradeSummary,
    equivalences,
    final_answer_of,
    grade_solutions,
    is_equivalent,
    normalize_answer,
)
from app.models import Solution
from tests.factories import make_solution

PATHOLOGICAL = "9^{9^{9}}"
"""sympy evaluates this power eagerly: hundreds of millions of digits, minutes of work."""


@pytest.fixture(scope="module", autouse=True)
def _stop_pool() -> Iterator[None]:
    yield
    grading.shutdown_pool()


# (answer, ground truth, verdict); the ground truths are written the way MATH writes them.
PAIRS = [
    # Fractions, decimals, mixed numbers
    ("0.5", r"\frac{1}{2}", True),
    ("3/4", r"\dfrac{3}{4}", True),
    (r"\frac{4}{3}", r"\frac43", True),
    ("5/9", r"\frac 59", True),
    (r"\frac95", r"1\frac{4}{5}", True),
    ("137.5", r"137 \frac{1}{2}", True),
    ("0.0000672", ".0000672", True),
    (r"\frac{\sqrt2}{2}", r"\sqrt{2}/2", True),
    (r"\frac{1}{\sqrt{3}}", r"\frac{\sqrt{3}}{3}", True),
    (r"\sqrt{20}", r"2\sqrt{5}", True),
    ("0.0", "0", True),
    ("0.33", r"\frac{1}{3}", False),
    ("1.41", r"\sqrt{2}", False),
    ("3.14", r"\pi", False),
    (r"3\sqrt{2}", r"2\sqrt{3}", False),
    (r"\frac{2}{1}", r"\frac{1}{2}", False),
    (r"\sqrt{3}", r"\frac{\sqrt{3}}{3}", False),
    ("4.6", "4.5", False),
    ("-2", "2", False),
    (r"\frac{\pi}{6}", r"-\frac{\pi}{6}", False),
    # Percent, money, degrees, units
    ("10", r"10\%", True),
    ("12.5", r"12.5\%", True),
    ("10 percent", "10", True),
    ("0.1", r"10\%", False),
    ("15", "0.15", False),
    ("5", r"\$5", True),
    ("18.9", r"\$18.90", True),
    ("32348", r"\$32,\!348", True),
    ("90", r"90^\circ", True),
    (r"30^\circ", r"30^{\circ}", True),
    ("5", r"5\text{ cm}", True),
    ("864", r"864 \mbox{ inches}^2", True),
    ("15", r"15\mbox{ cm}^2", True),
    ("5.4", r"5.4 \text{ cents}", True),
    ("29 cents", "29", True),
    (r"\frac{270}{7}", r"\frac{270}7\text{ degrees}", True),
    # Thousands separators, and lists that only look like them
    ("1000", "1,000", True),
    ("58500", "58,500", True),
    ("10{,}080", r"10,\!080", True),
    ("11111111100", r"11,\! 111,\! 111,\! 100", True),
    ("1, 000", "1,000", False),
    ("100200", "100, 200", False),
    ("7200", "28800", False),
    ("2016", "504", False),
    # Tuples, intervals, sets, matrices
    ("(1,2)", "(1, 2)", True),
    (r"(3,\frac{\pi}{2})", r"\left( 3, \frac{\pi}{2} \right)", True),
    ("(2,1)", "(1,2)", False),
    ("(6,-1,31)", "(6,31,-1)", False),
    ("[1,3)", "[1, 3)", True),
    (r"(-\infty,0]", r"(-\infty, 0]", True),
    (r"(0, 9)\cup(9, 36)", r"(0,9) \cup (9,36)", True),
    ("[-2, 7]", r"x \in [-2,7]", True),
    ("(3,4)", "(3,4]", False),
    (r"x \ge 3", r"[3, \infty)", True),
    (r"[3, \infty)", r"x \ge 3", True),
    (r"x > 3", r"[3, \infty)", False),
    ("(1, 3]", "[1, 3)", False),
    ("7, 5, 3", "3, 5, 7", True),
    ("3, 5", "3, 5, 7", False),
    (r"-2, 1-\sqrt5, 1+\sqrt5", r"\{1\pm\sqrt{5},-2\}", True),
    (r"1+\sqrt{19}, 1-\sqrt{19}", r"1 \pm \sqrt{19}", True),
    (
        r"\begin{pmatrix}-\frac13\\\frac23\\\frac53\end{pmatrix}",
        r"\begin{pmatrix} -1/3 \\ 2/3 \\ 5/3 \end{pmatrix}",
        True,
    ),
    (
        r"\begin{pmatrix} -2 \\ -14 \\ 7 \end{pmatrix}",
        r"\begin{pmatrix} -2 \\ -14 \\ -7 \end{pmatrix}",
        False,
    ),
    # Equations and expressions
    ("x = 3", "3", True),
    ("3", "x=3", True),
    ("x=-3", "x=3", False),
    ("y=3", "x=3", False),
    ("y=3+2x", "y = 2x + 3", True),
    ("y = 3x + 2", "y = 2x + 3", False),
    ("2(k+1)", "2k+2", True),
    ("2k+2", "2k", False),
    ("-6+3x+x^3", "x^3+3x-6", True),
    ("a^2 + b^2 + c^2 - 12R^2", "3R^2", False),
    ("7i-2", "-2 + 7i", True),
    ("1-2i", "1+2i", False),
    (r"288\pi", r"288 \pi", True),
    ("52", "52_8", True),  # math-verify reads the base subscript as a label
    ("42_8", "52_8", False),
    # Choices and words
    ("A", r"\text{(A)}", True),
    ("(A)", r"\text{(A)}", True),
    (r"\textbf{(C)}", r"\text{(C)}", True),
    ("D", r"\text{(C)}", False),
    ("(B)", r"\text{(C)}", False),
    ("Evelyn", r"\text{Evelyn}", True),
    ("East", r"\text{east}", True),
    (r"\text{Ellipse}", r"\text{ellipse}", True),
    ("No solution", r"\text{no solution}", True),
    ("Navin", r"\text{Evelyn}", False),
    ("Nevyle", r"\text{Evelyn}", False),  # an anagram: math-verify alone would say True
    ("odd", r"\text{even}", False),
    ("on", "no", False),
    # Wrappers and punctuation around the answer
    (r"\boxed{5}", "5", True),
    ("$5$", "5", True),
    ("5.", "5", True),
    (r"\text{7}", "7", True),
    ("28", "29", False),
    ("", "5", False),
]


@pytest.mark.parametrize(("answer", "ground_truth", "expected"), PAIRS)
def test_is_equivalent(answer: str, ground_truth: str, expected: bool) -> None:
    assert is_equivalent(answer, ground_truth) is expected


def test_a_ground_truth_that_is_no_expression_is_undecided() -> None:
    assert is_equivalent("5", "?") is None
    assert is_equivalent("5", "") is None


@pytest.mark.parametrize(
    ("answer", "normalized"),
    [
        (r"\$32,\!348", "32348"),
        (r"\left( 3, \dfrac{\pi}{2} \right)", r"(3, \frac{\pi}{2})"),
        (r"864 \mbox{ inches}^2", "864"),
        (r"\text{(C)}", "C"),
        (r"\text{ No Solution }", "no solution"),
        (r"\boxed{90^{\circ}}", "90"),
        (r"2\pi r", r"2\pi r"),
        (r"\begin{pmatrix} 1 \\ 2 \end{pmatrix}", r"\begin{pmatrix}1\\2\end{pmatrix}"),
        ("100,200", "100200"),
        ("100, 200", "100, 200"),
    ],
)
def test_normalize_answer(answer: str, normalized: str) -> None:
    assert normalize_answer(answer) == normalized


def test_equivalences_keep_the_order_of_the_pairs() -> None:
    pairs = [("0.5", r"\frac12"), ("7", "7"), ("(2,1)", "(1,2)"), ("", "3")]
    assert equivalences(pairs) == [True, True, False, False]


# The time limit


def _in_thread(
    pairs: list[tuple[str, str]], timeout_seconds: float
) -> tuple[list[bool | None], float]:
    """``equivalences`` called from a thread that is not the main one, as the web app does."""
    result: list[list[bool | None]] = []
    started = time.monotonic()
    thread = threading.Thread(
        target=lambda: result.append(equivalences(pairs, timeout_seconds=timeout_seconds))
    )
    thread.start()
    thread.join(timeout=60)
    return result[0], time.monotonic() - started


def test_the_time_limit_works_off_the_main_thread() -> None:
    assert is_equivalent("0.5", r"\frac12") is True  # the pool is up: time only the work
    verdicts, elapsed = _in_thread([(PATHOLOGICAL, "1")], timeout_seconds=1.0)
    assert verdicts == [None]
    assert elapsed < 1.0 + 2.0


def test_the_pool_recovers_after_a_timeout() -> None:
    _in_thread([(PATHOLOGICAL, "1")], timeout_seconds=1.0)
    assert is_equivalent("0.5", r"\frac12") is True
    assert is_equivalent("x=-3", "x=3") is False


def test_pairs_behind_a_timeout_are_answered_by_the_fresh_pool() -> None:
    # Every worker is stuck, so the other pairs wait in the queue when the pool is killed.
    stuck = [(PATHOLOGICAL, str(n)) for n in range(grading.POOL_WORKERS)]
    pairs = [*stuck, ("0.5", r"\frac12"), ("x=-3", "x=3"), ("(1,2)", "(1, 2)")]
    verdicts, _ = _in_thread(pairs, timeout_seconds=1.0)
    assert verdicts == [None] * len(stuck) + [True, False, True]


def test_a_timeout_in_one_thread_costs_other_threads_nothing() -> None:
    pairs = [(answer, ground_truth) for answer, ground_truth, _ in PAIRS[:40]]
    expected = [verdict for _, _, verdict in PAIRS[:40]]
    results: dict[str, list[bool | None]] = {}

    def grade(name: str, pairs: list[tuple[str, str]], timeout_seconds: float) -> None:
        results[name] = equivalences(pairs, timeout_seconds=timeout_seconds)

    stuck = [(PATHOLOGICAL, "1")] * grading.POOL_WORKERS
    threads = [
        threading.Thread(target=grade, args=("stuck", stuck, 0.5)),
        threading.Thread(target=grade, args=("first", pairs, 5.0)),
        threading.Thread(target=grade, args=("second", pairs, 5.0)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert results == {"stuck": [None] * len(stuck), "first": expected, "second": expected}


# Real MATH answers


def _math500_answers(shared_data: Path) -> list[str]:
    lines = (shared_data / "math500_test.jsonl").read_text().splitlines()
    return [json.loads(line)["answer"] for line in lines]


def test_every_math500_answer_equals_itself(shared_data: Path) -> None:
    answers = _math500_answers(shared_data)
    assert equivalences([(a, a) for a in answers]) == [True] * len(answers)


def test_every_math500_answer_equals_itself_in_math_verify(
    shared_data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Without the string shortcut every answer must parse, and verify against itself.
    monkeypatch.setattr(grading, "_verdict_by_rules", lambda answer, gold: None)
    answers = _math500_answers(shared_data)
    verdicts = equivalences([(a, a) for a in answers])
    assert [a for a, verdict in zip(answers, verdicts, strict=True) if verdict is not True] == []


def test_prm800k_pre_generated_answers(shared_data: Path) -> None:
    questions = [
        json.loads(line)["question"]
        for line in (shared_data / "prm800k_raw_samples.jsonl").read_text().splitlines()
    ]
    pairs = [
        (q["pre_generated_answer"], q["ground_truth_answer"])
        for q in questions
        if q.get("pre_generated_answer") and q.get("ground_truth_answer")
    ]
    assert len(pairs) == 4
    assert equivalences(pairs) == [False] * 4  # every pre-generated answer in the sample is wrong


# Final answers and grading rows


def test_final_answer_of() -> None:
    assert final_answer_of(["Add.", "So $x = 5$.\n\n# Answer\n\n5"]) == "5"
    assert final_answer_of(["So $x = \\boxed{\\frac{1}{2}}$."]) == "\\frac{1}{2}"
    assert final_answer_of(["No answer here."]) is None


def _solution(
    session: Session, ground_truth: str | None, answer: str | None, steps: list[str] | None = None
) -> Solution:
    solution = make_solution(session, steps)
    solution.answer = answer
    solution.problem.ground_truth_answer = ground_truth
    session.flush()
    return solution


def _stored(session: Session, solution: Solution) -> bool | None:
    return session.scalar(select(Solution.answer_correct).where(Solution.id == solution.id))


def test_grade_solutions(session: Session, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(grading, "BATCH_SIZE", 2)  # several batches, an undecided one among them
    by_answer = _solution(session, "0.5", r"\frac{1}{2}")
    wrong = _solution(session, r"\text{(C)}", "D")
    undecided = _solution(session, "?", "5")
    by_section = _solution(session, "10", None, ["Compute.", "So 10%.\n\n# Answer\n\n10\\%"])
    by_box = _solution(session, "(1,2)", None, ["So it is $\\boxed{(2, 1)}$."])
    no_answer = _solution(session, "3", None, ["I give up."])
    no_ground_truth = _solution(session, None, "5")
    graded_before = _solution(session, "1", "2")
    graded_before.answer_correct = True
    session.flush()

    summary = grade_solutions(session)

    assert summary == GradeSummary(correct=2, wrong=3, undecided=1)
    assert summary.graded == 6
    expected = {
        by_answer: True,
        wrong: False,
        undecided: None,
        by_section: True,
        by_box: False,
        no_answer: False,
        no_ground_truth: None,
        graded_before: True,  # graded solutions are left alone
    }
    assert {s: _stored(session, s) for s in expected} == expected


def test_grade_solutions_regrades_the_given_ids(session: Session) -> None:
    graded_before = _solution(session, "1", "2")
    graded_before.answer_correct = True
    ungraded = _solution(session, "4", "4")
    session.flush()

    summary = grade_solutions(session, [graded_before.id])

    assert summary == GradeSummary(wrong=1)
    assert _stored(session, graded_before) is False
    assert graded_before.answer_correct is False  # the loaded object follows the UPDATE
    assert _stored(session, ungraded) is None


def test_grade_solutions_with_nothing_to_grade(session: Session) -> None:
    assert grade_solutions(session) == GradeSummary()
    assert grade_solutions(session, []) == GradeSummary()
