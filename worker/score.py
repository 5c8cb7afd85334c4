"""Scoring solutions with a PRM: per-step probabilities, batched by length.

A step's score is P(positive) + P(neutral) at its step-end token (neutral counts as
correct, as in "Let's Verify Step by Step"); a solution's score is the product over its
steps, the probability that every step is fine. Sequences are sorted by length, padded
per batch and put back in the callers' order.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import cast

import numpy as np
import torch
from transformers import DynamicCache, PreTrainedTokenizerBase

from worker.batching import collate, device_tensor, length_batches
from worker.device import autocast, score_batch_size_on, uses_bf16
from worker.features import FeatureCache, prefix_keys, round_features, sequence_key
from worker.head import StepHead
from worker.layout import Encoded, Pieces, lay_out, tokenize_solutions
from worker.model import PRM, StepPositions, compile_layers
from worker.training_args import TrainingArgs


@dataclass(frozen=True)
class SolutionScore:
    score: float
    """Product of the step scores, in (0, 1]; 1.0 for a solution with no steps."""
    min_step: float
    """The weakest step's score; 1.0 for a solution with no steps."""
    step_scores: list[float]
    """P(positive) + P(neutral) for each step, in order: the head's members' mean."""
    member_step_scores: list[list[float]] = field(default_factory=list, compare=False)
    """Each member's step scores (one list for a head of one member), for uncertainty."""
    embedding: np.ndarray | None = field(default=None, compare=False)
    """Where the solution sits in feature space (``StepHead.embedding``), when asked for."""


@dataclass(frozen=True)
class Throughput:
    solutions: int
    sequences: int
    """Sequences the model ran on: more than solutions where long ones are scored in
    windows, fewer where a feature cache had them."""
    tokens: int
    """Their tokens that are not padding."""
    seconds: float

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0

    @property
    def solutions_per_second(self) -> float:
        return self.solutions / self.seconds if self.seconds else 0.0

    def __add__(self, other: Throughput) -> Throughput:
        return Throughput(
            self.solutions + other.solutions,
            self.sequences + other.sequences,
            self.tokens + other.tokens,
            self.seconds + other.seconds,
        )


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
    # Tokenized once: a window's layout is made of the same pieces as the whole solution's.
    for index, whole in enumerate(tokenize_solutions(tokenizer, items), start=first_item):
        end = len(whole.steps)
        while end > 0:
            encoded = lay_out(tokenizer, Pieces(whole.problem, whole.steps[:end]), None, max_length)
            windows.append(_Window(index, encoded))
            end = encoded.first_step
    return windows


SOLUTIONS_PER_CHUNK = 4096
"""Solutions tokenized and scored at a time: a pool of a million solutions would otherwise
hold every token list in memory at once (gigabytes), for no gain in speed."""


def step_features(
    model: PRM,
    tokenizer: PreTrainedTokenizerBase,
    items: list[tuple[str, list[str]]],
    args: TrainingArgs,
    cache: FeatureCache | None = None,
) -> tuple[list[np.ndarray], Throughput]:
    """For each (problem, steps) item, a (steps, feature width) float32 array: what the
    model reads of each step (``PRM.readings``).

    Runs on the device the model is on, in bf16 where ``args`` says so, a chunk of
    ``SOLUTIONS_PER_CHUNK`` solutions at a time. In ``head`` mode features are rounded as
    the cache stores them, and with a ``cache`` only sequences it lacks are computed; a
    cache that remembers (``FeatureCache``) gives back the items it has seen before without
    tokenizing them, as read-only arrays.
    """
    if cache is not None and args.mode != "head":
        raise ValueError("features are cached only in head mode (a frozen backbone)")
    if cache is None or cache.texts is None:
        return _step_features(model, tokenizer, items, args, cache)
    started = time.perf_counter()
    recalled = cache.recall(items, args.max_length)
    missing = [i for i, values in enumerate(recalled) if values is None]
    new = [items[i] for i in missing]
    computed, throughput = _step_features(model, tokenizer, new, args, cache)
    cache.remember(new, computed, args.max_length)
    for index, values in zip(missing, computed, strict=True):
        recalled[index] = values
    features = cast(list[np.ndarray], recalled)  # every item's, now
    seconds = time.perf_counter() - started
    return features, replace(throughput, solutions=len(items), seconds=seconds)


