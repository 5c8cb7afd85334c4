"""The held-out split: its own seed, labels no PRM chose, what a checkpoint records."""

import json
from pathlib import Path

from app.core.config import Settings
from worker.assess import EvalSets
from worker.split import (
    LabelExamples,
    Split,
    TrainedOn,
    load_trained_on,
    problem_hash,
    split_key,
    split_labels,
    with_extra_training,
)
from worker.train import Example, split_by_problem


def label(problem: str, *, chosen: bool = False) -> LabelExamples:
    problem_id = int(problem.split()[-1])
    return LabelExamples(problem_id, problem, [Example(problem_id, problem, ["x"], [1])], chosen)


LABELS = [label(f"Problem {i}") for i in range(200)]


def held_out(settings: Settings) -> set[str]:
    return {e.problem for e in split_labels(LABELS, Split.of(settings)).held_out}


def test_a_new_training_seed_leaves_the_held_out_problems_where_they_are() -> None:
    assert held_out(Settings(train_seed=7)) == held_out(Settings(train_seed=0))
    assert Split.of(Settings(train_seed=7)).identity == Split.of(Settings()).identity
    # The split's own seed and the held-out share do move it, and say so.
    assert held_out(Settings(train_split_seed=7)) != held_out(Settings())
    assert Split.of(Settings(train_split_seed=7)).identity != Split.of(Settings()).identity
    assert Split.of(Settings(train_held_out_fraction=0.3)).identity != Split.of(Settings()).identity


def test_held_out_figures_come_from_labels_no_prm_chose() -> None:
    split = Split(0, 0.2)
    plain = split_labels(LABELS, split)
    held = {e.problem_id for e in plain.held_out}
    chosen = [label(f"Problem {i}", chosen=True) for i in range(200)]

    parts = split_labels(LABELS + chosen, split)

    assert [e.problem for e in parts.held_out] == [e.problem for e in plain.held_out]
    assert parts.held_out_labels == len(held) and parts.chosen_left_out == len(held)
    # A PRM's picks on training problems are trained on.
    assert parts.trained_labels == 2 * (200 - len(held)) == len(parts.train)
    assert parts.trained_problems == {
        problem_hash(f"Problem {i}") for i in range(200) if i not in held
    }


def test_a_checkpoint_records_its_split_and_what_it_trained_on(tmp_path: Path) -> None:
    trained = TrainedOn(Split(0, 0.2).identity, frozenset({problem_hash("What is $1+1$?")}))
    metrics = {"labels": 3, "trained_on": trained.record()}
    (tmp_path / "metrics.json").write_text(json.dumps(metrics))

    assert load_trained_on(tmp_path) == trained
    assert problem_hash("what is 1 + 1?") in trained.problems  # the same problem, retypeset

    # A checkpoint from before splits were recorded, or none at all: unknown.
    (tmp_path / "metrics.json").write_text(json.dumps({"labels": 3}))
    assert load_trained_on(tmp_path) is None
    assert load_trained_on(tmp_path / "missing") is None


def test_extra_labels_train_except_on_held_out_problems() -> None:
    split = Split(0, 0.2)
    parts = split_labels(LABELS, split)
    held = {e.problem_id for e in parts.held_out}
    # Outside labels on the team's problems (held out or not) and on problems of their own.
    extra = [Example(i, f"Problem {i}", ["y"], [-1]) for i in range(100, 400)]

    more = with_extra_training(parts, extra, split)

    added = more.train[len(parts.train) :]
    assert added and not {e.problem_id for e in added} & held
    assert more.held_out == parts.held_out and more.trained_labels == parts.trained_labels
    assert {problem_hash(e.problem) for e in added} <= more.trained_problems
    # A problem of their own that the split's hash holds out is not trained on either.
    assert len(added) < len([e for e in extra if e.problem_id not in held])


TEXTS = [f"What is ${i} + {i * 7 % 13}$?" for i in range(40)]


def example(text: str) -> Example:
    return Example(split_key(text), text, ["s"], [1])


def test_the_split_of_existing_data_does_not_move() -> None:
    """Pinned: every stored run's held-out set and BENCHMARKS.md's figures depend on which
    side a problem falls, and every checkpoint's record on ``problem_hash``."""
    assert [split_key(t) for t in TEXTS[:3]] == [676859861, 3752197751, 2605381151]
    assert problem_hash(TEXTS[0]) == "0b2205a35bfed76e"
    _, held = split_by_problem([example(t) for t in TEXTS], 0.2, 0)
    assert sorted(TEXTS.index(e.problem) for e in held) == [9, 12, 21, 24, 31, 32, 34, 39]


def test_the_split_and_the_leak_checks_agree() -> None:
    """Both read a problem by its normalized text: a retypeset copy falls on its problem's
    side, nothing held out counts as trained on, and a copy of a trained problem is left out
    of evaluation."""
    retypeset = [t.replace("$", "").upper() for t in TEXTS]
    labels = [LabelExamples(split_key(t), t, [example(t)], False) for t in TEXTS + retypeset]

    parts = split_labels(labels, Split(0, 0.2))

    held = {e.problem for e in parts.held_out}
    assert held and all((t in held) == (r in held) for t, r in zip(TEXTS, retypeset, strict=True))
    kept, left_out = EvalSets(held_out=parts.held_out).without(parts.trained_problems, "x")
    assert kept.held_out == parts.held_out and left_out == []
    copies = EvalSets(held_out=[example(t) for t in retypeset])
    kept, _ = copies.without(parts.trained_problems, "a problem this run's PRM trained on")
    assert {e.problem for e in kept.held_out} == held & set(retypeset)
