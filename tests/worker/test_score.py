"""Scoring: order kept through length batching, the product rule, windows, the trained PRM."""

import math
from typing import Any

import numpy as np
import pytest
import torch
from transformers import PreTrainedTokenizerBase

from tests.worker import ARITHMETIC, PROBLEM, equation, tiny_args, trained_arithmetic_prm
from worker import score as scoring
from worker.build import build_tiny
from worker.device import GPU_SCORE_BATCH_SIZE, score_batch_size_on
from worker.layout import encode
from worker.model import PRM
from worker.score import (
    _bf16_weights,
    _step_vectors,
    _windows,
    score_solutions,
    score_with_throughput,
    step_probabilities,
)

ITEMS = [
    ("Short.", ["1+1=2"]),
    ("A much longer problem statement, to make this sequence long. " * 3, ["a", "b", "c"]),
    ("Medium problem.", ["2+2=4", "Let us go on.", "4+4=9"]),
    ("p", []),
    ("Another one.", ["x" * 40, "y", "z" * 10, "w"]),
    ("Short.", ["1+1=2"]),
]


Untrained = tuple[PRM, PreTrainedTokenizerBase]


@pytest.fixture(scope="module")
def untrained() -> Untrained:
    return build_tiny(seed=3)


def test_scores_come_back_in_the_callers_order(untrained: Untrained) -> None:
    model, tokenizer = untrained
    args = tiny_args(score_batch_size=2)

    together = score_solutions(model, tokenizer, ITEMS, args)
    alone = [score_solutions(model, tokenizer, [item], args)[0] for item in ITEMS]

    assert [len(s.step_scores) for s in together] == [len(steps) for _, steps in ITEMS]
    for batched, single in zip(together, alone, strict=True):
        assert batched.step_scores == pytest.approx(single.step_scores, abs=1e-6)
    assert together[0].step_scores == pytest.approx(together[-1].step_scores, abs=1e-6)