def _step_features(
    model: PRM,
    tokenizer: PreTrainedTokenizerBase,
    items: list[tuple[str, list[str]]],
    args: TrainingArgs,
    cache: FeatureCache | None,
) -> tuple[list[np.ndarray], Throughput]:
    """``step_features`` without the remembered texts."""
    if not items:  # nothing to set the model up for (nor to copy bf16 weights for)
        return [], Throughput(0, 0, 0, 0.0)
    started = time.perf_counter()
    device = next(model.parameters()).device
    width = model.feature_width
    features = [np.zeros((len(steps), width), dtype=np.float32) for _, steps in items]
    sequences = tokens = 0
    was_training = model.training
    model.eval()
    # Compiled as training compiles it (TrainingArgs.compile); a new batch length may
    # recompile once, after which lengths are dynamic.
    uncompile = compile_layers(model) if args.compile else None
    try:
        with torch.inference_mode(), autocast(args, device):
            weights = _bf16_weights(model) if uses_bf16(args, device) else None
            for first in range(0, len(items), SOLUTIONS_PER_CHUNK):
                windows = _windows(
                    tokenizer, items[first : first + SOLUTIONS_PER_CHUNK], args.max_length, first
                )
                found = _window_features(model, weights, tokenizer, windows, args, device, cache)
                for window, values in zip(windows, found.values, strict=True):
                    start = window.encoded.first_step
                    features[window.item][start : start + len(values)] = values
                sequences += found.computed
                tokens += found.tokens
    finally:
        model.train(was_training)
        if uncompile is not None:
            uncompile()
    seconds = time.perf_counter() - started
    return features, Throughput(len(items), sequences, tokens, seconds)


def fill_cache(
    model: PRM,
    tokenizer: PreTrainedTokenizerBase,
    items: list[tuple[str, list[str]]],
    args: TrainingArgs,
    cache: FeatureCache,
    report: Callable[[int, Throughput], None] = lambda _done, _total: None,
    should_stop: Callable[[], bool] = lambda: False,
    chunk: int = 64,
) -> Throughput:
    """Compute the features ``cache`` lacks for ``items``, ``chunk`` solutions at a time;
    what was computed, in all.

    A cold cache takes minutes to hours on a CPU: after each chunk that computed something,
    ``report`` gets the solutions done so far and the throughput so far, what is done is
    already saved, and ``should_stop`` may end it there.
    """
    total = Throughput(0, 0, 0, 0.0)
    for start in range(0, len(items), chunk):
        if should_stop():
            break
        part = items[start : start + chunk]
        done = step_features(model, tokenizer, part, args, cache)[1]
        total += done
        if done.sequences:
            report(start + len(part), total)
    return total


def step_probabilities(
    model: PRM,
    tokenizer: PreTrainedTokenizerBase,
    items: list[tuple[str, list[str]]],
    args: TrainingArgs,
    cache: FeatureCache | None = None,
) -> tuple[list[np.ndarray], Throughput]:
    """For each (problem, steps) item, a (steps, 3) array of P(-1), P(0), P(+1): the mean
    of the head's members."""
    features, throughput = step_features(model, tokenizer, items, args, cache)
    return [p.mean(axis=0) for p in member_probabilities(model.head, features)], throughput


STEPS_PER_HEAD_PASS = 65536
"""Steps the head reads at once: a float64 copy of their features is made for it."""


def member_probabilities(head: StepHead, features: list[np.ndarray]) -> list[np.ndarray]:
    """For each solution's (steps, width) features, a (members, steps, 3) array of each
    member's P(-1), P(0), P(+1); many solutions' steps in one pass of the head."""
    result: list[np.ndarray] = []
    start = 0
    while start < len(features):
        stop, steps = start, 0
        while stop < len(features) and (stop == start or steps < STEPS_PER_HEAD_PASS):
            steps += len(features[stop])
            stop += 1
        chunk = features[start:stop]
        width = chunk[0].shape[1] if chunk else 0
        joined = np.concatenate(chunk) if steps else np.zeros((0, width), np.float32)
        together = head.member_probabilities(joined)
        bounds = np.cumsum([len(f) for f in chunk])[:-1]
        result += np.split(together, bounds, axis=1)
        start = stop
    return result


@dataclass(frozen=True)
class _Found:
    values: list[np.ndarray]
    """Per window, in order: (step ends, width) features."""
    computed: int
    """Windows the model ran on (the rest came from the cache)."""
    tokens: int
    """Their tokens."""


