"""MATH final-answer equivalence: math-verify underneath, MATH's answer conventions on top.

``is_equivalent`` first normalizes both answers (``normalize_answer``) and settles what needs
no parsing: equal strings, a missing answer, word answers. The rest goes to math-verify
(``parse``, then ``verify`` with the ground truth first) in a small shared process pool.

Why a process pool: math-verify's own time limit is ``signal.alarm``, which only works on
the main thread, and the web app grades from worker threads. A thread cannot stop a runaway
sympy computation (``9^{9^{9}}`` computes for minutes); each bad answer would leak a busy
thread. A process can be killed. So math-verify runs with its timeouts off, in the workers
of a small shared pool; a pair that overruns its limit gets the pool killed (a
``ProcessPoolExecutor`` cannot kill one worker alone) and a fresh one is started. Pairs of
other calls lost with it go again on the fresh pool. The limit counts from when the pool
hands a task on to its workers, so that queueing behind other callers' work never times out.

Interrupting the computation inside a worker instead (an alarm in the worker's main thread)
was tried and rejected: an interrupt lands anywhere, in sympy's lazy imports and caches too,
and a worker was seen answering wrongly after one.

Workers come from a forkserver rather than ``fork``: forking a threaded web server, or the
torch-loaded worker, copies locks held by other threads. A script that grades must therefore
guard its entry point with ``if __name__ == "__main__":``, as multiprocessing requires of
every start method but fork.
"""

import logging
import multiprocessing
import os
import re
import threading
import weakref
from collections import Counter
from collections.abc import Iterator, Sequence
from concurrent.futures import CancelledError, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass

from sqlalchemy import Row, Select, select, update
from sqlalchemy.orm import Session

from app.answers import final_answer, last_boxed
from app.models import Problem, Solution

Verdict = bool | None
"""True or False: equivalent or not; None: undecidable (unparseable ground truth, timeout)."""

BATCH_SIZE = 500
"""Solutions read, graded in parallel and written per round trip of ``grade_solutions``."""
POOL_WORKERS = min(4, os.cpu_count() or 1)
"""Worker processes of the shared pool: a few, beside the web server and the PRM worker."""
POOL_START_SECONDS = 60.0
"""How long a fresh pool may take to start its workers (imports included)."""
_MAX_LOSSES = 2
"""A pair whose pool broke under it this many times (not by a timeout's kill) is undecided."""
_POLL_SECONDS = 0.05

# Normalization

_DOLLARS = re.compile(r"\\?\$")
# Not the "\\" of a matrix row followed by a space.
_SPACING = re.compile(r"\\(?:left|right)(?![A-Za-z])|(?<!\\)\\[!,;: ]|\\q?quad\b|\\displaystyle|~")
_FRAC_VARIANTS = re.compile(r"\\[dt]frac(?![A-Za-z])")
_DEGREES = re.compile(r"\^\s*\{?\s*\\circ\s*\}?|\\degree\b|°")
_PERCENT = re.compile(r"\\?%")
# "10{,}080" and "10,\!080" are how MATH writes thousands separators.
_SEPARATOR_COMMA = re.compile(r"\{,\}|,\\!\s*")
# After a number or a closing brace: "5\text{ cm}", "864 \mbox{ inches}^2", "29 cents".
_TRAILING_UNIT = re.compile(
    r"(?<=[\d}])\s*(?:\\(?:text|mbox|mathrm)\s*\{\s*[A-Za-z][A-Za-z .]*\}"
    r"|\s[A-Za-z]{2,}(?: [A-Za-z]+)*)\s*(?:\^\s*\{?\d\}?)?$"
)
# Spaces matter only between two letters ("\pi r", "no solution").
_SPACES = re.compile(r"(?<![A-Za-z])\s+|\s+(?![A-Za-z])")
_TEXT_WRAPPER = re.compile(r"\\(?:text|textbf|textit|textrm|mbox|mathrm|mathbf)\{([^{}]*)\}")
_CHOICE = re.compile(r"\(([A-E])\)")
_THOUSANDS = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_WORDS = re.compile(r"[A-Za-z]{2,}(?: [A-Za-z]+)*|[A-Za-z]+(?: [A-Za-z]+)+")


def normalize_answer(answer: str) -> str:
    """The answer in a canonical spelling, for string comparison and for math-verify.

    The conventions MATH graders apply, in this order:

    - a whole-answer ``\\boxed{}`` is unwrapped;
    - dollar signs go, as math delimiters and as currency (``\\$5`` is ``5``);
    - ``\\left``, ``\\right``, spacing commands and ``\\displaystyle`` go;
    - ``\\dfrac`` and ``\\tfrac`` become ``\\frac``;
    - degree marks go (``90^\\circ`` is ``90``), and percent signs (``10\\%`` is ``10``);
    - a trailing unit goes: ``5\\text{ cm}``, ``864 \\mbox{ inches}^2``, ``29 cents``;
    - a trailing period goes;
    - thousands separators go: ``1,000``, ``10,\\!080`` and ``10{,}080`` are numbers;
    - spaces go, except between two letters (``\\pi r``); a comma gets one space after it;
    - a whole-answer ``\\text{}`` is unwrapped, a choice ``(C)`` becomes ``C``, and a
      word answer (``\\text{Evelyn}``) is lowercased.
    """
    text = answer.strip()
    if text.startswith(("\\boxed", "\\fbox")):
        text = last_boxed(text) or text
    text = _DOLLARS.sub("", text)
    text = _SEPARATOR_COMMA.sub(",", text)
    text = _SPACING.sub(" ", text)
    text = _FRAC_VARIANTS.sub(r"\\frac", text)
    text = _DEGREES.sub("", text)
    text = _PERCENT.sub("", text)
    text = _TRAILING_UNIT.sub("", text.strip()).removesuffix(".")
    if _THOUSANDS.fullmatch(text):
        text = text.replace(",", "")
    # Commas left over separate items; one space after each keeps math-verify from reading
    # "100,200" as a number.
    return _canonical_atom(_SPACES.sub("", text).replace(",", ", "))


