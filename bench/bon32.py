"""The bon32 pool (../shared/data/strictprmbench_bon32.jsonl.gz) as a bench corpus.

500 GSM8K and the 500 MATH-500 problems, 32 sampled solutions each, with the step scores
of Qwen2.5-Math-PRM-7B on every step (SOURCES.md). Three things make it a corpus:

- its answers graded again by steplabel's own grader (app/grading.py) against the true
  ground truths: the file's MATH-500 ``ground_truth``/``is_correct`` are wrong for 171
  problems (a known defect), so MATH-500's come from math500_test.jsonl (math500_NNN is
  line NNN+1), GSM8K's from the file (integers, sound);
- ProcessBench's test problems (the split every other table judges on, by the same
  identity bench/active_learning.py ``--corpus prmbench`` drops them by: the normalized
  problem text) left out;
- a simulated labeler, ``simulated_first_error``: the 7B PRM's step scores read by a rule
  written in BENCHMARKS.md ("bon32", the simulated labeler) before any selection run.

Its problems are then split by a hash of their id into two halves, ``calibration`` (to
choose on) and ``confirmation`` (run once), and within each half into the pool that
strategies pick from and held-out problems judged by the simulated labeler.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.content_keys import normalized_problem
from app.grading import equivalences, final_answer_of
from worker.eval_sets import ProcessBenchItem, load_processbench, unit_hash

BON32 = "bon32"
FILE = "strictprmbench_bon32.jsonl.gz"
MATH500 = "math500_test.jsonl"
SAMPLES = 32
ERROR_BELOW = 0.5
"""The simulated labeler's threshold on the 7B PRM's P(step is right)."""
HALVES = ("calibration", "confirmation")
JUDGED_SAMPLES = 8
"""Solutions judged per held-out problem."""
HELD_OUT_SHARE = 0.25
"""Of each half's problems, the share judged by the simulated labeler, never picked from."""


def simulated_first_error(scores: Sequence[float], answer_correct: bool) -> int:
    """The simulated labeler's first error (-1: every step right), the rule of
    BENCHMARKS.md: the first step the 7B PRM scores below 0.5 is the first error (the steps
    before it +1); a wrong graded answer with no such step has its last step as the first
    error; a right one with none is right throughout."""
    if not scores:
        raise ValueError("a solution without steps has no labels")
    for index, score in enumerate(scores):
        if score < ERROR_BELOW:
            return index
    return -1 if answer_correct else len(scores) - 1


@dataclass(frozen=True)
class Bon32Solution:
    """One sampled solution, graded again, with its simulated labels."""

    item: ProcessBenchItem
    """``subset`` the dataset (gsm8k, math500), ``id`` ``<problem_id>:<sample>``, ``label``
    the simulated labeler's first error, ``final_answer_correct`` steplabel's grade."""
    problem_id: str
    sample: int
    prm_scores: list[float]
    file_correct: bool
    """The file's own ``is_correct`` (wrong in places for MATH-500), kept to report on."""


@dataclass(frozen=True)
class Bon32:
    solutions: list[Bon32Solution]
    notes: dict[str, Any]


def ground_truths(data: Path) -> dict[str, str]:
    """MATH-500's true answers by bon32 problem id: math500_NNN is line NNN+1."""
    with (data / MATH500).open() as lines:
        return {f"math500_{n:03d}": json.loads(line)["answer"] for n, line in enumerate(lines)}


def processbench_test_problems(data: Path) -> set[str]:
    """ProcessBench's test problems (normalized texts), split as every other table splits
    it: bench/prm_quality.py ``split``, test share 0.5, seed 0, by the problem's text."""
    # Imported here: bench.prm_quality_data pulls in the worker's training code (torch).
    from bench.prm_quality_data import split

    return {normalized_problem(i.problem) for i in split(load_processbench(data), 0.5, 0).test}


def load_bon32(data: Path, grades: Path | None = None) -> Bon32:
    """Every solution of the file whose problem is no ProcessBench test problem, graded
    again (the verdicts kept in ``grades``, a JSON file, when given: grading 32,000 answers
    takes minutes), with its simulated labels."""
    truths = ground_truths(data)
    records = read_records(data)
    verdicts = _grades(records, truths, grades)
    tests = processbench_test_problems(data)
    solutions = []
    dropped: set[str] = set()
    unscored = 0
    for record, correct in zip(records, verdicts, strict=True):
        if normalized_problem(record["problem"]) in tests:
            dropped.add(record["problem_id"])
            continue
        scores = record["qwen_prm"]
        if not scores or len(scores) != len(record["steps"]):
            unscored += 1
            continue
        item = ProcessBenchItem(
            subset=record["dataset"],
            id=f"{record['problem_id']}:{record['sample']}",
            problem=record["problem"],
            steps=record["steps"],
            label=simulated_first_error(scores, correct),
            final_answer_correct=correct,
        )
        solutions.append(
            Bon32Solution(
                item, record["problem_id"], record["sample"], scores, record["is_correct"]
            )
        )
    notes = {
        "corpus": BON32,
        "problems_dropped_as_processbench_test_problems": len(dropped),
        "solutions_without_step_scores": unscored,
        "regraded_changed": sum(
            r["is_correct"] != v for r, v in zip(records, verdicts, strict=True)
        ),
        "labeler": rule_agreement(solutions),
    }
    return Bon32(solutions, notes)


