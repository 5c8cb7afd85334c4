"""MATH final-answer equivalence: math-verify underneath, MATH's answer conventions on top.

Why one module over 500 lines: normalization, the one shared math-verify process pool
(module state: ``_pool``, killed and replaced on an overrun) and the calls that use it are
one answer-checking path, and the pool has one owner here.

``is_equivalent`` first normalizes both answers (``normalize_answer``) and settles what needs
no parsing: equal strings, a missing answer, word answers, times of day, different units,
an equation against a value. The rest goes to math-verify (``parse``, then ``verify`` with
the ground truth first) in a small shared process pool.

Why a process pool: math-verify's own time limit is ``signal.alarm``, which only works on
the main thread, and a caller may grade from any thread. A thread cannot stop a runaway
sympy computation (``9^{9^{9}}`` computes for minutes); each bad answer would leak a busy
thread. A process can be killed. So math-verify runs with its timeouts off, in the workers
of a small shared pool; a pair that overruns its limit gets the pool killed (a
``ProcessPoolExecutor`` cannot kill one worker alone) and a fresh one is started. Pairs of
other calls lost with it go again on the fresh pool. The limit counts from when the pool
hands a task on to its workers, so that queueing behind other callers' work never times out.

Interrupting the computation inside a worker instead (an alarm in the worker's main thread)
was tried and rejected: an interrupt lands anywhere, in sympy's lazy imports and caches too,
and a worker was seen answering wrongly after one.

The pool belongs to this module, in the process that grades (the PRM worker, a script): it
starts on the first pair that needs math-verify, is replaced after a timeout's kill, and at
the process's exit ``concurrent.futures`` stops its idle workers; ``shutdown_pool`` stops
it sooner (tests). Nothing else starts or stops it: the web app never grades. A process
killed by a signal runs no exit code: each worker then ends itself when it sees the
grading process gone (``_exit_with``), or it would wait for work forever, and keep the
forkserver alive with it.

Workers come from a forkserver rather than ``fork``: forking a threaded web server, or the
torch-loaded worker, copies locks held by other threads. A script that grades must therefore
guard its entry point with ``if __name__ == "__main__":``, as multiprocessing requires of
every start method but fork.
"""

import functools
import logging
import multiprocessing
import os
import re
import selectors
import signal
import sys
import threading
import weakref
from collections import Counter
from collections.abc import Iterator, Sequence
from concurrent.futures import CancelledError, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from fractions import Fraction
from typing import NamedTuple

from sqlalchemy import Row, Select, select, update
from sqlalchemy.orm import Session

from app.answers import final_answer, last_boxed
from app.models import Problem, Solution

Verdict = bool | None
"""True or False: equivalent or not; None: undecidable (unparseable ground truth, timeout)."""

GRADER_VERSION = "2026-11-25.1"
"""Stored with every verdict, so that verdicts of an older grader can be found and regraded.

Change it whenever a verdict can change: a normalization, a rule, math-verify's version or
its options. The date of the change, then a count for changes on the same day.
"""

BATCH_SIZE = 500
"""Solutions read, graded in parallel and written per round trip of ``grade_solutions``."""
POOL_WORKERS = min(4, os.cpu_count() or 1)
"""Worker processes of the shared pool: a few, beside the web server and the PRM worker."""
POOL_START_SECONDS = 60.0
"""How long a fresh pool may take to start its workers (imports included)."""
_MAX_LOSSES = 2
"""A pair whose pool broke under it this many times (not by a timeout's kill) is undecided."""
PARSED_KEPT = 1024
"""Parsed answers each pool worker keeps (``_parsed``): some 22 MB (22 KB an answer with
sympy's own caches, measured on MATH500's answers)."""
_POLL_SECONDS = 0.05

# Normalization

