"""MATH answer equivalence: the conventions, the time limit off the main thread, grading rows."""

import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app import grading
from app.grading import (
    GRADER_VERSION,
    GradeSummary,
    _parsed,
    _verify_parsed,
    answer_groups,
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


def _both_ways(pairs: list[tuple[str, str, bool]]) -> list[tuple[str, str, bool]]:
    return [*pairs, *((b, a, verdict) for a, b, verdict in pairs)]


# Each pair holds whichever side is the ground truth.
PAIRS += _both_ways(
    [
        # Times of day: a.m. and p.m. differ, and a time is no number
        ("10:00 a.m.", "10:00 p.m.", False),
        (r"10:00 \text{ a.m.}", r"10:00 \text{ p.m.}", False),
        (r"10:00\text{ p.m.}", "10:00 p.m.", True),
        ("10:00 PM", "22:00", True),
        ("12:15 a.m.", "0:15", True),
        ("9:30 a.m.", "9:45 a.m.", False),
        ("10:00", "10", False),
        # Units: left out when one side has none, compared when both have one
        ("6 weeks", "6 days", False),
        (r"6\text{ weeks}", r"6 \text{ days}", False),
        ("5 dollars", "5 cents", False),
        (r"15\mbox{ cm}^2", r"15\text{ cm}", False),
        ("6 weeks", "6", True),
        (r"6 \text{ weeks}", "6 weeks", True),
        ("1 day", "1 days", True),
        (r"12\text{ inches}", "12 in", True),
        (r"864 \mbox{ inches}^2", "864 square inches", True),
        (r"5\text{ cm}", "5 centimeters", True),
        ("7 feet", "7 ft", True),
        # Repeating decimals
        (r"0.\overline{3}", r"\frac{1}{3}", True),
        (r"0.\overline{36}", r"\frac{4}{11}", True),
        (r"1.2\overline{3}", r"\frac{37}{30}", True),
        (r"0.\overline{9}", "1", True),
        (r"-0.\overline{6}", r"-\frac{2}{3}", True),
        (r".\overline{142857}", r"\frac17", True),
        (r"0.\overline{3}", "0.3", False),
        (r"0.\overline{36}", r"\frac{36}{100}", False),
        (r"1.2\overline{3}", r"1.\overline{23}", False),
        # An equation is not its right side, unless its left side is a single variable
        ("x+y=3", "3", False),
        ("5x - 7y + 11z + 4 = 0", "0", False),
        ("2x=6", "6", False),
        ("x=3", "3", True),
        (r"\theta = \frac{\pi}{2}", r"\frac{\pi}{2}", True),
        ("a_1 = 7", "7", True),
        ("x+y=3", "y+x=3", True),
        ("x+y=3", "x+y=4", False),
    ]
)


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
        (r"0.\overline{36}", r"\frac{4}{11}"),
        (r"\left(1.2\overline{3}, 0.\overline{9}\right)", r"(\frac{37}{30}, 1)"),
        (r"10:00 \text{ p.m.}", "22:00"),
        ("9:05 a.m.", "9:05"),
        (r"6 \text{ weeks}", "6"),
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


def _children() -> dict[int, set[int]]:
    """Each living process's children, from Linux's /proc (a zombie counts as gone)."""
    children: dict[int, set[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state, parent = stat.read_text().rsplit(")", 1)[1].split()[:2]
        except OSError:  # ended meanwhile
            continue
        if state != "Z":
            children.setdefault(int(parent), set()).add(int(stat.parent.name))
    return children


def _descendants(pid: int) -> set[int]:
    children, found, frontier = _children(), set(), {pid}
    while frontier:
        frontier = {child for parent in frontier for child in children.get(parent, set())}
        found |= frontier
    return found


def _living(pids: set[int]) -> set[int]:
    return pids & {child for children in _children().values() for child in children}


def test_the_pool_ends_with_a_grading_process_killed_by_a_signal() -> None:
    """A process killed by a signal (a test run stopped, a worker out of memory) runs no exit
    code; its pool's workers end themselves, and the forkserver and resource tracker with
    them, instead of waiting for work forever."""
    grades = "from app.grading import is_equivalent; print(is_equivalent('x=-3', 'x=3')); input()"
    grader = subprocess.Popen(
        [sys.executable, "-c", grades], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert grader.stdout is not None and grader.stdout.readline() == "False\n"
        started = _descendants(grader.pid)
        assert len(started) >= 1 + grading.POOL_WORKERS  # the forkserver and its workers
    finally:
        grader.kill()
        grader.wait()
    deadline = time.monotonic() + 30
    while _living(started) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = _living(started)
    for pid in left:  # not to leave them to the next test
        os.kill(pid, signal.SIGKILL)
    assert left == set()


def test_ctrl_c_to_a_grading_process_group_leaves_the_workers_quiet() -> None:
    """Ctrl-C reaches every process of the group: the grading process decides what to do
    (here, go on); its pool's workers neither stop nor print a KeyboardInterrupt."""
    grades = (
        "import signal, time; from app.grading import is_equivalent; "
        "signal.signal(signal.SIGINT, lambda *_: print('interrupted', flush=True)); "
        "print(is_equivalent('x=-3', 'x=3'), flush=True); input(); "
        "print(is_equivalent('2/4', '0.5'), flush=True)"
    )
    grader = subprocess.Popen(
        [sys.executable, "-c", grades],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # a process group of its own, as a terminal's job
    )
    assert grader.stdout is not None and grader.stdout.readline() == "False\n"
    os.killpg(grader.pid, signal.SIGINT)
    assert grader.stdout.readline() == "interrupted\n"
    out, err = grader.communicate("go\n", timeout=60)
    assert out == "True\n", err  # the same workers still grade
    assert "KeyboardInterrupt" not in err


def test_the_pool_workers_of_a_python_m_run_do_not_import_its_imports_again(
    tmp_path: Path,
) -> None:
    """Each pool worker imports the main module of ``python -m module``; the forkserver
    imports that module once, so what the module imports at its top (torch, for a bench)
    comes with the fork rather than being imported again in every worker."""
    imports = tmp_path / "imports"
    run = subprocess.run(
        [sys.executable, "-m", "tests.grading_main"],
        cwd=Path(__file__).resolve().parents[1],
        env=os.environ | {"GRADING_MAIN_IMPORTS": str(imports)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    printed = json.loads(run.stdout)
    assert printed["verdicts"] == [True, False]
    importers = {int(line) for line in imports.read_text().split()}
    assert printed["workers"] and not importers & set(printed["workers"])
    assert printed["main"] in importers and len(importers) == 2  # and the forkserver


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


def _wrong_verdicts(pairs: list[tuple[str, str]], *, expected: bool) -> list[tuple[str, str]]:
    verdicts = equivalences(pairs)
    return [pair for pair, verdict in zip(pairs, verdicts, strict=True) if verdict is not expected]


def _rewrites(answer: str) -> list[str]:
    """Spellings of ``answer`` that MATH graders count as the same: those that apply to it."""
    rewrites = [rf"\boxed{{{answer}}}", f"${answer}$", f"{answer}."]
    if r"\frac" in answer:
        rewrites.append(answer.replace(r"\frac", r"\dfrac"))
    if r"\dfrac" in answer:
        rewrites.append(answer.replace(r"\dfrac", r"\frac"))
    if r"\left" in answer:
        rewrites.append(re.sub(r"\\(?:left|right)(?![A-Za-z])", "", answer))
    elif re.search(r"[()\[\]]|\\\{", answer) and r"\text" not in answer:
        opened = re.sub(r"\\\{|[(\[]", lambda m: r"\left" + m[0], answer)
        rewrites.append(re.sub(r"\\\}|[)\]]", lambda m: r"\right" + m[0], opened))
    if spaced := _spaced(answer):
        rewrites.append(spaced)
    return rewrites


def _spaced(answer: str) -> str | None:
    """``answer`` with spaces around its operators and after its commas; None if it has none.

    Not inside a number: "10,\\!080" and "58,500" are numbers, "58, 500" is a list.
    """
    if r"\text" in answer:
        return re.sub(r"\\text\{(.*)\}", r"\\text{ \1 }", answer)
    if re.fullmatch(r"[\d,.]+", answer):
        return None
    spaced = re.sub(r"\s*(=|\+|(?<=[\w})])-|\\pm|\\cup)\s*", r" \1 ", answer)
    spaced = re.sub(r",(?!\\!)\s*", ", ", spaced)
    return spaced if spaced != answer else None


def test_every_math500_answer_equals_its_rewrites(shared_data: Path) -> None:
    answers = list(dict.fromkeys(_math500_answers(shared_data)))
    pairs = [(r, a) for a in answers for r in _rewrites(a)]
    pairs += [(a, r) for r, a in pairs]
    assert _wrong_verdicts(pairs, expected=True) == []


_FRACTION = re.compile(r"(-?)(\d*)\\frac(?:\{(\d+)\}|(\d))(?:\{(\d+)\}|(\d))")


def _rational(normalized: str) -> Fraction | None:
    """The value of an integer, a decimal, a fraction or a mixed number; None for the rest."""
    if re.fullmatch(r"-?(?:\d+(?:\.\d*)?|\.\d+)", normalized):
        return Fraction(normalized)
    if fraction := _FRACTION.fullmatch(normalized):
        sign, whole, *parts = fraction.groups()
        numerator, denominator = (int(a or b) for a, b in (parts[:2], parts[2:]))
        value = int(whole or "0") + Fraction(numerator, denominator)
        return -value if sign else value
    return None


def _canonical(answer: str) -> str:
    """``normalize_answer`` without what MATH answers may leave out: ``x=``, a base."""
    text = normalize_answer(answer)
    text = re.sub(r"^[A-Za-z]=", "", text)
    return re.sub(r"_\{?\d+\}?$", "", text)  # math-verify reads a base as a label: 52_8 is 52


def _items(normalized: str) -> set[str]:
    return set(normalized.removeprefix("(").removesuffix(")").split(", "))


def _equal_by_convention(a: str, b: str) -> bool:
    """Whether the grader counts two answers of different problems equal, and rightly.

    Equal spellings and values (two problems answering 2, or ``\\frac14`` and
    ``\\frac{1}{4}``), an answer without its variable or base, and lists of the same items:
    a list is a set of answers, and math-verify compares a tuple ``(-2, 1)`` with the list
    ``1, -2`` as a set too.
    """
    ca, cb = _canonical(a), _canonical(b)
    value = _rational(ca)
    if ca == cb or (value is not None and value == _rational(cb)):
        return True
    both_tuples = all(text.startswith("(") and text.endswith(")") for text in (ca, cb))
    return "," in ca and not both_tuples and _items(ca) == _items(cb)


OTHERS_PER_ANSWER = 5


def _genuinely_different_pairs(answers: list[str], seed: int = 14) -> list[tuple[str, str]]:
    """Each answer with a fixed sample of the others, those equal by convention left out."""
    rng = random.Random(seed)
    pairs = []
    for a in answers:
        others = rng.sample([b for b in answers if b != a], OTHERS_PER_ANSWER)
        pairs += [(a, b) for b in others if not _equal_by_convention(a, b)]
    return pairs


def test_no_math500_answer_equals_a_different_one(shared_data: Path) -> None:
    answers = list(dict.fromkeys(_math500_answers(shared_data)))
    pairs = _genuinely_different_pairs(answers)
    pairs += [(b, a) for a, b in pairs]
    assert _wrong_verdicts(pairs, expected=False) == []


def test_answers_parsed_once_and_kept_give_the_verdicts_of_fresh_parses() -> None:
    """A grading process keeps what it parsed (``_parsed``): one ground truth against many
    answers, its parse shared, gives each answer the verdict it gets on its own."""
    truth = r"\frac{1}{2}"
    answers = ["0.5", r"\frac{2}{4}", "2", r"\frac{1}{3}", "0.5", r"\frac{1}{2}"]
    _parsed.cache_clear()
    shared = [_verify_parsed(answer, truth) for answer in answers]
    assert _parsed.cache_info().misses == len(set(answers) | {truth})
    alone = []
    for answer in answers:
        _parsed.cache_clear()
        alone.append(_verify_parsed(answer, truth))
    assert shared == alone == [True, True, False, False, True, True]


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        ("2", "2", True),
        ("0", "0.0", True),
        (r"\frac14", r"\frac{1}{4}", True),
        (r"1\frac{4}{5}", "1.8", True),
        ("x=5", "5", True),
        ("40_9", "40", True),
        ("(-2,1)", "1,-2", True),
        ("-2,1", "1,-2", True),
        ("90^\\circ", "90", True),
        ("(2,1)", "(1,2)", False),
        ("1,2", "1,3", False),
        (r"\frac{1}{4}", r"\frac{1}{3}", False),
        ("x+y=3", "3", False),
        (r"\text{even}", r"\text{odd}", False),
    ],
)
def test_equal_by_convention(a: str, b: str, equal: bool) -> None:
    assert _equal_by_convention(a, b) is equal
    assert _equal_by_convention(b, a) is equal


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


# Majority votes


def test_answer_groups() -> None:
    answers = ["1/2", None, r"\frac{1}{2}", "2", "  ", "0.5", r"\boxed{2}", "x=2", "3", "1/2"]
    assert answer_groups(answers) == [0, None, 0, 1, None, 0, 1, 1, 2, 0]


def test_answer_groups_number_groups_in_order_of_first_appearance() -> None:
    assert answer_groups(["7", "5", "7", "6", "5"]) == [0, 1, 0, 2, 1]
    assert answer_groups([]) == []
    assert answer_groups([None, ""]) == [None, None]


def test_answer_groups_keep_different_answers_apart() -> None:
    answers = ["6 weeks", "6 days", "10:00 a.m.", "10:00 p.m.", "(1,2)", "(2,1)", "x+y=3", "3"]
    assert answer_groups(answers) == list(range(len(answers)))


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


def test_grade_solutions_store_the_grader_version(session: Session) -> None:
    correct, wrong, undecided = (_solution(session, g, "4") for g in ("4", "5", "?"))
    regraded, left_alone = _solution(session, "1", "1"), _solution(session, "1", "1")
    for solution in (regraded, left_alone):
        solution.answer_correct, solution.grader_version = True, "2020-01-01.1"
    no_ground_truth = _solution(session, None, "5")
    session.flush()

    grade_solutions(session, [s.id for s in (correct, wrong, undecided, regraded, no_ground_truth)])

    def stored(solution: Solution) -> tuple[bool | None, str | None]:
        query = select(Solution.answer_correct, Solution.grader_version)
        return tuple(session.execute(query.where(Solution.id == solution.id)).one())

    assert stored(correct) == (True, GRADER_VERSION)
    assert stored(wrong) == (False, GRADER_VERSION)
    assert stored(undecided) == (None, GRADER_VERSION)  # an undecided verdict is a verdict too
    assert stored(regraded) == (True, GRADER_VERSION)
    assert regraded.grader_version == GRADER_VERSION  # the loaded object follows the UPDATE
    assert stored(left_alone) == (True, "2020-01-01.1")
    assert stored(no_ground_truth) == (None, None)


def test_grade_solutions_with_nothing_to_grade(session: Session) -> None:
    assert grade_solutions(session) == GradeSummary()
    assert grade_solutions(session, []) == GradeSummary()
