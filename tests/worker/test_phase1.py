"""PRM800K phase 1's human ratings as training data, on the real file's lines
(shared/data/prm800k_phase1_stepwise.jsonl.gz) and the real PRM800K records they came from
(shared/data/prm800k_raw_samples.jsonl, lines 1, 3 and 4: phase 1)."""

from __future__ import annotations

import gzip
import json
from itertools import islice
from pathlib import Path

import pytest

from app.content_keys import normalized_problem
from bench import SHARED_DATA
from worker.phase1 import (
    FILE_NAME,
    SAMPLE_SEED,
    Phase1Error,
    judging_examples,
    problem_sample,
    read_steps,
    step_examples,
    training_examples,
    training_sample,
)
from worker.split import split_key

PHASE1 = SHARED_DATA / FILE_NAME
RAW = SHARED_DATA / "prm800k_raw_samples.jsonl"


@pytest.fixture(scope="module")
def phase1() -> Path:
    if not PHASE1.exists():
        pytest.skip(f"the phase-1 file is not at {PHASE1}")
    return PHASE1


def test_each_rated_candidate_is_one_label_after_its_unlabeled_prefix(phase1: Path) -> None:
    steps = list(islice(read_steps(phase1, "train"), 40))

    examples = step_examples(steps)

    rated = [(s, c) for s in steps for c in s.candidates if c.rating is not None]
    # The file repeats some sessions verbatim: each of their labels is kept once.
    once = list({(s.problem, s.prefix, c.text, c.rating): (s, c) for s, c in rated}.values())
    # Longest first (a stable sort): see the next test.
    once.sort(key=lambda pair: -len(pair[0].prefix))
    assert len(rated) > len(examples) == len(once) > 40
    for example, (step, candidate) in zip(examples, once, strict=True):
        assert example.steps == [*step.prefix, candidate.text]
        assert example.labels == [None] * len(step.prefix) + [candidate.rating]
        assert example.problem_id == split_key(step.problem)


def test_a_chosen_candidates_features_come_from_the_next_steps_sequences(
    phase1: Path, tmp_path: Path
) -> None:
    from tests.worker import tiny_args
    from worker.features import cache_for
    from worker.score import fill_cache
    from worker.train import setup

    steps = list(islice(read_steps(phase1, "train"), 12))
    examples = step_examples(steps)
    items = [(e.problem, e.steps) for e in examples]
    # Byte tokens: room for every sequence whole (a cut one has keys of its own).
    args = tiny_args(mode="head", max_length=4096)
    model, tokenizer, _ = setup(args)
    cache = cache_for(model, args, tmp_path)
    assert cache is not None

    done = fill_cache(model, tokenizer, items, args, cache, chunk=1)

    def extended(short: list[str], problem: str) -> bool:
        return any(
            e.problem == problem and len(e.steps) > len(short) and e.steps[: len(short)] == short
            for e in examples
        )

    # A chosen candidate's example is the next step's prefix: only the others are computed.
    whole = [e for e in examples if not extended(e.steps, e.problem)]
    assert done.sequences == len(whole) < len(examples) - 3
    assert sum(c.chosen for s in steps for c in s.candidates) >= len(examples) - len(whole)
    assert fill_cache(model, tokenizer, items, args, cache).sequences == 0


def test_the_ratings_are_those_of_the_prm800k_records_they_came_from(phase1: Path) -> None:
    if not RAW.exists():
        pytest.skip(f"the real PRM800K lines are not at {RAW}")
    records = [json.loads(line) for line in RAW.read_text().splitlines()]
    phase1_records = [r for r in records if r["generation"] is None]
    problems = {r["question"]["problem"] for r in phase1_records}
    steps = [s for s in read_steps(phase1) if s.problem in problems]
    labels = {(e.problem, e.steps[-1], e.labels[-1]) for e in step_examples(steps)}

    for record in phase1_records:
        problem = record["question"]["problem"]
        rated = {
            (problem, completion["text"], completion["rating"])
            for step in record["label"]["steps"]
            for completion in step["completions"] or []
            if completion["rating"] is not None
        }
        # The "# Answer" tail is rebuilt onto the text, as the record has it.
        assert rated and rated <= labels


def test_the_test_split_leaves_out_the_problems_asked(phase1: Path) -> None:
    test_steps = list(read_steps(phase1, "test"))
    assert {s.split for s in test_steps} == {"test"}
    left_out = normalized_problem(test_steps[0].problem)

    examples = judging_examples(phase1, {left_out})

    assert examples and all(normalized_problem(e.problem) != left_out for e in examples)
    assert len({e.problem for e in examples}) < len({s.problem for s in test_steps})


def test_a_session_repeated_verbatim_gives_its_labels_once(phase1: Path) -> None:
    step = next(read_steps(phase1, "train"))
    assert len(step_examples([step, step])) == len(step_examples([step])) >= 1


def test_a_line_that_is_no_phase1_step_is_named(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl.gz"
    good = {
        "split": "train",
        "session": 0,
        "problem": "1+1?",
        "prefix": [],
        "candidates": [{"text": "2", "rating": 1, "is_human": False, "answer": None}],
    }
    bad = good | {"candidates": [{"text": "2", "rating": 7, "is_human": False, "answer": None}]}
    with gzip.open(path, "wt") as out:
        out.write(json.dumps(good) + "\n" + json.dumps(bad) + "\n")

    with pytest.raises(Phase1Error, match=r"bad.jsonl.gz, line 2: not a phase-1 step \(rating 7\)"):
        list(read_steps(path))


def test_a_training_sample_is_the_same_problems_every_time(phase1: Path, tmp_path: Path) -> None:
    """STEPLABEL_TRAIN_PHASE1_PROBLEMS: the worker takes the problems the bench takes."""
    few = tmp_path / FILE_NAME
    with gzip.open(phase1, "rt") as lines, gzip.open(few, "wt") as out:
        out.writelines(islice(lines, 40))  # the file's first 5 problems
    everything = training_examples(few)

    two = training_sample(few, 2)

    problems = {normalized_problem(e.problem) for e in two}
    assert len(problems) == 2 < len({normalized_problem(e.problem) for e in everything})
    assert two == problem_sample(everything, 2, SAMPLE_SEED) == training_sample(few, 2)
    assert two == [e for e in everything if normalized_problem(e.problem) in problems]
    assert training_sample(few, None) == everything