_DOLLARS = re.compile(r"\\?\$")
# Not the "\\" of a matrix row followed by a space.
_SPACING = re.compile(r"\\(?:left|right)(?![A-Za-z])|(?<!\\)\\[!,;: ]|\\q?quad\b|\\displaystyle|~")
_FRAC_VARIANTS = re.compile(r"\\[dt]frac(?![A-Za-z])")
# "0.\overline{36}", "1.2\overline{3}": math-verify reads them as 0 and 1.2.
_REPEATING_DECIMAL = re.compile(r"(\d*)\.(\d*)\\overline\s*(?:\{(\d+)\}|(\d))")
# "10:00 a.m.", "9:30\text{ p.m.}": math-verify reads "10:00" as 10, and the unit rule
# below would drop "\text{ p.m.}".
_MERIDIEM = r"([AaPp])\.?\s*[Mm]\.?"
_TIME_OF_DAY = re.compile(
    rf"(\d{{1,2}}):(\d{{2}})\s*(?:{_MERIDIEM}|\\(?:text|mbox|mathrm)\s*\{{\s*{_MERIDIEM}\s*\}})?\.?"
)
_NORMALIZED_TIME = re.compile(r"\d{1,2}:\d{2}")
_DEGREES = re.compile(r"\^\s*\{?\s*\\circ\s*\}?|\\degree\b|°")
_PERCENT = re.compile(r"\\?%")
# "10{,}080" and "10,\!080" are how MATH writes thousands separators.
_SEPARATOR_COMMA = re.compile(r"\{,\}|,\\!\s*")
# After a number or a closing brace: "5\text{ cm}", "864 \mbox{ inches}^2", "29 cents".
_TRAILING_UNIT = re.compile(
    r"(?<=[\d}])\s*(?:\\(?:text|mbox|mathrm)\s*\{\s*(?P<text_unit>[A-Za-z][A-Za-z .]*)\}"
    r"|\s(?P<word_unit>[A-Za-z]{2,}(?: [A-Za-z]+)*))\s*(?:\^\s*\{?(?P<power>\d)\}?)?$"
)
_UNIT_POWERS = {"square": "2", "sq": "2", "cubic": "3", "cu": "3"}
# Abbreviations and irregular plurals, after the regular plural "s" is gone.
_UNIT_NAMES = {
    "mm": "millimeter",
    "cm": "centimeter",
    "m": "meter",
    "km": "kilometer",
    "in": "inch",
    "ft": "foot",
    "feet": "foot",
    "yd": "yard",
    "mi": "mile",
    "mph": "mile per hour",
    "g": "gram",
    "kg": "kilogram",
    "lb": "pound",
    "oz": "ounce",
    "sec": "second",
    "min": "minute",
    "hr": "hour",
}
# Spaces matter only between two letters ("\pi r", "no solution").
_SPACES = re.compile(r"(?<![A-Za-z])\s+|\s+(?![A-Za-z])")
_TEXT_WRAPPER = re.compile(r"\\(?:text|textbf|textit|textrm|mbox|mathrm|mathbf)\{([^{}]*)\}")
_CHOICE = re.compile(r"\(([A-E])\)")
_THOUSANDS = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_WORDS = re.compile(r"[A-Za-z]{2,}(?: [A-Za-z]+)*|[A-Za-z]+(?: [A-Za-z]+)+")
# One equation, "x+y=3": not a chain ("x=y=3"), a system or a list (commas), nor "<=".
_EQUATION = re.compile(r"([^=<>!,]+)=([^=,]+)")
# "x", "x_1", "\theta", "y'": what MATH answers name with "x = 3".
_VARIABLE = re.compile(r"(?:[A-Za-z]|\\[A-Za-z]+)(?:_\{?[A-Za-z0-9]+\}?)?'*")


class _Normalized(NamedTuple):
    """An answer in canonical spelling, and the unit it ended in."""

    text: str
    unit: str | None
    """The trailing unit ``text`` lost, spelled canonically (``inch^2``); None if none."""


