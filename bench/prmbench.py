"""PRMBench's PRM800K part as step-labeled solutions: many labeled variants per problem.

``../shared/data/prmbench_prm800k_test_p1p2_classified.jsonl`` (PRMBench, Song et al. 2025)
holds 357 correct PRM800K test trajectories, each rewritten by GPT-4o with injected errors in
eight ways (circular logic, redundancy, a counterfactual step, a missing condition, ...): the
paper's regime of many samples per problem, where ProcessBench has one. A problem here is a
trajectory (``idx``); its solutions are the original (every step right) and its variants,
whose ``error_steps`` (1-based) are the wrong ones. Labels are written as PRM800K gives them:
+1 before the first wrong step, -1 on it, nothing after it (labeling stops there).

A variant's final answer is graded by whether the problem's ground truth (from MATH-500,
``math500_test.jsonl``: PRM800K's test problems are MATH-500's) appears in its last two
steps, both with typesetting removed: the variants' answers are free text ("so the sum is
2107"), rarely a boxed or "# Answer" one. The originals are right by construction, yet 16%
of them fail this check (their answer sits earlier), so some variants counted wrong are
right. Many variants keep the right answer with a wrong step (a circular argument that
assumes the result): the paper's "convincing wrong answers" rule sees only answers.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from app.content_keys import normalized_problem
from worker.eval_sets import ProcessBenchItem, unit_hash

PRMBENCH_FILE = "prmbench_prm800k_test_p1p2_classified.jsonl"
SUBSET = "prmbench"

MATH500_FILE = "math500_test.jsonl"


def without_numbers(steps: Sequence[str]) -> list[str]:
    """The steps without a leading "1. ", "2. ", ... where every step is numbered in turn
    (PRMBench numbers some trajectories; PRM800K's steps carry no numbers)."""
    prefixes = [f"{k}. " for k in range(1, len(steps) + 1)]
    if not all(step.startswith(prefix) for step, prefix in zip(steps, prefixes, strict=True)):
        return list(steps)
    return [step[len(prefix) :] for step, prefix in zip(steps, prefixes, strict=True)]


def _typeset_free(text: str) -> str:
    return normalized_problem(text.replace("dfrac", "frac").replace("tfrac", "frac"))


def states_answer(steps: Sequence[str], answer: str) -> bool:
    """Whether the last two steps state ``answer``, typesetting aside."""
    return _typeset_free(answer) in _typeset_free(" ".join(steps[-2:]))


def load_prmbench(directory: Path) -> list[ProcessBenchItem]:
    """Every original trajectory (once) and its variants after it, in file order; the 4
    variants whose first error step is past their last step are left out."""
    path = directory / PRMBENCH_FILE
    if not path.is_file():
        return []
    truths = {
        normalized_problem(r["problem"]): r["answer"]
        for r in map(json.loads, (directory / MATH500_FILE).read_text().splitlines())
    }
    trajectories: dict[str, list[ProcessBenchItem]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        truth = truths[normalized_problem(record["question"])]
        items = trajectories.setdefault(record["idx"], [])
        if not items:
            steps = without_numbers(record["original_process"])
            original = f"{record['idx']}:original"
            items.append(
                ProcessBenchItem(SUBSET, original, record["original_question"], steps, -1, True)
            )
        steps = without_numbers(record["modified_process"])
        if not 0 < min(record["error_steps"]) <= len(steps):
            continue  # 4 variants name an error step past their last one: no label to give
        items.append(
            ProcessBenchItem(
                SUBSET,
                f"{record['idx']}:{record['classification']}",
                record["modified_question"],
                steps,
                min(record["error_steps"]) - 1,
                states_answer(steps, truth),
            )
        )
    return [item for items in trajectories.values() for item in items]


def problem_group(item: ProcessBenchItem) -> str:
    """The trajectory a PRMBench item belongs to (its problem, for splits and quotas)."""
    return item.id.split(":")[0]


def sample_trajectories(
    items: Sequence[ProcessBenchItem], count: int | None
) -> list[ProcessBenchItem]:
    """The items of a fixed sample of ``count`` trajectories (all with None), by a hash of
    their ids that no split shares: a sample by the split's own hash would take the
    trajectories of one side only."""
    if count is None:
        return list(items)
    groups = sorted({problem_group(i) for i in items}, key=lambda g: unit_hash(0, f"sample:{g}"))
    kept = set(groups[:count])
    return [i for i in items if problem_group(i) in kept]


def prmbench_without(
    data: Path, problems: set[str], trajectories: int | None
) -> tuple[list[ProcessBenchItem], int]:
    """PRMBench without the trajectories on ``problems`` (normalized texts), and how many
    those were; a fixed sample of ``trajectories`` of the rest."""
    items, dropped = drop_problems(load_prmbench(data), problems)
    return sample_trajectories(items, trajectories), dropped


def drop_problems(
    items: Sequence[ProcessBenchItem], problems: set[str]
) -> tuple[list[ProcessBenchItem], int]:
    """The items whose trajectory's problem (normalized text, original or variant) is not
    among ``problems``; and how many trajectories were dropped."""
    texts: dict[str, set[str]] = {}
    for item in items:
        texts.setdefault(problem_group(item), set()).add(normalized_problem(item.problem))
    dropped = {t for t, known in texts.items() if known & problems}
    return [i for i in items if problem_group(i) not in dropped], len(dropped)