def _canonical_atom(text: str) -> str:
    """Spellings of a whole answer that is one thing: text, a choice, words."""
    if wrapped := _TEXT_WRAPPER.fullmatch(text):
        text = wrapped.group(1).strip()
    if choice := _CHOICE.fullmatch(text):
        return choice.group(1)
    if _WORDS.fullmatch(text):
        return text.lower()
    return text


def _verdict_by_rules(answer: str, gold: str) -> Verdict:
    """The verdict on two normalized answers where no parsing is needed, else None."""
    if answer == gold:
        return True
    if not answer:
        return False  # no answer is a wrong answer
    if _WORDS.fullmatch(gold):
        # math-verify reads words as products of one-letter symbols, so "no" would equal
        # "on"; words are compared as words.
        return False
    return None


# The pool

_pool: ProcessPoolExecutor | None = None
_pool_lock = threading.Lock()
_killed_on_timeout: weakref.WeakSet[ProcessPoolExecutor] = weakref.WeakSet()
"""Pools killed for a pair that ran too long: the other pairs they took down were innocent."""


def _start_worker() -> None:
    """Runs in each pool worker before its first task: warm up the parser."""
    # The "timeout is disabled" warning is expected: the pool is the time limit.
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    _verify_parsed("1", "1")


def _new_pool() -> ProcessPoolExecutor:
    context = multiprocessing.get_context("forkserver")
    # The forkserver imports these once (it outlives pools); workers forked from it start
    # warm, so a pool killed on a timeout comes back in a fraction of a second.
    context.set_forkserver_preload(["app.grading", "math_verify"])
    pool = ProcessPoolExecutor(POOL_WORKERS, mp_context=context, initializer=_start_worker)
    try:
        # Start every worker now, so that no caller's time limit pays for starting one.
        for future in [pool.submit(os.getpid) for _ in range(POOL_WORKERS)]:
            future.result(timeout=POOL_START_SECONDS)
    except BaseException:
        _kill_workers(pool)
        raise
    return pool


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
    """Stop the shared pool (at application shutdown, and in tests)."""
    if _pool is not None:
        _discard_pool(_pool)


# Equivalence


def _verify_parsed(answer: str, gold: str) -> Verdict:
    """math-verify on two normalized answers, without its signal-based time limits."""
    from math_verify import parse, verify

    parsed_gold = parse(f"${gold}$", parsing_timeout=None)
    # parse() gives sympy objects, plus the raw string as a fallback.
    if all(isinstance(item, str) for item in parsed_gold):
        return None  # a ground truth that is no mathematical expression decides nothing
    parsed_answer = parse(f"${answer}$", parsing_timeout=None)
    # "x \ge 3" and "[3, \infty)" are the same set, whichever of them is the ground truth.
    verdict = verify(parsed_gold, parsed_answer, allow_set_relation_comp=True, timeout_seconds=None)
    return bool(verdict)


def is_equivalent(answer: str, ground_truth: str, *, timeout_seconds: float = 5.0) -> Verdict:
    """Whether ``answer`` is ``ground_truth`` as MATH graders judge it; None: undecidable."""
    return equivalences([(answer, ground_truth)], timeout_seconds=timeout_seconds)[0]


def equivalences(
    pairs: Sequence[tuple[str, str]], *, timeout_seconds: float = 5.0
) -> list[Verdict]:
    """``is_equivalent`` for many ``(answer, ground_truth)`` pairs, in parallel."""
    normalized = [(normalize_answer(a), normalize_answer(g)) for a, g in pairs]
    verdicts = [_verdict_by_rules(a, g) for a, g in normalized]
    hard = [i for i, verdict in enumerate(verdicts) if verdict is None]
    for i, verdict in zip(
        hard, _verify_in_pool([normalized[i] for i in hard], timeout_seconds), strict=True
    ):
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
    """Grade final answers against the ground truth and store them in ``answer_correct``.

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

    None is written too: a regraded answer that is now undecided loses its old verdict.
    """
    for value in (True, False, None):
        matching = [i for i, verdict in zip(ids, verdicts, strict=True) if verdict is value]
        if matching:
            session.execute(
                update(Solution).where(Solution.id.in_(matching)).values(answer_correct=value)
            )