def normalize_answer(answer: str) -> str:
    """The answer in a canonical spelling, for string comparison and for math-verify.

    The conventions MATH graders apply, in this order:

    - a whole-answer ``\\boxed{}`` is unwrapped;
    - dollar signs go, as math delimiters and as currency (``\\$5`` is ``5``);
    - ``\\left``, ``\\right``, spacing commands and ``\\displaystyle`` go;
    - a time of day is read on a 24-hour clock: ``10:00 p.m.`` is ``22:00``;
    - a repeating decimal becomes a fraction: ``1.2\\overline{3}`` is ``\\frac{37}{30}``;
    - ``\\dfrac`` and ``\\tfrac`` become ``\\frac``;
    - degree marks go (``90^\\circ`` is ``90``), and percent signs (``10\\%`` is ``10``);
    - a trailing period goes, and a trailing unit: ``5\\text{ cm}``, ``864 \\mbox{ inches}^2``,
      ``29 cents`` (the grader still compares units that both answers have);
    - thousands separators go: ``1,000``, ``10,\\!080`` and ``10{,}080`` are numbers;
    - spaces go, except between two letters (``\\pi r``); a comma gets one space after it;
    - a whole-answer ``\\text{}`` is unwrapped, a choice ``(C)`` becomes ``C``, and a
      word answer (``\\text{Evelyn}``) is lowercased.
    """
    return _normalize(answer).text


def _normalize(answer: str) -> _Normalized:
    """``normalize_answer``, keeping the unit it drops."""
    text = answer.strip()
    if text.startswith(("\\boxed", "\\fbox")):
        text = last_boxed(text) or text
    text = _DOLLARS.sub("", text)
    text = _SEPARATOR_COMMA.sub(",", text)
    text = _SPACING.sub(" ", text).strip()
    if time := _TIME_OF_DAY.fullmatch(text):
        return _Normalized(_time_of_day(time), None)
    text = _REPEATING_DECIMAL.sub(_repeating_decimal_as_fraction, text)
    text = _FRAC_VARIANTS.sub(r"\\frac", text)
    text = _DEGREES.sub("", text)
    text = _PERCENT.sub("", text)
    text, unit = _without_unit(text.strip().removesuffix("."))
    text = text.removesuffix(".")
    if _THOUSANDS.fullmatch(text):
        text = text.replace(",", "")
    # Commas left over separate items; one space after each keeps math-verify from reading
    # "100,200" as a number.
    return _Normalized(_canonical_atom(_SPACES.sub("", text).replace(",", ", ")), unit)


def _time_of_day(match: re.Match[str]) -> str:
    """``10:00 p.m.`` as ``22:00``; a time without a.m. or p.m. stays as written."""
    hour, minute, meridiem = int(match[1]), match[2], match[3] or match[4]
    if meridiem:
        hour = hour % 12 + (12 if meridiem.lower() == "p" else 0)
    return f"{hour}:{minute}"


def _repeating_decimal_as_fraction(match: re.Match[str]) -> str:
    """``1.2\\overline{3}`` as ``\\frac{37}{30}``, in lowest terms.

    With ``a`` digits before the repeating ``r`` ones, ``0.A\\overline{R}`` is
    ``(AR - A) / (10^a (10^r - 1))``: 0.2333... is (23 - 2) / 90.
    """
    whole, fixed, repeating = match[1], match[2], match[3] or match[4]
    fraction = Fraction(
        int(fixed + repeating) - int(fixed or "0"),
        10 ** len(fixed) * (10 ** len(repeating) - 1),
    )
    value = int(whole or "0") + fraction
    if value.denominator == 1:
        return str(value.numerator)
    return rf"\frac{{{value.numerator}}}{{{value.denominator}}}"


def _without_unit(text: str) -> tuple[str, str | None]:
    """``text`` without its trailing unit, and the unit spelled canonically."""
    match = _TRAILING_UNIT.search(text)
    if match is None:
        return text, None
    unit = _unit_name(match["text_unit"] or match["word_unit"], match["power"])
    return text[: match.start()], unit


