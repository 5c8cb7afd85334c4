"""PRM800K phase 1's human step ratings as PRM training data (and as a step-AUROC set).

The file is ``prm800k_phase1_stepwise.jsonl.gz`` (../shared/data/SOURCES.md): PRM800K phase 1
regrouped, one line per (labeling session, step), each with the steps accepted so far
(``prefix``) and every candidate the labeler rated for the next step. Every rated candidate
is one step label in its prefix's context: an ``Example`` of the prefix (context only,
unlabeled, as a branch of ``worker/data.py`` is) followed by the candidate and its rating.
The prefix's steps were rated where they were candidates, so each rating is learned once.

A candidate's text is rebuilt as PRM800K has it (``text + "\\n\\n# Answer\\n\\n" + answer``
when the candidate gave an answer): the same text the worker learns from in an export.
Human-written candidates carry no rating and are never labels (they are context where a
later step's prefix holds them). Sessions repeated verbatim in the file give the same
examples: those are kept once. Longer examples come first, so that in ``head`` mode a
chosen candidate's features are read from the next step's sequences.

The ``train`` split (900 problems) trains; the ``test`` split (101 MATH-500 problems, 28 of
them ProcessBench math problems) judges only, and only with the problems a caller leaves
out removed (``leave_out``, problems by ``normalized_problem``, the identity the split and
leak checks use).
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from app.content_keys import normalized_problem
from worker.eval_sets import unit_hash
from worker.split import split_key
from worker.train import Example

FILE_NAME = "prm800k_phase1_stepwise.jsonl.gz"
SAMPLE_SEED = 0
"""``problem_sample``'s seed where a number of training problems is asked for: the worker's
(``STEPLABEL_TRAIN_PHASE1_PROBLEMS``) and the bench's (its split seed, 0 unless changed),
so that both take the same problems."""
Phase1Split = Literal["train", "test"]
RATINGS = (-1, 0, 1)


class Phase1Error(ValueError):
    """The file is not the phase-1 stepwise file: the message names the line."""


@dataclass(frozen=True)
class Candidate:
    text: str
    """As PRM800K has it: with the ``# Answer`` tail where the candidate gave an answer."""
    rating: int | None
    is_human: bool
    chosen: bool
    """The step the labeler went on with: the next line's prefix ends with it."""


@dataclass(frozen=True)
class Phase1Step:
    """One line: a session's step, its accepted prefix and its rated candidates."""

    split: Phase1Split
    session: int
    problem: str
    prefix: tuple[str, ...]
    candidates: tuple[Candidate, ...]


def read_steps(path: Path, split: Phase1Split | None = None) -> Iterator[Phase1Step]:
    """The file's lines (of one ``split``, or all), in file order."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            try:
                step = _step(json.loads(line))
            except (ValueError, KeyError, TypeError) as error:
                raise Phase1Error(f"{path}, line {number}: not a phase-1 step ({error})") from None
            if split is None or step.split == split:
                yield step


def _step(record: dict[str, object]) -> Phase1Step:
    split = record["split"]
    if split not in ("train", "test"):
        raise ValueError(f"split {split!r}")
    problem, prefix, candidates = record["problem"], record["prefix"], record["candidates"]
    if not isinstance(problem, str) or not isinstance(prefix, list):
        raise ValueError("problem or prefix")
    if not isinstance(candidates, list) or not candidates:
        raise ValueError("no candidates")
    return Phase1Step(
        split,
        int(str(record["session"])),
        problem,
        tuple(str(step) for step in prefix),
        tuple(_candidate(c) for c in candidates),
    )


def _candidate(record: dict[str, object]) -> Candidate:
    text, answer, rating = record["text"], record["answer"], record["rating"]
    if not isinstance(text, str) or (answer is not None and not isinstance(answer, str)):
        raise ValueError("candidate text or answer")
    if rating is not None and rating not in RATINGS:
        raise ValueError(f"rating {rating!r}")
    full = text if answer is None else f"{text}\n\n# Answer\n\n{answer}"
    return Candidate(
        full,
        None if rating is None else int(str(rating)),
        bool(record["is_human"]),
        bool(record.get("chosen")),
    )


def step_examples(steps: Sequence[Phase1Step], leave_out: Collection[str] = ()) -> list[Example]:
    """Every rated candidate as one labeled step after its unlabeled prefix, once each;
    the steps whose problem's ``normalized_problem`` is in ``leave_out`` left out."""
    seen: set[tuple[str, tuple[str, ...], str, int]] = set()
    examples = []
    for step in steps:
        if normalized_problem(step.problem) in leave_out:
            continue
        group = split_key(step.problem)
        for candidate in step.candidates:
            if candidate.rating is None:
                continue
            key = (step.problem, step.prefix, candidate.text, candidate.rating)
            if key in seen:
                continue
            seen.add(key)
            context: list[int | None] = [None] * len(step.prefix)
            examples.append(
                Example(
                    group,
                    step.problem,
                    [*step.prefix, candidate.text],
                    [*context, candidate.rating],
                )
            )
    # Longest first: a chosen candidate's example is then a step prefix of the next step's
    # examples, computed before it, and the feature cache reads it from theirs with no
    # forward pass of its own (worker/features.py): about a third of the sequences.
    examples.sort(key=lambda example: -len(example.steps))
    return examples


def training_examples(path: Path, leave_out: Collection[str] = ()) -> list[Example]:
    """The ``train`` split's step labels (never a ``test`` line), ``leave_out`` left out."""
    return step_examples(list(read_steps(path, "train")), leave_out)


def training_sample(path: Path, problems: int | None) -> list[Example]:
    """The ``train`` split's step labels of ``problems`` of its problems (all with None),
    the same ones every time (``problem_sample`` with ``SAMPLE_SEED``)."""
    return problem_sample(training_examples(path), problems, SAMPLE_SEED)


def judging_examples(path: Path, leave_out: Collection[str]) -> list[Example]:
    """The ``test`` split's step labels, to judge with (never to train on), the
    ``leave_out`` problems (those a judged model may have trained or calibrated on, e.g.
    ProcessBench's) left out."""
    return step_examples(list(read_steps(path, "test")), leave_out)


def problem_sample(examples: Sequence[Example], problems: int | None, seed: int) -> list[Example]:
    """The examples of the same ``problems`` problems every time (all with None): those
    whose hash of (``seed``, normalized text) is lowest."""
    if problems is None:
        return list(examples)
    keys = sorted(
        {normalized_problem(e.problem) for e in examples}, key=lambda k: unit_hash(seed, k)
    )
    chosen = set(keys[:problems])
    return [e for e in examples if normalized_problem(e.problem) in chosen]
