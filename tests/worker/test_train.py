"""Training: the split, fit on a learnable rule, checkpoints, the head mode."""

import itertools
import json
import socket
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch.multiprocessing.spawn import spawn

from tests.worker import (
    ARITHMETIC,
    arithmetic_examples,
    deterministic_torch,
    tiny_args,
    trained_arithmetic_prm,
)
from worker.checkpoint import load_checkpoint, save_checkpoint
from worker.evaluate import auroc
from worker.layout import STEP_TOKEN
from worker.score import score_solutions
from worker.train import Example, Progress, fit, setup, split_by_problem


def test_examples_need_one_rating_per_step() -> None:
    with pytest.raises(ValueError, match="1 labels for 2 steps"):
        Example(1, "p", ["a", "b"], [1])
    with pytest.raises(ValueError, match="-1, 0, 1 or None"):
        Example(1, "p", ["a"], [2])


def test_split_keeps_each_problem_on_one_side() -> None:
    examples = arithmetic_examples(400, seed=1)

    train, held_out = split_by_problem(examples, 0.25, seed=3)

    train_problems = {e.problem_id for e in train}
    held_problems = {e.problem_id for e in held_out}
    assert not train_problems & held_problems
    assert len(train) + len(held_out) == len(examples)
    assert 0.15 < len(held_problems) / 200 < 0.35


def test_split_is_stable_as_labels_arrive() -> None:
    """A held-out problem stays held out when more problems come, so runs compare."""
    _, before = split_by_problem(arithmetic_examples(100, seed=1), 0.2, seed=0)
    _, after = split_by_problem(arithmetic_examples(400, seed=1), 0.2, seed=0)

    assert {e.problem_id for e in before} <= {e.problem_id for e in after}


def test_split_leaves_something_on_each_side() -> None:
    two = [Example(1, "p", ["a"], [1]), Example(2, "q", ["a"], [1])]

    assert [len(side) for side in split_by_problem(two, 0.01, seed=0)] == [1, 1]
    assert [len(side) for side in split_by_problem(two, 0.99, seed=0)] == [1, 1]
    assert split_by_problem(two, 0.0, seed=0) == (two, [])


def _pairwise_auroc(scores: list[float], positives: list[bool]) -> float:
    pairs = [
        (p, n)
        for p, n in itertools.product(range(len(scores)), repeat=2)
        if positives[p] and not positives[n]
    ]
    wins = sum(
        1.0 if scores[p] > scores[n] else 0.5 if scores[p] == scores[n] else 0.0 for p, n in pairs
    )
    return wins / len(pairs)


@pytest.mark.parametrize("seed", range(5))
def test_auroc_counts_pairs_and_halves_ties(seed: int) -> None:
    rng = np.random.default_rng(seed)
    scores = rng.integers(0, 5, size=30).astype(float).tolist()  # many ties
    positives = (rng.random(30) < 0.4).tolist()

    assert auroc(np.array(scores), np.array(positives)) == pytest.approx(
        _pairwise_auroc(scores, positives)
    )


def test_auroc_needs_both_classes() -> None:
    assert auroc(np.array([0.1, 0.9]), np.array([True, True])) is None
    assert auroc(np.array([0.1, 0.9]), np.array([False, True])) == 1.0


@ARITHMETIC
def test_training_learns_the_rule_beyond_the_majority_class() -> None:
    trained = trained_arithmetic_prm()
    figures = trained.metrics

    assert figures["sets"]["held_out_examples"] == len(trained.held_out)
    auroc_figure = figures["step_auroc"]
    assert auroc_figure["status"] == "ok", auroc_figure
    # Chance is 0.5: the whole interval clears it by far.
    assert auroc_figure["value"] > 0.75 and auroc_figure["low"] > 0.6, auroc_figure
    assert auroc_figure["n"] == len({e.problem_id for e in trained.held_out})
    stats = trained.stats
    assert stats.epoch_losses[-1] < stats.epoch_losses[0]
    assert stats.tokens > 0 and stats.tokens_per_second > 0
    assert stats.epochs == trained.args.epochs and not stats.stopped


@ARITHMETIC
def test_checkpoint_round_trip_scores_the_same(tmp_path: Path) -> None:
    trained = trained_arithmetic_prm()
    directory = tmp_path / "run-1"
    items = [(e.problem, e.steps) for e in trained.held_out[:12]]
    metrics: dict[str, Any] = dict(trained.metrics, train=trained.stats)

    save_checkpoint(directory, trained.model, trained.tokenizer, trained.args, metrics, 123)
    model, tokenizer, args, meta = load_checkpoint(directory)

    assert args == trained.args
    assert meta["label_count"] == 123
    assert meta["base_model"] == "tiny" and meta["step_token"] == STEP_TOKEN
    assert {"torch", "transformers", "python"} <= set(meta["versions"])
    saved_metrics = json.loads((directory / "metrics.json").read_text())
    assert saved_metrics["step_auroc"] == trained.metrics["step_auroc"]
    assert saved_metrics["train"]["optimizer_steps"] == trained.stats.optimizer_steps
    assert (directory / "model.safetensors").exists()
    before = score_solutions(trained.model, trained.tokenizer, items, trained.args)
    after = score_solutions(model, tokenizer, items, args)
    assert after == before