def test_a_cpu_scores_one_sequence_at_a_time_by_default(
    untrained: Untrained, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, tokenizer = untrained
    batched, _ = step_probabilities(model, tokenizer, ITEMS, tiny_args(score_batch_size=4))
    sizes: list[int] = []
    real_read_steps = model.read_steps

    def counting(input_ids: torch.Tensor, *args: Any) -> torch.Tensor:
        sizes.append(input_ids.shape[0])
        return real_read_steps(input_ids, *args)

    monkeypatch.setattr(model, "read_steps", counting)
    default, _ = step_probabilities(model, tokenizer, ITEMS, tiny_args())

    # Three solutions alone; the two identical ones share their prefix's key/value cache
    # (its pass, then each one's last step); the solution with no steps has no window.
    assert sizes == [1] * 6
    for a, b in zip(batched, default, strict=True):
        assert a.shape == b.shape and np.allclose(a, b, atol=1e-6)


def test_the_score_batch_size_is_the_devices_unless_set() -> None:
    assert score_batch_size_on(tiny_args(), torch.device("cpu")) == 1
    assert score_batch_size_on(tiny_args(), torch.device("cuda")) == GPU_SCORE_BATCH_SIZE
    assert score_batch_size_on(tiny_args(score_batch_size=8), torch.device("cpu")) == 8
    assert score_batch_size_on(tiny_args(score_batch_size=8), torch.device("cuda")) == 8
    with pytest.raises(ValueError, match="score_batch_size"):
        tiny_args(score_batch_size=0)


def test_scoring_in_chunks_changes_nothing(
    untrained: Untrained, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, tokenizer = untrained
    args = tiny_args(score_batch_size=2)
    whole, whole_throughput = step_probabilities(model, tokenizer, ITEMS, args)

    monkeypatch.setattr(scoring, "SOLUTIONS_PER_CHUNK", 2)
    chunked, chunked_throughput = step_probabilities(model, tokenizer, ITEMS, args)

    assert len(chunked) == len(whole) == len(ITEMS)
    for a, b in zip(whole, chunked, strict=True):
        assert a.shape == b.shape and np.allclose(a, b, atol=1e-6)
    assert chunked_throughput.sequences == whole_throughput.sequences
    # The two identical solutions share their prefix's pass only within one chunk.
    assert chunked_throughput.tokens > whole_throughput.tokens


def test_solution_score_is_the_product_of_step_scores(untrained: Untrained) -> None:
    model, tokenizer = untrained
    args = tiny_args()

    scores = score_solutions(model, tokenizer, ITEMS, args)
    probabilities, _ = step_probabilities(model, tokenizer, ITEMS, args)

    for score, rows in zip(scores, probabilities, strict=True):
        assert 0 < score.score <= 1
        assert all(0 < s <= 1 for s in score.step_scores)
        assert score.step_scores == pytest.approx([row[1] + row[2] for row in rows])
        assert score.score == pytest.approx(math.prod(score.step_scores))
        assert score.min_step == min(score.step_scores, default=1.0)
    assert scores[3].score == 1.0 and scores[3].step_scores == []


def test_long_solutions_are_scored_in_windows(untrained: Untrained) -> None:
    """A solution longer than max_length still gets a score for every step."""
    model, tokenizer = untrained
    steps = [f"step {i}: " + "z" * 15 for i in range(12)]
    args = tiny_args(max_length=64)

    probabilities, throughput = step_probabilities(model, tokenizer, [("p", steps)], args)

    assert probabilities[0].shape == (12, 3)
    assert probabilities[0].sum(axis=1) == pytest.approx([1.0] * 12)
    assert throughput.sequences > 1 and throughput.solutions == 1
    # Steps cut from the first window score exactly as the solution that ends before them.
    first_kept = encode(tokenizer, "p", steps, None, args.max_length).first_step
    assert 0 < first_kept < 12
    prefix, _ = step_probabilities(model, tokenizer, [("p", steps[:first_kept])], args)
    assert probabilities[0][:first_kept] == pytest.approx(prefix[0], abs=1e-6)


def test_windows_are_the_prefixes_encoded_alone(untrained: Untrained) -> None:
    """Windows are laid out from each solution's pieces, tokenized once: the same sequences
    as encoding each prefix on its own, named by their solution."""
    _, tokenizer = untrained
    long_steps = [f"step {i}: " + "z" * 15 for i in range(12)]
    items = [*ITEMS, ("p", long_steps)]

    windows = _windows(tokenizer, items, 64, first_item=10)

    expected = []
    for index, (problem, steps) in enumerate(items, start=10):
        end = len(steps)
        while end > 0:
            encoded = encode(tokenizer, problem, steps[:end], None, 64)
            expected.append((index, encoded))
            end = encoded.first_step
    assert [(w.item, w.encoded) for w in windows] == expected
    assert sum(w.item == 10 + len(ITEMS) for w in windows) > 1, "the long one needs windows"


def test_throughput_is_measured(untrained: Untrained) -> None:
    model, tokenizer = untrained

    scores, throughput = score_with_throughput(model, tokenizer, ITEMS, tiny_args())

    assert len(scores) == throughput.solutions == len(ITEMS)
    assert throughput.tokens > 0 and throughput.seconds > 0
    assert throughput.tokens_per_second > 0 and throughput.solutions_per_second > 0


def test_scoring_leaves_the_model_in_its_mode(untrained: Untrained) -> None:
    model, tokenizer = untrained
    model.train()
    score_solutions(model, tokenizer, ITEMS[:2], tiny_args())
    assert model.training
    model.eval()


@ARITHMETIC
def test_a_false_step_scores_lower_after_training() -> None:
    trained = trained_arithmetic_prm()
    pairs = [(2, 3), (1, 4), (6, 2), (0, 7), (3, 3), (4, 5)]
    prefix = [equation(1, 1, 2), "Let us go on."]

    def solutions(wrong: bool) -> list[tuple[str, list[str]]]:
        return [(PROBLEM, [*prefix, equation(a, b, (a + b + 4 * wrong) % 10)]) for a, b in pairs]

    true_scores = score_solutions(trained.model, trained.tokenizer, solutions(False), trained.args)
    false_scores = score_solutions(trained.model, trained.tokenizer, solutions(True), trained.args)

    lower = [f.score < t.score for f, t in zip(false_scores, true_scores, strict=True)]
    assert sum(lower) >= len(pairs) - 1, (true_scores, false_scores)
    assert sum(f.score for f in false_scores) < 0.6 * sum(t.score for t in true_scores)
    # The shared prefix scores the same: only the last step differs.
    assert false_scores[0].step_scores[:2] == pytest.approx(true_scores[0].step_scores[:2])


def test_bf16_weight_copies_score_alike_and_leave_the_model_alone(untrained: Untrained) -> None:
    # What scoring in bf16 does on CUDA (uses_bf16 is CUDA-only), run here on the CPU.
    model, tokenizer = untrained
    before = {name: p.clone() for name, p in model.named_parameters()}
    windows = _windows(tokenizer, ITEMS, 2048)

    with torch.inference_mode():
        vectors = _step_vectors(model, None, tokenizer, windows)
        halved_vectors = _step_vectors(model, _bf16_weights(model), tokenizer, windows)
        exact, halved = model.head(vectors), model.head(halved_vectors.float())

    assert halved_vectors.dtype == torch.bfloat16 and vectors.dtype == torch.float32
    assert len(exact) == sum(len(steps) for _, steps in ITEMS)
    probabilities = [torch.softmax(t.double(), dim=-1) for t in (exact, halved)]
    assert torch.allclose(*probabilities, atol=0.05)
    for name, p in model.named_parameters():
        assert p.dtype == torch.float32 and torch.equal(p, before[name]), name


@pytest.mark.gpu
def test_bf16_scoring_on_cuda_agrees_with_float32() -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    model, tokenizer = build_tiny(seed=3)
    cpu = score_solutions(model, tokenizer, ITEMS, tiny_args(device="cpu"))

    cuda = score_solutions(model.cuda(), tokenizer, ITEMS, tiny_args(device="cuda", bf16=True))

    for a, b in zip(cpu, cuda, strict=True):
        assert b.step_scores == pytest.approx(a.step_scores, abs=0.05)
