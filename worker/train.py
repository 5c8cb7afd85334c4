"""Training the PRM on step labels: split, setup, fit.

Pure functions over in-memory examples; worker/data.py builds the examples from the
labels, worker/evaluate.py judges the result, worker/checkpoint.py saves it and
worker/cycle.py runs the steps. Under torchrun (``torch.distributed`` initialized), ``fit``
wraps the model in DistributedDataParallel and each rank trains on its share of the batches.

In ``head`` mode ``fit`` trains the head alone, on the frozen backbone's step features
(computed once per sequence with a feature cache): a linear probe, standardized inputs,
an L2 prior, AdamW over shuffled batches of labeled steps.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from transformers import PreTrainedTokenizerBase

from worker.batching import collate, collate_packed, fill_rows, length_batches
from worker.build import build_model, enable_gradient_checkpointing
from worker.device import autocast, resolve_device
from worker.eval_sets import unit_hash
from worker.features import FeatureCache
from worker.head import HeadFit, HeadTraining, StepHead, fit_head
from worker.layout import IGNORE_INDEX, LABELS, Encoded, encode_many
from worker.model import PRM, PRMOutput, compile_layers
from worker.precision import MasterWeights
from worker.score import Throughput, step_features
from worker.training_args import TrainingArgs


@dataclass
class Example:
    """One solution path and its step ratings (-1, 0, +1); None leaves a step unlabeled.

    An unlabeled step is context only: a branch (another rated completion of a step) repeats
    the path before it without its labels, so each rating is learned once.
    """

    problem_id: int
    problem: str
    steps: list[str]
    labels: list[int | None]

    def __post_init__(self) -> None:
        if len(self.labels) != len(self.steps):
            raise ValueError(f"{len(self.labels)} labels for {len(self.steps)} steps")
        if any(label not in (*LABELS, None) for label in self.labels):
            raise ValueError(f"labels must be -1, 0, 1 or None: {self.labels}")

    @property
    def labeled(self) -> list[tuple[int, int]]:
        """(step index, rating) of each labeled step."""
        return [(i, label) for i, label in enumerate(self.labels) if label is not None]


def split_by_problem(
    examples: list[Example], fraction: float, seed: int
) -> tuple[list[Example], list[Example]]:
    """(train, held_out): every example of a problem falls on the same side.

    A problem is held out when a hash of (seed, problem_id) falls below ``fraction``, so
    it stays on its side as labels keep arriving, and later runs evaluate on a superset of
    earlier held-out problems. With two or more problems and 0 < fraction, each side
    gets at least one problem.
    """
    hashes = {e.problem_id: unit_hash(seed, str(e.problem_id)) for e in examples}
    held = {pid for pid, value in hashes.items() if value < fraction}
    if fraction > 0 and len(hashes) >= 2:
        ranked = sorted(hashes, key=hashes.__getitem__)
        if not held:
            held = {ranked[0]}
        elif len(held) == len(hashes):
            held.discard(ranked[-1])
    train = [e for e in examples if e.problem_id not in held]
    return train, [e for e in examples if e.problem_id in held]


def setup(args: TrainingArgs) -> tuple[PRM, PreTrainedTokenizerBase, torch.device]:
    """The untrained PRM on its device (under torchrun, this rank's GPU) and its tokenizer."""
    device = resolve_device(args.device)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    model, tokenizer = build_model(args)
    if args.gradient_checkpointing:
        enable_gradient_checkpointing(model)
    return model.to(device), tokenizer, device


@dataclass(frozen=True)
class Progress:
    step: int
    total_steps: int
    epoch: int
    loss: float
    tokens_per_second: float


@dataclass
class FitStats:
    examples: int = 0
    """Training examples with at least one labeled step."""
    labeled_steps: int = 0
    """Step labels seen per epoch (after truncation)."""
    optimizer_steps: int = 0
    epochs: int = 0
    """Epochs begun; the last may be partial when stopped."""
    tokens: int = 0
    """Non-padding tokens trained on, all ranks together."""
    seconds: float = 0.0
    tokens_per_second: float = 0.0
    epoch_losses: list[float] = field(default_factory=list)
    """Mean training loss of each epoch."""
    stopped: bool = False
    """``should_stop`` ended training early."""
    world_size: int = 1
    feature_seconds: float = 0.0
    """``head`` mode: time spent getting the step features (included in ``seconds``)."""
    feature_sequences: int = 0
    """``head`` mode: sequences the backbone ran on (the cache had the others)."""


def _rank_and_world() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _epoch_batches(
    lengths: list[int], args: TrainingArgs, epoch: int, rank: int, world: int
) -> list[list[int]]:
    """This rank's batches for an epoch, the same plan on every rank.

    Examples are shuffled, then sorted by length within pools of ``length_pool_batches``
    batches, so batches pad little yet mix solutions of different lengths: sorting the
    whole set makes batches of only short (often ending in an error) or only long
    solutions, and that slows learning several-fold. With ``pack_rows`` the shuffled
    examples fill batches of that many rows instead (``fill_rows``). The plan is cycled up
    to a multiple of the world size so every rank takes the same number of steps (a rank
    with fewer would leave the others waiting forever).
    """
    rng = random.Random(args.seed * 1_000_003 + epoch)
    order = rng.sample(range(len(lengths)), len(lengths))
    if args.pack and args.pack_rows:
        # Rows of mixed lengths are full either way: no grouping by length.
        batches = fill_rows(order, lengths, args.pack_rows, args.max_length)
    else:
        pool = args.batch_size * args.length_pool_batches
        batches = []
        for start in range(0, len(order), pool):
            chunk = order[start : start + pool]
            grouped = length_batches(
                [lengths[i] for i in chunk], args.batch_size, args.max_tokens_per_batch
            )
            batches += [[chunk[i] for i in batch] for batch in grouped]
    rng.shuffle(batches)
    padded = math.ceil(len(batches) / world) * world
    batches = [batches[i % len(batches)] for i in range(padded)]
    return batches[rank::world]


def _trainable(model: nn.Module) -> list[torch.Tensor]:
    return [p for p in model.parameters() if p.requires_grad]


def _optimizer(params: list[torch.Tensor], args: TrainingArgs) -> torch.optim.AdamW:
    # Decay matrices only: decaying biases and norm scales only hurts.
    groups = [
        {"params": [p for p in params if p.ndim >= 2], "weight_decay": args.weight_decay},
        {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0},
    ]
    # The fused CUDA kernel updates every tensor in one launch; the default (foreach)
    # one made the optimizer step over half of a 1.5B model's step time on an H100.
    fused = all(p.is_cuda for p in params)
    return torch.optim.AdamW(groups, lr=args.learning_rate, fused=fused)


def linear_schedule(
    optimizer: torch.optim.Optimizer, total_steps: int, warmup_ratio: float
) -> torch.optim.lr_scheduler.LambdaLR:
    warmup = int(warmup_ratio * total_steps)

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / (warmup + 1)
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def _any_rank(flag: bool, device: torch.device) -> bool:
    """True on every rank when any rank says so (a lone rank stopping would hang DDP)."""
    if _rank_and_world()[1] == 1:
        return flag
    value = torch.tensor([int(flag)], device=device)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return bool(value.item())


def _sum_ranks(value: int, device: torch.device) -> int:
    if _rank_and_world()[1] == 1:
        return value
    total = torch.tensor([value], device=device)
    dist.all_reduce(total)
    return int(total.item())


def _wrap(model: PRM, device: torch.device) -> nn.Module:
    if _rank_and_world()[1] == 1:
        return model
    return DistributedDataParallel(
        model, device_ids=[device.index] if device.type == "cuda" else None
    )


class _Loop:
    """One fit in progress: the optimizer step, the epochs, and what FitStats reports."""

    def __init__(
        self,
        model: PRM,
        args: TrainingArgs,
        total_steps: int,
        on_progress: Callable[[Progress], None] | None,
        should_stop: Callable[[], bool] | None,
    ) -> None:
        self.device = next(model.parameters()).device
        self.masters = MasterWeights(model) if args.master_weights else None
        self.uncompile = compile_layers(model) if args.compile else None
        self.model = _wrap(model, self.device)
        self.trained = self.masters.masters if self.masters else _trainable(model)
        """What the optimizer steps (and clipping reads): the masters, or the model's own."""
        self.optimizer = _optimizer(self.trained, args)
        self.schedule = linear_schedule(self.optimizer, total_steps, args.warmup_ratio)
        self.args = args
        self.total_steps = total_steps
        self.on_progress = on_progress
        self.should_stop = should_stop
        self.started = time.perf_counter()
        self.tokens = 0
        self.steps = 0

    def step(self, encoded: list[Encoded], pad_token_id: int) -> torch.Tensor:
        batch = (
            collate_packed(encoded, pad_token_id, self.device, self.args.max_length)
            if self.args.pack
            else collate(encoded, pad_token_id, self.device)
        )
        # bf16 weights need no autocast; its float32 casts would undo them.
        with autocast(self.args, self.device, enabled=self.masters is None):
            output: PRMOutput = self.model(
                batch.input_ids, batch.attention_mask, batch.label_ids, batch.position_ids
            )
        loss = output.loss
        assert loss is not None  # labels were given
        loss.backward()  # type: ignore[no-untyped-call]
        if self.masters is not None:
            self.masters.grads_to_masters()
        if self.args.max_grad_norm > 0:
            nn.utils.clip_grad_norm_(self.trained, self.args.max_grad_norm)
        self.optimizer.step()
        if self.masters is not None:
            self.masters.masters_to_model()
        self.schedule.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.tokens += batch.tokens
        self.steps += 1
        return loss.detach()

    def finish(self) -> None:
        """The model as a fit leaves it: float32 weights again after bf16 ones, its layers
        uncompiled."""
        if self.masters is not None:
            self.masters.restore()
        if self.uncompile is not None:
            self.uncompile()

    def epoch(self, epoch: int, batches: list[list[Encoded]], pad_token_id: int) -> list[float]:
        """Train on the batches; the losses, fewer than the batches when asked to stop."""
        # Losses stay on the device until the end of the epoch: no sync per step on CUDA.
        losses: list[torch.Tensor] = []
        for batch in batches:
            if self.should_stop is not None and _any_rank(self.should_stop(), self.device):
                break
            losses.append(self.step(batch, pad_token_id))
            if self.on_progress is not None:
                self.on_progress(
                    Progress(
                        self.steps,
                        self.total_steps,
                        epoch,
                        float(losses[-1]),
                        self.tokens / (time.perf_counter() - self.started),
                    )
                )
        return torch.stack(losses).tolist() if losses else []


def fit(
    model: PRM,
    tokenizer: PreTrainedTokenizerBase,
    train_examples: list[Example],
    args: TrainingArgs,
    on_progress: Callable[[Progress], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    cache: FeatureCache | None = None,
) -> FitStats:
    """Train in place: AdamW, linear warmup and decay.

    ``full`` and ``lora`` modes train on whole sequences in batches grouped by length, on
    the model's device, with bf16 autocast where ``args`` says so; under torchrun each rank
    trains on its share of the batches (losses in the stats are this rank's). ``head`` mode
    trains the head on the step features (``cache`` keeps them between runs).
    ``should_stop`` is asked before every optimizer step; ``on_progress`` hears after every one.
    """
    torch.manual_seed(args.seed)
    if args.mode == "head":
        return _fit_head(model, tokenizer, train_examples, args, on_progress, should_stop, cache)
    rank, world = _rank_and_world()
    encoded = encode_many(
        tokenizer, [(e.problem, e.steps, e.labels) for e in train_examples], args.max_length
    )
    encoded = [e for e in encoded if _labeled_tokens(e)]
    stats = FitStats(
        examples=len(encoded),
        labeled_steps=sum(_labeled_tokens(e) for e in encoded),
        world_size=world,
    )
    if not encoded:
        return stats
    lengths = [len(e.input_ids) for e in encoded]
    plan = [_epoch_batches(lengths, args, epoch, rank, world) for epoch in range(args.epochs)]
    loop = _Loop(model, args, sum(map(len, plan)), on_progress, should_stop)
    model.train()
    try:
        for epoch, batches in enumerate(plan):
            stats.epochs = epoch + 1
            losses = loop.epoch(
                epoch, [[encoded[i] for i in b] for b in batches], tokenizer.pad_token_id
            )
            stats.epoch_losses += [sum(losses) / len(losses)] if losses else []
            if len(losses) < len(batches):
                stats.stopped = True
                break
    finally:
        loop.finish()
    model.eval()
    stats.optimizer_steps = loop.steps
    stats.tokens = _sum_ranks(loop.tokens, loop.device)
    stats.seconds = time.perf_counter() - loop.started
    stats.tokens_per_second = stats.tokens / max(stats.seconds, 1e-9)
    return stats


def _labeled_tokens(encoded: Encoded) -> int:
    return sum(label != IGNORE_INDEX for label in encoded.label_ids)


@dataclass(frozen=True)
class LabeledSteps:
    """The labeled steps of some examples as rows: features and class indices (rating + 1)."""

    features: torch.Tensor
    """(steps, width) float32."""
    classes: torch.Tensor
    """(steps,) int64."""


def labeled_step_features(
    model: PRM,
    tokenizer: PreTrainedTokenizerBase,
    examples: list[Example],
    args: TrainingArgs,
    cache: FeatureCache | None,
) -> tuple[LabeledSteps, Throughput]:
    """Every labeled step's feature (from ``cache`` where it has it) and its class."""
    items = [(e.problem, e.steps) for e in examples]
    features, throughput = step_features(model, tokenizer, items, args, cache)
    return labeled_steps(examples, features, model.width), throughput


def labeled_steps(examples: list[Example], features: list[np.ndarray], width: int) -> LabeledSteps:
    """The labeled steps' rows of ``features`` (each example's (steps, width) array)."""
    rows = [
        (f[i], rating + 1)
        for e, f in zip(examples, features, strict=True)
        for i, rating in e.labeled
    ]
    return LabeledSteps(
        torch.from_numpy(np.stack([r[0] for r in rows])) if rows else torch.zeros(0, width),
        torch.tensor([r[1] for r in rows], dtype=torch.long),
    )


FEATURE_CHUNK = 64
"""Solutions whose features are computed between two looks at ``should_stop`` (head mode)."""


def _features_unless_stopped(
    model: PRM,
    tokenizer: PreTrainedTokenizerBase,
    examples: list[Example],
    args: TrainingArgs,
    cache: FeatureCache | None,
    should_stop: Callable[[], bool] | None,
) -> tuple[list[np.ndarray], Throughput] | None:
    """Each example's step features, FEATURE_CHUNK solutions at a time when a stop may come
    (a cold cache takes hours with phase-1 labels on a CPU; the chunks done stay cached for
    the next run); None once ``should_stop`` says so."""
    items = [(e.problem, e.steps) for e in examples]
    if should_stop is None:
        return step_features(model, tokenizer, items, args, cache)
    features: list[np.ndarray] = []
    total = Throughput(0, 0, 0, 0.0)
    for start in range(0, len(items), FEATURE_CHUNK):
        if should_stop():
            return None
        part, done = step_features(
            model, tokenizer, items[start : start + FEATURE_CHUNK], args, cache
        )
        features.extend(part)
        total += done
    return features, total


def _fit_head(
    model: PRM,
    tokenizer: PreTrainedTokenizerBase,
    examples: list[Example],
    args: TrainingArgs,
    on_progress: Callable[[Progress], None] | None,
    should_stop: Callable[[], bool] | None,
    cache: FeatureCache | None,
) -> FitStats:
    """Fit the head on the labeled steps' features; the backbone is not touched."""
    if _rank_and_world()[1] > 1:
        raise ValueError("head mode trains in one process: run it without torchrun")
    started = time.perf_counter()
    found = _features_unless_stopped(model, tokenizer, examples, args, cache, should_stop)
    if found is None:
        model.eval()
        return FitStats(stopped=True, seconds=time.perf_counter() - started)
    features, throughput = found
    steps = labeled_steps(examples, features, model.width)
    stats = FitStats(
        examples=sum(1 for e in examples if e.labeled),
        labeled_steps=len(steps.classes),
        tokens=throughput.tokens,
        feature_seconds=throughput.seconds,
        feature_sequences=throughput.sequences,
    )
    if len(steps.classes):
        # The features are on the host (the cache keeps them there), and so is the head while
        # it trains, whatever device the backbone is on: a few small layers train fast there.
        device = model.head.device
        model.head.cpu()
        try:
            trained = _fit_head_on_host(model.head, steps, args, on_progress, should_stop)
        finally:
            model.head.to(device)
        stats.epoch_losses, stats.stopped = trained.epoch_losses, trained.stopped
        stats.epochs = len(stats.epoch_losses)
        stats.optimizer_steps = trained.optimizer_steps
    model.eval()
    stats.seconds = time.perf_counter() - started
    stats.tokens_per_second = stats.tokens / max(stats.seconds, 1e-9)
    return stats


def _fit_head_on_host(
    head: StepHead,
    steps: LabeledSteps,
    args: TrainingArgs,
    on_progress: Callable[[Progress], None] | None,
    should_stop: Callable[[], bool] | None,
) -> HeadFit:
    report = _head_step_reporter(args, len(steps.classes), on_progress, should_stop)
    training = head_training(args)
    return fit_head(head, steps.features, steps.classes, training, linear_schedule, report)


def head_training(args: TrainingArgs) -> HeadTraining:
    """How ``head`` mode trains the head, from the training arguments."""
    return HeadTraining(
        learning_rate=args.learning_rate,
        epochs=args.epochs,
        batch_size=args.batch_size,
        weight_decay=args.weight_decay,
        warmup_ratio=args.warmup_ratio,
        seed=args.seed,
        class_balance=args.head_class_balance,
    )


def _head_step_reporter(
    args: TrainingArgs,
    rows: int,
    on_progress: Callable[[Progress], None] | None,
    should_stop: Callable[[], bool] | None,
) -> Callable[[int, int, float], bool]:
    """``fit_head``'s hook: progress after each optimizer step, and whether to stop."""
    total = args.head_members * args.epochs * math.ceil(rows / args.batch_size)

    def on_step(step: int, epoch: int, loss: float) -> bool:
        if on_progress is not None:
            on_progress(Progress(step, total, epoch, loss, 0.0))
        return should_stop is not None and should_stop()

    return on_step