def _window_features(
    model: PRM,
    weights: dict[str, torch.Tensor] | None,
    tokenizer: PreTrainedTokenizerBase,
    windows: list[_Window],
    args: TrainingArgs,
    device: torch.device,
    cache: FeatureCache | None,
) -> _Found:
    """Each window's features: from the cache where it has them, else from the model."""
    keys: list[bytes] = []
    known: dict[bytes, np.ndarray] = {}
    if cache is not None:
        keys = [sequence_key(w.encoded.input_ids, w.encoded.step_end_positions) for w in windows]
        known = cache.get_many(keys, model.feature_width)
    todo = [i for i in range(len(windows)) if not keys or keys[i] not in known]
    shared, alone = _shared_prefixes([windows[i].encoded for i in todo])
    lengths = [len(windows[todo[i]].encoded.input_ids) for i in alone]
    queued = []
    per_batch = score_batch_size_on(args, device)
    for indices in length_batches(lengths, per_batch, args.max_tokens_per_batch):
        batch = [todo[alone[i]] for i in indices]
        vectors = _step_vectors(model, weights, tokenizer, [windows[i] for i in batch])
        queued.append((batch, vectors))
    tokens = sum(lengths)
    for group in shared:
        batch = [todo[i] for i in group]
        encoded = [windows[i].encoded for i in batch]
        queued.append(
            (batch, _shared_prefix_vectors(model, weights, tokenizer, encoded, per_batch))
        )
        tokens += _shared_prefix_tokens(encoded)
    # To the host only once every batch is queued: a copy after each batch would make the
    # host wait for the GPU instead of preparing the next batch meanwhile.
    computed: dict[int, np.ndarray] = {}
    for batch, vectors in queued:
        host = vectors.float().cpu().numpy()
        offset = 0
        for index in batch:
            count = len(windows[index].encoded.step_end_positions)
            values = host[offset : offset + count]
            computed[index] = round_features(values) if args.mode == "head" else values
            offset += count
    if cache is not None and computed:
        cache.put_many(
            (keys[i], values, _prefix_keys(windows[i].encoded)) for i, values in computed.items()
        )
    found = [computed[i] if i in computed else known[keys[i]] for i in range(len(windows))]
    return _Found(found, len(todo), tokens)


def _shared_prefixes(encoded: list[Encoded]) -> tuple[list[list[int]], list[int]]:
    """Indices of the sequences that differ only in their last step, in groups of two or
    more by the tokens before it (PRM800K's rated candidates after one prefix), and the
    indices of the others."""
    groups: dict[tuple[int, ...], list[int]] = {}
    for index, sequence in enumerate(encoded):
        prefix = sequence.input_ids[: sequence.step_start_positions[-1]]
        groups.setdefault(tuple(prefix), []).append(index)
    shared = [group for prefix, group in groups.items() if prefix and len(group) > 1]
    grouped = {index for group in shared for index in group}
    return shared, [index for index in range(len(encoded)) if index not in grouped]


def _shared_prefix_tokens(encoded: list[Encoded]) -> int:
    """The tokens ``_shared_prefix_vectors`` runs the model on: the prefix once, then each
    sequence's last step."""
    prefix = encoded[0].step_start_positions[-1]
    return prefix + sum(len(e.input_ids) - prefix for e in encoded)


def _shared_prefix_vectors(
    model: PRM,
    weights: dict[str, torch.Tensor] | None,
    tokenizer: PreTrainedTokenizerBase,
    encoded: list[Encoded],
    per_batch: int,
) -> torch.Tensor:
    """The readings of sequences that share every token before their last step, in
    sequence order, each sequence's steps in order: as ``_step_vectors`` reads them, but
    with the shared prefix run once and each last step (``per_batch`` at a time) run on a
    copy of its key/value cache, instead of the whole prefix again for every sequence.

    A causal model's state at a position depends on the tokens before it alone, so every
    reading is the unshared one up to float rounding (a test checks it).
    """
    device = next(model.parameters()).device
    first = encoded[0]
    length = first.step_start_positions[-1]
    prefix_cache = DynamicCache()
    before = model.read_steps(
        device_tensor(first.input_ids[:length], device)[None],
        None,
        _positions(
            [0] * len(first.step_end_positions[:-1]),
            first.step_start_positions[:-1],
            first.step_end_positions[:-1],
            device,
        ),
        weights,
        prefix_cache,
    )
    last_steps = []
    for start in range(0, len(encoded), per_batch):
        part = encoded[start : start + per_batch]
        tails = [
            Encoded(e.input_ids[length:], e.label_ids[length:], [e.step_end_positions[-1] - length])
            for e in part
        ]
        batch = collate(tails, tokenizer.pad_token_id, device)
        # The mask covers the cache's tokens too; a batch of one has no padding to mask.
        mask = batch.attention_mask
        if mask is not None and len(part) > 1:
            mask = torch.cat([mask.new_ones(len(part), length), mask], dim=1)
        else:
            mask = None
        cache = copy.deepcopy(prefix_cache)
        cache.batch_repeat_interleave(len(part))
        steps = _positions(
            list(range(len(part))),
            [0] * len(part),
            [t.step_end_positions[0] for t in tails],
            device,
        )
        last_steps.append(model.read_steps(batch.input_ids, mask, steps, weights, cache))
    last = torch.cat(last_steps)
    return torch.cat([torch.cat([before, last[k : k + 1]]) for k in range(len(encoded))])