def _unit_name(unit: str, power: str | None) -> str:
    """One spelling per unit: ``square inches``, ``sq. in.`` and ``inch^2`` are ``inch^2``."""
    words = [_singular(word) for word in unit.lower().replace(".", " ").split()]
    if len(words) > 1 and words[0] in _UNIT_POWERS:
        power = power or _UNIT_POWERS[words[0]]
        words = words[1:]
    name = " ".join(_UNIT_NAMES.get(word, word) for word in words)
    return f"{name}^{power}" if power and power != "1" else name


def _singular(word: str) -> str:
    """``inches`` is ``inch``, ``days`` is ``day``; short words (``ms``, ``is``) stay."""
    if len(word) > 4 and word.endswith(("ches", "shes", "sses", "xes")):
        return word[:-2]
    if len(word) > 2 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def _canonical_atom(text: str) -> str:
    """Spellings of a whole answer that is one thing: text, a choice, words."""
    if wrapped := _TEXT_WRAPPER.fullmatch(text):
        text = wrapped.group(1).strip()
    if choice := _CHOICE.fullmatch(text):
        return choice.group(1)
    if _WORDS.fullmatch(text):
        return text.lower()
    return text


def _verdict_by_rules(answer: _Normalized, gold: _Normalized) -> Verdict:
    """The verdict on two normalized answers where no parsing is needed, else None."""
    if answer.unit and gold.unit and answer.unit != gold.unit:
        return False  # "6 weeks" is not "6 days"; a unit on one side only is left out
    if answer.text == gold.text:
        return True
    if not answer.text:
        return False  # no answer is a wrong answer
    if _WORDS.fullmatch(gold.text):
        # math-verify reads words as products of one-letter symbols, so "no" would equal
        # "on"; words are compared as words.
        return False
    if _NORMALIZED_TIME.fullmatch(answer.text) or _NORMALIZED_TIME.fullmatch(gold.text):
        return False  # times of day are compared as written: math-verify reads 10:00 as 10
    if _equation_against_value(answer.text, gold.text):
        return False
    return None


def _equation_against_value(answer: str, gold: str) -> bool:
    """Whether one side is an equation not for a single variable, and the other no equation.

    ``x = 3`` against ``3`` is left to math-verify, which counts them equal: MATH answers
    name the variable they solve for, and MATH graders drop it. ``x + y = 3`` is a relation
    between x and y, not the number 3, but math-verify takes the right side of any equation
    that meets a value (and reads a left side of letters alone, ``x + y``, as a name).
    """
    equations = [match for match in map(_EQUATION.fullmatch, (answer, gold)) if match]
    return len(equations) == 1 and not _VARIABLE.fullmatch(equations[0][1])


# The pool

_pool: ProcessPoolExecutor | None = None
_pool_lock = threading.Lock()
_killed_on_timeout: weakref.WeakSet[ProcessPoolExecutor] = weakref.WeakSet()
"""Pools killed for a pair that ran too long: the other pairs they took down were innocent."""


def _start_worker(grading_process: int) -> None:
    """Runs in each pool worker before its first task: end with ``grading_process``, and
    warm up the parser."""
    threading.Thread(target=_exit_with, args=(grading_process,), daemon=True).start()
    # Ctrl-C reaches the whole process group: the grading process decides how to stop, and
    # its workers end with it; a worker's own KeyboardInterrupt was only a traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The "timeout is disabled" warning is expected: the pool is the time limit.
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    _verify_parsed("1", "1")


def _exit_with(pid: int) -> None:
    """End this worker once process ``pid`` has ended, however it ended."""
    # The worker's parent is the forkserver, not the grading process: no parent-death
    # signal reaches it, and its task queue never reads end-of-file (it holds both ends).
    try:
        watched = os.pidfd_open(pid)
    except OSError:  # gone already
        os._exit(0)
    with selectors.DefaultSelector() as selector:
        selector.register(watched, selectors.EVENT_READ)  # readable once it has ended
        selector.select()
    os._exit(0)