@ARITHMETIC
def test_a_checkpoint_replaces_only_a_checkpoint(tmp_path: Path) -> None:
    trained = trained_arithmetic_prm()
    target = tmp_path / "run-2"
    save_checkpoint(target, trained.model, trained.tokenizer, trained.args, {}, 1)
    save_checkpoint(target, trained.model, trained.tokenizer, trained.args, {}, 2)
    assert json.loads((target / "meta.json").read_text())["label_count"] == 2
    assert [p.name for p in tmp_path.iterdir()] == ["run-2"]

    with pytest.raises(FileExistsError):
        save_checkpoint(tmp_path, trained.model, trained.tokenizer, trained.args, {}, 1)


def test_fit_reports_progress_and_stops_when_asked() -> None:
    args = tiny_args(epochs=3, batch_size=4)
    examples = arithmetic_examples(40, seed=2)
    progress: list[Progress] = []
    asked = itertools.count()

    with deterministic_torch():
        model, tokenizer, _ = setup(args)
        stats = fit(
            model,
            tokenizer,
            examples,
            args,
            on_progress=progress.append,
            should_stop=lambda: next(asked) >= 3,
        )

    assert stats.stopped and stats.optimizer_steps == 3 and stats.epochs == 1
    assert [p.step for p in progress] == [1, 2, 3]
    assert progress[0].total_steps == 3 * 10
    assert all(np.isfinite(p.loss) for p in progress)


def test_fit_with_gradient_checkpointing_matches_without() -> None:
    """Recomputing activations changes memory, not the result."""
    examples = arithmetic_examples(16, seed=4)
    losses = []
    for checkpointing in (False, True):
        args = tiny_args(epochs=1, batch_size=8, gradient_checkpointing=checkpointing)
        with deterministic_torch():
            model, tokenizer, _ = setup(args)
            losses.append(fit(model, tokenizer, examples, args).epoch_losses)
    assert losses[0] == pytest.approx(losses[1], rel=1e-4)


def test_fit_with_nothing_to_learn_does_nothing() -> None:
    args = tiny_args(epochs=1)
    model, tokenizer, _ = setup(args)
    before = [p.clone() for p in model.parameters()]

    stats = fit(model, tokenizer, [Example(1, "p", [], [])], args)

    assert stats.optimizer_steps == 0 and stats.examples == 0
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


def _ddp_rank(rank: int, port: int, directory: Path) -> None:
    """One torchrun-like process: fit the tiny PRM on its share, then save from rank 0."""
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        args = tiny_args(epochs=2, batch_size=4)
        with deterministic_torch():
            model, tokenizer, _ = setup(args)
            stats = fit(model, tokenizer, arithmetic_examples(41, seed=1), args, should_stop=bool)
        weights = [torch.zeros_like(model.head.members[0].weight) for _ in range(2)]
        dist.all_gather(weights, model.head.members[0].weight.detach())
        save_checkpoint(directory / "run", model, tokenizer, args, {}, 41)
        report = {
            "steps": stats.optimizer_steps,
            "tokens": stats.tokens,
            "world_size": stats.world_size,
            "replicas_agree": torch.equal(weights[0], weights[1]),
        }
        (directory / f"rank-{rank}.json").write_text(json.dumps(report))
    finally:
        dist.destroy_process_group()


def test_fit_under_distributed_data_parallel(tmp_path: Path) -> None:
    """Two CPU processes (gloo) stand in for torchrun's GPUs: the same code path."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    spawn(_ddp_rank, args=(port, tmp_path), nprocs=2)  # type: ignore[no-untyped-call]

    reports = [json.loads((tmp_path / f"rank-{r}.json").read_text()) for r in range(2)]
    # 41 examples in batches of 4: 11 batches, cycled to 12, 6 per rank and epoch.
    assert [r["steps"] for r in reports] == [12, 12]
    assert reports[0]["tokens"] == reports[1]["tokens"] > 0
    assert all(r["world_size"] == 2 and r["replicas_agree"] for r in reports)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rank-0.json", "rank-1.json", "run"]


@pytest.mark.gpu
def test_fit_on_cuda_in_bf16() -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    args = tiny_args(device="cuda", epochs=2)
    train, held_out = split_by_problem(arithmetic_examples(80, seed=5), 0.25, 0)
    model, tokenizer, device = setup(args)

    stats = fit(model, tokenizer, train, args)
    scores = score_solutions(model, tokenizer, [(e.problem, e.steps) for e in held_out], args)

    assert device.type == "cuda" and next(model.parameters()).is_cuda
    assert all(np.isfinite(stats.epoch_losses))
    assert all(0 < s.score <= 1 for s in scores)
