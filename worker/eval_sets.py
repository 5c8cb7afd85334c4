"""The fixed evaluation sets: ProcessBench and best-of-N samples, read from a directory.

Training never sees them: they are files, not labels in the database. The directory is
``STEPLABEL_EVAL_DIR``; what is missing from it is simply not evaluated.

- ProcessBench (``processbench_{gsm8k,math,olympiadbench,omnimath}.jsonl``): solutions by a
  dozen generators with expert first-error labels. Split by problem, with a fixed seed,
  into a calibration part (where the first-error threshold is chosen) and a test part
  (where F1 is reported); a fixed sample of each may stand in for the whole on a CPU.
- Best-of-N (``qwen25math_math_cot_100_samples8.jsonl``): 100 MATH problems with 8
  independent samples each, graded. Steps are the responses' paragraphs.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

PROCESSBENCH_SUBSETS = ("gsm8k", "math", "olympiadbench", "omnimath")
BEST_OF_N_FILE = "qwen25math_math_cot_100_samples8.jsonl"
CALIBRATION_SHARE = 0.25
"""Share of ProcessBench problems kept for choosing the threshold."""

_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")


@dataclass(frozen=True)
class ProcessBenchItem:
    subset: str
    id: str
    problem: str
    steps: list[str]
    label: int
    """Index of the first wrong step; -1 when every step is right."""
    final_answer_correct: bool

    @property
    def labels(self) -> list[int | None]:
        """Step labels as PRM800K would give them: +1 before the first error, -1 on it, and
        nothing after it (labeling stops there)."""
        if self.label < 0:
            return [1] * len(self.steps)
        return [1] * self.label + [-1] + [None] * (len(self.steps) - self.label - 1)


GroupAnswers = Callable[[Sequence[str | None]], list[int | None]]
"""Numbers answers so that answers the grader counts as equal share a number
(``app.grading.answer_groups``); None for a missing answer."""


@dataclass(frozen=True)
class SampledProblem:
    """A problem and N independent samples of it, each with its answer and grade."""

    problem: str
    samples: list[list[str]]
    """Each sample's steps."""
    answers: list[str | None]
    correct: list[bool]
    answer_groups: list[int | None] | None = None
    """``answers`` numbered by the grader (``with_answer_groups``), for majority votes."""

    def groups(self) -> list[int | None]:
        if self.answer_groups is None:
            raise ValueError("answers are not grouped yet: see with_answer_groups")
        return self.answer_groups


def with_answer_groups(
    problems: Sequence[SampledProblem], group_answers: GroupAnswers
) -> list[SampledProblem]:
    """The problems with their answers numbered by the grader."""
    return [replace(p, answer_groups=group_answers(p.answers)) for p in problems]


def unit_hash(seed: int, key: str) -> float:
    """A stable number in [0, 1) for ``key``: splits and samples that never move."""
    digest = hashlib.sha256(f"{seed}:{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def load_processbench(
    directory: Path, subsets: Sequence[str] = PROCESSBENCH_SUBSETS
) -> list[ProcessBenchItem]:
    """Every ProcessBench item of the subsets whose file is in ``directory``."""
    items = []
    for subset in subsets:
        path = directory / f"processbench_{subset}.jsonl"
        if not path.is_file():
            continue
        with path.open(encoding="utf-8") as lines:
            for line in lines:
                record = json.loads(line)
                items.append(
                    ProcessBenchItem(
                        subset=subset,
                        id=str(record["id"]),
                        problem=record["problem"],
                        steps=list(record["steps"]),
                        label=int(record["label"]),
                        final_answer_correct=bool(record["final_answer_correct"]),
                    )
                )
    return items


def split_by_problem_hash(
    items: Sequence[ProcessBenchItem],
    share: float,
    seed: int,
    problem: Callable[[ProcessBenchItem], str] = lambda item: item.problem,
) -> tuple[list[ProcessBenchItem], list[ProcessBenchItem]]:
    """(the items of a ``share`` of the problems, the rest), by a hash of the problem text
    (or of what ``problem`` names an item's problem by)."""
    inside = [i for i in items if unit_hash(seed, problem(i)) < share]
    outside = [i for i in items if unit_hash(seed, problem(i)) >= share]
    return inside, outside


def fixed_sample(
    items: Sequence[ProcessBenchItem], per_subset: int | None, seed: int
) -> list[ProcessBenchItem]:
    """The same ``per_subset`` items of each subset every time (all with None)."""
    if per_subset is None:
        return list(items)
    chosen = []
    for subset in dict.fromkeys(i.subset for i in items):
        members = sorted(
            (i for i in items if i.subset == subset), key=lambda i: unit_hash(seed, i.id)
        )
        chosen += members[:per_subset]
    return chosen


@dataclass(frozen=True)
class ProcessBenchSplit:
    calibration: list[ProcessBenchItem]
    test: list[ProcessBenchItem]


def processbench_split(directory: Path, per_subset: int | None, seed: int = 0) -> ProcessBenchSplit:
    """ProcessBench's calibration and test parts, each a fixed sample of ``per_subset``
    items per subset (all with None)."""
    calibration, test = split_by_problem_hash(load_processbench(directory), CALIBRATION_SHARE, seed)
    return ProcessBenchSplit(
        fixed_sample(calibration, per_subset, seed), fixed_sample(test, per_subset, seed)
    )


def file_sets(
    directory: Path | None, per_subset: int, problems: int
) -> tuple[ProcessBenchSplit | None, list[SampledProblem]]:
    """The sets of the files in ``directory`` as runs read them: ProcessBench's split and the
    best-of-N samples (answers not grouped yet). 0 for ``per_subset`` or ``problems`` means
    all of them; no directory, no sets."""
    if directory is None:
        return None, []
    return processbench_split(directory, per_subset or None), load_best_of_n(
        directory, problems or None
    )


def processbench_missing(directory: Path | None) -> str | None:
    """Why a run has no ProcessBench figures, naming the setting; None when it has files."""
    if directory is None:
        return "not computed: STEPLABEL_EVAL_DIR is not set (the folder of processbench_*.jsonl)"
    if not any((directory / f"processbench_{s}.jsonl").is_file() for s in PROCESSBENCH_SUBSETS):
        return f"not computed: no processbench_*.jsonl in {directory} (STEPLABEL_EVAL_DIR)"
    return None


def paragraphs(text: str) -> list[str]:
    """A response's steps: its paragraphs (a display formula stays in its paragraph)."""
    return [p.strip() for p in _PARAGRAPH_BREAK.split(text) if p.strip()]


def load_best_of_n(directory: Path, problems: int | None, seed: int = 0) -> list[SampledProblem]:
    """The sampled problems of ``BEST_OF_N_FILE``: a fixed sample of ``problems`` of them."""
    path = directory / BEST_OF_N_FILE
    if not path.is_file():
        return []
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    records.sort(key=lambda r: unit_hash(seed, str(r["idx"])))
    return [
        SampledProblem(
            problem=r["question"],
            samples=[paragraphs(response) for response in r["response"]],
            answers=[None if p is None else str(p) for p in r["pred"]],
            correct=[bool(c) for c in r["score"]],
        )
        for r in records[:problems]
    ]