def _new_pool() -> ProcessPoolExecutor:
    context = multiprocessing.get_context("forkserver")
    # The forkserver imports these once (it outlives pools); workers forked from it start
    # warm, so a pool killed on a timeout comes back in a fraction of a second.
    context.set_forkserver_preload(["app.grading", "math_verify", *_main_module()])
    pool = ProcessPoolExecutor(
        POOL_WORKERS, mp_context=context, initializer=_start_worker, initargs=(os.getpid(),)
    )
    try:
        # Start every worker now, so that no caller's time limit pays for starting one.
        for future in [pool.submit(os.getpid) for _ in range(POOL_WORKERS)]:
            future.result(timeout=POOL_START_SECONDS)
    except BaseException:
        _kill_workers(pool)
        raise
    return pool


def _main_module() -> list[str]:
    """The module ``python -m`` runs in the process that grades, for the forkserver to import
    once.

    Each pool worker imports that module anew, as multiprocessing does for every start
    method but fork. One that loads torch at its top (``python -m bench.active_learning``)
    took seconds and hundreds of MB in every worker, and again in each fresh pool
    (BENCHMARKS.md, "Grading", session 28). Imported in the forkserver, what it imports
    comes with the fork, and the worker only runs its body again."""
    spec = getattr(sys.modules["__main__"], "__spec__", None)
    # None under -c, and for a script (its workers run it by path; there is no name to
    # import it by). A package's __main__ (python -m worker) is never run in the workers.
    if spec is None or spec.name.endswith(".__main__"):
        return []
    return [spec.name]


def _live_pool() -> ProcessPoolExecutor:
    """The shared pool, started on first use and after a timeout killed the last one."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = _new_pool()
        return _pool


def _discard_pool(pool: ProcessPoolExecutor) -> None:
    """Kill ``pool``'s workers (a stuck one included); the next call starts a fresh pool."""
    global _pool
    with _pool_lock:
        if _pool is pool:
            _pool = None
    _kill_workers(pool)


def _kill_workers(pool: ProcessPoolExecutor) -> None:
    # shutdown() never stops a running task, and forgets the processes: kill them first.
    # Python 3.11 has no public way to reach them (3.14 adds terminate_workers()).
    for process in list((pool._processes or {}).values()):
        process.kill()
    pool.shutdown(wait=False, cancel_futures=True)


def shutdown_pool() -> None:
    """Stop the shared pool now, rather than at the process's exit (tests)."""
    if _pool is not None:
        _discard_pool(_pool)


# Equivalence


def _verify_parsed(answer: str, gold: str) -> Verdict:
    """math-verify on two normalized answers, without its signal-based time limits."""
    from math_verify import verify

    parsed_gold = _parsed(gold)
    # parse() gives sympy objects, plus the raw string as a fallback.
    if all(isinstance(item, str) for item in parsed_gold):
        return None  # a ground truth that is no mathematical expression decides nothing
    parsed_answer = _parsed(answer)
    # "x \ge 3" and "[3, \infty)" are the same set, whichever of them is the ground truth.
    verdict = verify(
        list(parsed_gold), list(parsed_answer), allow_set_relation_comp=True, timeout_seconds=None
    )
    return bool(verdict)


@functools.lru_cache(maxsize=PARSED_KEPT)
def _parsed(normalized: str) -> tuple[object, ...]:
    """math-verify's parse of a normalized answer, kept by the pool's process: parsing is
    over half of a comparison's time, and an answer compared with many (``answer_groups``'s
    representatives, a ground truth with each of its solutions' answers) was parsed anew
    each time (BENCHMARKS, "Grading"). Safe to share: sympy's expressions are immutable,
    and ``verify`` gets lists of its own."""
    from math_verify import parse

    return tuple(parse(f"${normalized}$", parsing_timeout=None))


