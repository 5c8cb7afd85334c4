"""Scoring solutions with a PRM: per-step probabilities, batched by length.

A step's score is P(positive) + P(neutral) at its step-end token (neutral counts as
correct, as in "Let's Verify Step by Step"); a solution's score is the product over its
steps, the probability that every step is fine. Sequences are sorted by length, padded
per batch and put back in the callers' order.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import torch
from torch.func import functional_call
from transformers import PreTrainedTokenizerBase

from worker.model import (
    PRM,
    Encoded,
    TrainingArgs,
    autocast,
    collate,
    device_tensor,
    encode,
    length_batches,
    uses_bf16,
)


@dataclass(frozen=True)
class SolutionScore:
    score: float
    """Product of the step scores, in (0, 1]; 1.0 for a solution with no steps."""
    min_step: float
    """The weakest step's score; 1.0 for a solution with no steps."""
    step_scores: list[float]
    """P(positive) + P(neutral) for each step, in order."""


@dataclass(frozen=True)
class Throughput:
    solutions: int
    sequences: int
    """Forward sequences: more than solutions where long ones are scored in windows."""
    tokens: int
    """Tokens that are not padding."""
    seconds: float

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0

    @property
    def solutions_per_second(self) -> float:
        return self.solutions / self.seconds if self.seconds else 0.0


@dataclass(frozen=True)
class _Window:
    item: int
    encoded: Encoded


def _windows(
    tokenizer: PreTrainedTokenizerBase,
    items: list[tuple[str, list[str]]],
    max_length: int,
    first_item: int = 0,
) -> list[_Window]:
    """Each solution as one sequence, or, when too long, as prefixes that cover every step.

    The first window ends at the last step; left truncation may drop early steps, which
    the next window (the solution up to the first kept step) scores, and so on. Each
    window keeps at least its last step, so this ends. Windows name their solution by its
    index in ``items``, plus ``first_item`` (where ``items`` is a chunk of a longer list).
    """
    windows = []
    for index, (problem, steps) in enumerate(items, start=first_item):
        end = len(steps)
        while end > 0:
            encoded = encode(tokenizer, problem, steps[:end], None, max_length)
            windows.append(_Window(index, encoded))
            end = encoded.first_step
    return windows


SOLUTIONS_PER_CHUNK = 4096
"""Solutions tokenized and scored at a time: a pool of a million solutions would otherwise
hold every token list in memory at once (gigabytes), for no gain in speed."""


def step_probabilities(
    model: PRM,
    tokenizer: PreTrainedTokenizerBase,
    items: list[tuple[str, list[str]]],
    args: TrainingArgs,
) -> tuple[list[np.ndarray], Throughput]:
    """For each (problem, steps) item, a (steps, 3) array of P(-1), P(0), P(+1).

    Runs on the device the model is on, in bf16 on CUDA (``args.bf16``), a chunk of
    ``SOLUTIONS_PER_CHUNK`` solutions at a time.
    """
    started = time.perf_counter()
    device = next(model.parameters()).device
    probabilities = [np.zeros((len(steps), 3)) for _, steps in items]
    sequences = tokens = 0
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode(), autocast(args, device):
            weights = _bf16_weights(model) if uses_bf16(args, device) else None
            for first in range(0, len(items), SOLUTIONS_PER_CHUNK):
                chunk = items[first : first + SOLUTIONS_PER_CHUNK]
                windows = _windows(tokenizer, chunk, args.max_length, first)
                tokens += _score_windows(
                    model, weights, tokenizer, windows, probabilities, args, device
                )
                sequences += len(windows)
    finally:
        model.train(was_training)
    seconds = time.perf_counter() - started
    return probabilities, Throughput(len(items), sequences, tokens, seconds)