def _positions(
    rows: list[int], starts: list[int], ends: list[int], device: torch.device
) -> StepPositions:
    return StepPositions(
        rows=device_tensor(rows, device),
        starts=device_tensor(starts, device),
        ends=device_tensor(ends, device),
    )


def _prefix_keys(encoded: Encoded) -> list[bytes]:
    return prefix_keys(encoded.input_ids, encoded.step_end_positions)


def _bf16_weights(model: PRM) -> dict[str, torch.Tensor]:
    """bf16 copies of the backbone's parameters (not the buffers, such as rotary frequencies).

    Autocast alone keeps fp32 activations between the matrix products (norms, residuals);
    with bf16 weights the whole forward pass runs in bf16 (BENCHMARKS.md has the H100
    figures). The copies take half the fp32 model's memory while the scoring lasts.
    """
    return {name: p.detach().to(torch.bfloat16) for name, p in model.backbone.named_parameters()}


def _step_vectors(
    model: PRM,
    weights: dict[str, torch.Tensor] | None,
    tokenizer: PreTrainedTokenizerBase,
    windows: list[_Window],
) -> torch.Tensor:
    """The readings of the windows' steps, in window order; left on the device.

    ``weights``, when given, replace the backbone's parameters for this forward pass.
    """
    device = next(model.parameters()).device
    batch = collate([w.encoded for w in windows], tokenizer.pad_token_id, device)
    encoded = [w.encoded for w in windows]
    steps = _positions(
        [row for row, e in enumerate(encoded) for _ in e.step_end_positions],
        [p for e in encoded for p in e.step_start_positions],
        [p for e in encoded for p in e.step_end_positions],
        device,
    )
    return model.read_steps(batch.input_ids, batch.attention_mask, steps, weights)


def solution_score(probabilities: np.ndarray) -> SolutionScore:
    """The product and minimum of the step scores P(+1) + P(0), from (steps, 3) class
    probabilities, or (members, steps, 3) ones whose mean is the prediction."""
    members = probabilities if probabilities.ndim == 3 else probabilities[None]
    # Clamped: the two probabilities can sum to a hair above 1 in floating point.
    fine = np.minimum(1.0, members[..., 1] + members[..., 2])
    step_scores = [min(1.0, float(p)) for p in fine.mean(axis=0)]
    return SolutionScore(
        score=math.prod(step_scores),
        min_step=min(step_scores, default=1.0),
        step_scores=step_scores,
        member_step_scores=fine.tolist(),
    )


def score_with_throughput(
    model: PRM,
    tokenizer: PreTrainedTokenizerBase,
    items: list[tuple[str, list[str]]],
    args: TrainingArgs,
    cache: FeatureCache | None = None,
    embeddings: bool = False,
) -> tuple[list[SolutionScore], Throughput]:
    """``score_solutions`` with its tokens/s and solutions/s."""
    features, throughput = step_features(model, tokenizer, items, args, cache)
    scores = [solution_score(p) for p in member_probabilities(model.head, features)]
    if embeddings:
        scores = [
            replace(s, embedding=model.head.embedding(f))
            for s, f in zip(scores, features, strict=True)
        ]
    return scores, throughput


def score_solutions(
    model: PRM,
    tokenizer: PreTrainedTokenizerBase,
    items: list[tuple[str, list[str]]],
    args: TrainingArgs,
    cache: FeatureCache | None = None,
    embeddings: bool = False,
) -> list[SolutionScore]:
    """Score (problem, steps) items, in the order given, with each head member's scores
    (and, with ``embeddings``, where each solution sits in feature space)."""
    return score_with_throughput(model, tokenizer, items, args, cache, embeddings)[0]