def is_equivalent(answer: str, ground_truth: str, *, timeout_seconds: float = 5.0) -> Verdict:
    """Whether ``answer`` is ``ground_truth`` as MATH graders judge it; None: undecidable."""
    return equivalences([(answer, ground_truth)], timeout_seconds=timeout_seconds)[0]


def equivalences(
    pairs: Sequence[tuple[str, str]], *, timeout_seconds: float = 5.0
) -> list[Verdict]:
    """``is_equivalent`` for many ``(answer, ground_truth)`` pairs, in parallel."""
    normalized = [(_normalize(a), _normalize(g)) for a, g in pairs]
    verdicts = [_verdict_by_rules(a, g) for a, g in normalized]
    hard = [i for i, verdict in enumerate(verdicts) if verdict is None]
    texts = [(normalized[i][0].text, normalized[i][1].text) for i in hard]
    for i, verdict in zip(hard, _verify_in_pool(texts, timeout_seconds), strict=True):
        verdicts[i] = verdict
    return verdicts


def _verify_in_pool(pairs: list[tuple[str, str]], timeout_seconds: float) -> list[Verdict]:
    """math-verify's verdicts on normalized pairs, each within ``timeout_seconds``."""
    verdicts: list[Verdict] = [None] * len(pairs)
    losses = [0] * len(pairs)
    todo = list(range(len(pairs)))
    while todo:
        lost, innocent = _verify_round(pairs, todo, verdicts, timeout_seconds)
        # When a timeout's kill (this call's or another's) broke the pool, the pairs it took
        # down were innocent and go again freely; this still ends, as every such kill settles
        # the pair that timed out. A pool that broke by itself may have been broken by one
        # of the lost pairs, so they are retried only so often.
        if not innocent:
            for i in lost:
                losses[i] += 1
        todo = [i for i in lost if losses[i] < _MAX_LOSSES]
    return verdicts


def _verify_round(
    pairs: list[tuple[str, str]], todo: list[int], verdicts: list[Verdict], timeout_seconds: float
) -> tuple[list[int], bool]:
    """Fill in ``verdicts[todo]``; return the pairs lost to a broken pool, and whether a
    timeout's kill broke it."""
    pool = _live_pool()
    try:
        futures = [(i, pool.submit(_verify_parsed, *pairs[i])) for i in todo]
    except (BrokenProcessPool, RuntimeError):  # broken or shut down by another call
        _discard_pool(pool)
        return todo, pool in _killed_on_timeout
    lost: list[int] = []
    for i, future in futures:
        try:
            verdicts[i] = _result(future, timeout_seconds)
        except TimeoutError:
            _killed_on_timeout.add(pool)
            _discard_pool(pool)
        except (BrokenProcessPool, CancelledError):  # the pool died under it
            lost.append(i)
    return lost, pool in _killed_on_timeout


def _result(future: Future[Verdict], timeout_seconds: float) -> Verdict:
    """The task's verdict; TimeoutError once it has run for ``timeout_seconds``.

    The clock starts when the pool hands the task on to its workers: time spent queued behind
    other callers' tasks is no fault of this pair.
    """
    while not (future.running() or future.done()):
        wait([future], timeout=_POLL_SECONDS)
    return future.result(timeout=timeout_seconds)


def answer_groups(
    answers: Sequence[str | None], *, timeout_seconds: float = 5.0
) -> list[int | None]:
    """Number the answers so that answers the grader counts as equal share a number.

    For majority votes over sampled solutions: ``["1/2", "0.5", "2", None]`` gives
    ``[0, 0, 1, None]`` (no answer, no group). An answer joins the first group whose
    first member it is equivalent to, in either direction (the grader is not always
    symmetric); numbers count up in order of first appearance.
    """
    representatives: list[str] = []
    # Keyed by the unit too: "6 weeks" and "6 days" are spelled "6" alike.
    by_spelling: dict[_Normalized, int] = {}
    groups: list[int | None] = []
    for answer in answers:
        if answer is None or not answer.strip():
            groups.append(None)
            continue
        spelling = _normalize(answer)
        if spelling not in by_spelling:
            by_spelling[spelling] = _matching_group(answer, representatives, timeout_seconds)
            if by_spelling[spelling] == len(representatives):
                representatives.append(answer)
        groups.append(by_spelling[spelling])
    return groups