def _grades(records: list[dict[str, Any]], truths: dict[str, str], path: Path | None) -> list[bool]:
    """steplabel's verdict on each record's final answer (undecidable counts as wrong)."""
    key = f"{len(records)}:{sum(len(r['steps']) for r in records)}"
    if path is not None and path.exists():
        kept = json.loads(path.read_text())
        if kept.get("key") == key:
            return [bool(v) for v in kept["verdicts"]]
    verdicts = [v is True for v in equivalences(answer_pairs(records, truths))]
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"key": key, "verdicts": verdicts}))
    return verdicts


def answer_pairs(records: list[dict[str, Any]], truths: dict[str, str]) -> list[tuple[str, str]]:
    """Each record's final answer beside its problem's ground truth (``truths`` by problem
    id, else the file's own)."""
    return [
        (
            final_answer_of(record["steps"]) or record["answer"] or "",
            truths.get(record["problem_id"], record["ground_truth"]),
        )
        for record in records
    ]


def read_records(data: Path) -> list[dict[str, Any]]:
    """The file's lines, in its order (32 samples of a problem one after the other)."""
    with gzip.open(data / FILE, "rt") as lines:
        return [json.loads(line) for line in lines]


def rule_agreement(solutions: Sequence[Bon32Solution]) -> dict[str, Any]:
    """How often the 7B PRM's scores alone (a step below 0.5, before the rule's fallback)
    agree with the graded answer: a right answer with no such step, a wrong one with one."""
    counts: Counter[tuple[bool, bool]] = Counter()
    for s in solutions:
        flagged = any(score < ERROR_BELOW for score in s.prm_scores)
        counts[(s.item.final_answer_correct, flagged)] += 1
    right = counts[(True, False)] + counts[(True, True)]
    wrong = counts[(False, False)] + counts[(False, True)]
    agree = counts[(True, False)] + counts[(False, True)]
    return {
        "solutions": len(solutions),
        "agreement": agree / max(1, len(solutions)),
        "right_answers_without_flagged_step": counts[(True, False)] / max(1, right),
        "wrong_answers_with_flagged_step": counts[(False, True)] / max(1, wrong),
        "wrong_answers_fallback_last_step": counts[(False, False)],
        "right_answers_with_flagged_step": counts[(True, True)],
        "with_error": sum(s.item.label >= 0 for s in solutions),
    }


def half_of(problem_id: str) -> str:
    """Which half a problem is in, by a hash of its id alone."""
    return HALVES[0] if unit_hash(0, f"bon32-half:{problem_id}") < 0.5 else HALVES[1]


def is_held_out(problem_id: str) -> bool:
    """Whether a problem is judged on (by the simulated labeler) rather than picked from."""
    return unit_hash(1, f"bon32-held-out:{problem_id}") < HELD_OUT_SHARE


@dataclass(frozen=True)
class Bon32Split:
    pool: list[Bon32Solution]
    held_out: list[Bon32Solution]


def bon32_split(
    corpus: Bon32, half: str, samples: int, problems: int | None, held_out_problems: int | None
) -> Bon32Split:
    """One half's pool (``problems`` problems, their first ``samples`` solutions each) and its
    held-out problems (``held_out_problems``, their first 8 solutions each whatever
    ``samples`` is: the judge does not change with the pool's shape): fixed samples by a
    hash of the problem id, half GSM8K and half MATH-500, the same problems whatever
    ``samples`` is, so that the curves over N share their problems."""
    if half not in HALVES:
        raise ValueError(f"half: one of {', '.join(HALVES)}")
    chosen = [s for s in corpus.solutions if half_of(s.problem_id) == half]
    pool = _problems(
        [s for s in chosen if not is_held_out(s.problem_id) and s.sample < samples], problems
    )
    judged = _problems(
        [s for s in chosen if is_held_out(s.problem_id) and s.sample < JUDGED_SAMPLES],
        held_out_problems,
    )
    return Bon32Split(pool, judged)


def _problems(solutions: list[Bon32Solution], count: int | None) -> list[Bon32Solution]:
    """The solutions of ``count`` problems (all with None), split evenly between the
    datasets, taken in the order of a hash of their ids."""
    if count is None:
        return solutions
    by_dataset: dict[str, list[str]] = {}
    for s in solutions:
        ids = by_dataset.setdefault(s.item.subset, [])
        if not ids or ids[-1] != s.problem_id:
            ids.append(s.problem_id)
    kept: set[str] = set()
    datasets = sorted(by_dataset)
    for index, dataset in enumerate(datasets):
        share = count // len(datasets) + (index < count % len(datasets))
        ordered = sorted(set(by_dataset[dataset]), key=lambda p: unit_hash(2, f"bon32:{p}"))
        kept |= set(ordered[:share])
    return [s for s in solutions if s.problem_id in kept]


def grades_file(data: Path) -> Path:
    """Where the verdicts are kept: beside the feature cache's default folder, outside git."""
    from app.core.config import get_settings

    del data  # one file per checkout: the data folder is read-only
    return get_settings().checkpoint_dir / "bon32-grades.json"


def bon32_items(
    data: Path, half: str, samples: int, problems: int | None, held_out: int | None
) -> list[ProcessBenchItem]:
    """The items of one half's pool, then its held-out problems (what the features cover)."""
    parts = bon32_split(load_bon32(data, grades_file(data)), half, samples, problems, held_out)
    return [s.item for s in [*parts.pool, *parts.held_out]]
