"""The held-out split: its own seed, labels no PRM chose, what a checkpoint records."""

import json
from pathlib import Path

from app.config import Settings
from worker.split import (
    LabelExamples,
    Split,
    TrainedOn,
    load_trained_on,
    problem_hash,
    split_labels,
)
from worker.train import Example


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