def _matching_group(answer: str, representatives: list[str], timeout_seconds: float) -> int:
    """The index of the first representative equal to ``answer``; a new index if none is."""
    if not representatives:
        return 0
    pairs = [(answer, r) for r in representatives] + [(r, answer) for r in representatives]
    verdicts = equivalences(pairs, timeout_seconds=timeout_seconds)
    count = len(representatives)
    for index in range(count):
        if verdicts[index] or verdicts[count + index]:
            return index
    return count


# Solutions


def final_answer_of(steps: list[str]) -> str | None:
    """A solution's final answer: the ``# Answer`` section of its last step, else its last box."""
    return final_answer(steps)


@dataclass(frozen=True)
class GradeSummary:
    """What one ``grade_solutions`` call decided."""

    correct: int = 0
    wrong: int = 0
    undecided: int = 0

    @property
    def graded(self) -> int:
        """Every solution looked at, the undecided ones included."""
        return self.correct + self.wrong + self.undecided


_GradeRow = Row[int, str | None, list[str] | None, str | None]


def grade_solutions(session: Session, solution_ids: list[int] | None = None) -> GradeSummary:
    """Grade final answers against the ground truth and store them in ``answer_correct``,
    with ``GRADER_VERSION`` in ``grader_version``.

    Grades the ungraded solutions, or those in ``solution_ids`` (graded or not); solutions
    of problems without a ground truth are left alone. A solution's answer is its
    ``answer``, else the final answer in its steps; none at all is wrong. Flushes, never
    commits.
    """
    counts: Counter[Verdict] = Counter()
    for rows in _batches(session, solution_ids):
        pairs = [(_answer_of(row), row.ground_truth_answer or "") for row in rows]
        verdicts = equivalences(pairs)
        _store(session, [row.id for row in rows], verdicts)
        counts.update(verdicts)
    session.flush()
    return GradeSummary(correct=counts[True], wrong=counts[False], undecided=counts[None])


def _gradable() -> Select[int, str | None, list[str] | None, str | None]:
    return (
        select(Solution.id, Solution.answer, Solution.steps, Problem.ground_truth_answer)
        .join(Problem, Solution.problem_id == Problem.id)
        .where(Problem.ground_truth_answer.is_not(None))
        .order_by(Solution.id)
    )


def _batches(session: Session, solution_ids: list[int] | None) -> Iterator[Sequence[_GradeRow]]:
    if solution_ids is not None:
        ids = sorted(set(solution_ids))
        for start in range(0, len(ids), BATCH_SIZE):
            chunk = ids[start : start + BATCH_SIZE]
            yield session.execute(_gradable().where(Solution.id.in_(chunk))).all()
        return
    # Keyset pages: undecided solutions stay ungraded, so "the next 500 ungraded" would
    # return them again forever.
    after = 0
    ungraded = _gradable().where(Solution.answer_correct.is_(None)).limit(BATCH_SIZE)
    while rows := session.execute(ungraded.where(Solution.id > after)).all():
        yield rows
        after = rows[-1].id


def _answer_of(row: _GradeRow) -> str:
    return row.answer or final_answer_of(row.steps or []) or ""


def _store(session: Session, ids: list[int], verdicts: list[Verdict]) -> None:
    """One UPDATE per verdict value, keeping loaded Solution objects in step.

    None is written too: a regraded answer that is now undecided loses its old verdict, and
    its grader version says which grader could not decide.
    """
    for value in (True, False, None):
        matching = [i for i, verdict in zip(ids, verdicts, strict=True) if verdict is value]
        if matching:
            session.execute(
                update(Solution)
                .where(Solution.id.in_(matching))
                .values(answer_correct=value, grader_version=GRADER_VERSION)
            )