def _score_windows(
    model: PRM,
    weights: dict[str, torch.Tensor] | None,
    tokenizer: PreTrainedTokenizerBase,
    windows: list[_Window],
    probabilities: list[np.ndarray],
    args: TrainingArgs,
    device: torch.device,
) -> int:
    """Write the windows' step probabilities into ``probabilities``; the tokens read."""
    lengths = [len(w.encoded.input_ids) for w in windows]
    scored = []
    for indices in length_batches(lengths, args.score_batch_size, args.max_tokens_per_batch):
        batch = [windows[i] for i in indices]
        scored.append((batch, _step_logits(model, weights, tokenizer, batch, device)))
    # To the host only once every batch is queued: a copy after each batch would make the
    # host wait for the GPU instead of preparing the next batch meanwhile.
    for batch, logits in scored:
        _write_probabilities(batch, logits, probabilities)
    return sum(lengths)


def _bf16_weights(model: PRM) -> dict[str, torch.Tensor]:
    """bf16 copies of the parameters (not the buffers, such as rotary frequencies).

    Autocast alone keeps fp32 activations between the matrix products (norms, residuals);
    with bf16 weights the whole forward pass runs in bf16 (BENCHMARKS.md has the H100
    figures). The copies take half the fp32 model's memory while the scoring lasts.
    """
    return {name: p.detach().to(torch.bfloat16) for name, p in model.named_parameters()}


def _step_logits(
    model: PRM,
    weights: dict[str, torch.Tensor] | None,
    tokenizer: PreTrainedTokenizerBase,
    windows: list[_Window],
    device: torch.device,
) -> torch.Tensor:
    """The logits at the windows' step ends, in window order; left on the device.

    ``weights``, when given, replace the model's parameters for this forward pass.
    """
    batch = collate([w.encoded for w in windows], tokenizer.pad_token_id, device)
    inputs = (batch.input_ids, batch.attention_mask)
    output = model(*inputs) if weights is None else functional_call(model, weights, inputs)
    logits: torch.Tensor = output.logits
    rows = [row for row, w in enumerate(windows) for _ in w.encoded.step_end_positions]
    columns = [p for w in windows for p in w.encoded.step_end_positions]
    chosen: torch.Tensor = logits[device_tensor(rows, device), device_tensor(columns, device)]
    return chosen


def _write_probabilities(
    windows: list[_Window], logits: torch.Tensor, probabilities: list[np.ndarray]
) -> None:
    """Put the windows' step probabilities in their solutions' places in ``probabilities``."""
    # float64 softmax so that tiny step scores stay positive in long products.
    chosen = torch.softmax(logits.double(), dim=-1).cpu().numpy()
    offset = 0
    for window in windows:
        count = len(window.encoded.step_end_positions)
        first = window.encoded.first_step
        probabilities[window.item][first : first + count] = chosen[offset : offset + count]
        offset += count


def solution_score(probabilities: np.ndarray) -> SolutionScore:
    """The product and minimum of the step scores P(+1) + P(0)."""
    # Clamped: the two probabilities can sum to a hair above 1 in floating point.
    step_scores = [min(1.0, float(p[1] + p[2])) for p in probabilities]
    return SolutionScore(
        score=math.prod(step_scores),
        min_step=min(step_scores, default=1.0),
        step_scores=step_scores,
    )


def score_with_throughput(
    model: PRM,
    tokenizer: PreTrainedTokenizerBase,
    items: list[tuple[str, list[str]]],
    args: TrainingArgs,
) -> tuple[list[SolutionScore], Throughput]:
    """``score_solutions`` with its tokens/s and solutions/s."""
    probabilities, throughput = step_probabilities(model, tokenizer, items, args)
    return [solution_score(p) for p in probabilities], throughput


def score_solutions(
    model: PRM,
    tokenizer: PreTrainedTokenizerBase,
    items: list[tuple[str, list[str]]],
    args: TrainingArgs,
) -> list[SolutionScore]:
    """Score (problem, steps) items, in the order given."""
    return score_with_throughput(model, tokenizer, items, args)[0]
