"""Training the PRM on step labels: split, setup, fit, evaluate, checkpoints.

Pure functions over in-memory examples; worker/data.py builds the examples from the
labels and worker/cycle.py runs the steps. Under torchrun (``torch.distributed``
initialized), ``fit`` wraps the model in DistributedDataParallel, each rank trains on its
share of the batches, and only rank 0 writes checkpoints.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import random
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import tokenizers
import torch
import torch.distributed as dist
import transformers
from safetensors.torch import load_model, save_model
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from transformers import AutoTokenizer, PreTrainedTokenizerBase

from worker.model import (
    LABELS,
    PRM,
    STEP_TOKEN,
    Device,
    Encoded,
    PRMOutput,
    TrainingArgs,
    autocast,
    build_model,
    collate,
    enable_gradient_checkpointing,
    encode,
    length_batches,
    load_backbone,
    resolve_device,
)
from worker.score import step_probabilities

CHECKPOINT_FORMAT = "steplabel-prm/1"
HEAD_FILE = "prm_head.safetensors"
AUROC_TOLERANCE = 0.01
"""How much held-out AUROC a new checkpoint may lose and still become current."""


@dataclass
class Example:
    """One labeled solution path: a rating (-1, 0, +1) for each step, the last may be -1."""

    problem_id: int
    problem: str
    steps: list[str]
    labels: list[int]

    def __post_init__(self) -> None:
        if len(self.labels) != len(self.steps):
            raise ValueError(f"{len(self.labels)} labels for {len(self.steps)} steps")
        if any(label not in LABELS for label in self.labels):
            raise ValueError(f"labels must be -1, 0 or 1: {self.labels}")


def _unit_hash(seed: int, problem_id: int) -> float:
    digest = hashlib.sha256(f"{seed}:{problem_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def split_by_problem(
    examples: list[Example], fraction: float, seed: int
) -> tuple[list[Example], list[Example]]:
    """(train, held_out): every example of a problem falls on the same side.

    A problem is held out when a hash of (seed, problem_id) falls below ``fraction``, so
    it stays on its side as labels keep arriving, and later runs evaluate on a superset of
    earlier held-out problems. With two or more problems and 0 < fraction, each side
    gets at least one problem.
    """
    hashes = {e.problem_id: _unit_hash(seed, e.problem_id) for e in examples}
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
    solutions, and that slows learning several-fold. The plan is cycled up to a multiple
    of the world size so every rank takes the same number of steps (a rank with fewer
    would leave the others waiting forever).
    """
    rng = random.Random(args.seed * 1_000_003 + epoch)
    order = rng.sample(range(len(lengths)), len(lengths))
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


def _optimizer(model: nn.Module, args: TrainingArgs) -> torch.optim.AdamW:
    # Decay matrices only: decaying biases and norm scales only hurts.
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.ndim >= 2], "weight_decay": args.weight_decay},
        {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0},
    ]
    # The fused CUDA kernel updates every tensor in one launch; the default (foreach)
    # one made the optimizer step over half of a 1.5B model's step time on an H100.
    fused = all(p.is_cuda for p in params)
    return torch.optim.AdamW(groups, lr=args.learning_rate, fused=fused)


def _linear_schedule(
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
        self.model = _wrap(model, self.device)
        self.optimizer = _optimizer(model, args)
        self.schedule = _linear_schedule(self.optimizer, total_steps, args.warmup_ratio)
        self.args = args
        self.total_steps = total_steps
        self.on_progress = on_progress
        self.should_stop = should_stop
        self.started = time.perf_counter()
        self.tokens = 0
        self.steps = 0

    def step(self, encoded: list[Encoded], pad_token_id: int) -> torch.Tensor:
        batch = collate(encoded, pad_token_id, self.device)
        with autocast(self.args, self.device):
            output: PRMOutput = self.model(batch.input_ids, batch.attention_mask, batch.label_ids)
        loss = output.loss
        assert loss is not None  # labels were given
        loss.backward()  # type: ignore[no-untyped-call]
        if self.args.max_grad_norm > 0:
            nn.utils.clip_grad_norm_(self.model.parameters(), self.args.max_grad_norm)
        self.optimizer.step()
        self.schedule.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.tokens += batch.tokens
        self.steps += 1
        return loss.detach()

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
) -> FitStats:
    """Train in place: AdamW, linear warmup and decay, batches grouped by length.

    Runs on the model's device, with bf16 autocast on CUDA. ``should_stop`` is asked
    before every optimizer step; ``on_progress`` hears after every one. Under torchrun
    each rank trains on its share of the batches; losses in the stats are this rank's.
    """
    torch.manual_seed(args.seed)
    rank, world = _rank_and_world()
    encoded = [
        encode(tokenizer, e.problem, e.steps, e.labels, args.max_length) for e in train_examples
    ]
    encoded = [e for e in encoded if e.step_end_positions]
    stats = FitStats(
        examples=len(encoded),
        labeled_steps=sum(len(e.step_end_positions) for e in encoded),
        world_size=world,
    )
    if not encoded:
        return stats
    lengths = [len(e.input_ids) for e in encoded]
    plan = [_epoch_batches(lengths, args, epoch, rank, world) for epoch in range(args.epochs)]
    loop = _Loop(model, args, sum(map(len, plan)), on_progress, should_stop)
    model.train()
    for epoch, batches in enumerate(plan):
        stats.epochs = epoch + 1
        losses = loop.epoch(
            epoch, [[encoded[i] for i in b] for b in batches], tokenizer.pad_token_id
        )
        stats.epoch_losses += [sum(losses) / len(losses)] if losses else []
        if len(losses) < len(batches):
            stats.stopped = True
            break
    model.eval()
    stats.optimizer_steps = loop.steps
    stats.tokens = _sum_ranks(loop.tokens, loop.device)
    stats.seconds = time.perf_counter() - loop.started
    stats.tokens_per_second = stats.tokens / max(stats.seconds, 1e-9)
    return stats


def auroc(scores: np.ndarray, positives: np.ndarray) -> float | None:
    """Area under the ROC curve (Mann-Whitney U, ties counted half); None with one class."""
    positives = positives.astype(bool)
    n_pos = int(positives.sum())
    n_neg = len(positives) - n_pos
    if n_pos == 0 or n_neg == 0:
        return None
    _, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
    # The average 1-based rank of each distinct score: tied scores share it.
    first_rank = np.cumsum(counts) - counts + 1
    ranks = (first_rank + (counts - 1) / 2)[inverse]
    u = ranks[positives].sum() - n_pos * (n_pos + 1) / 2
    return float(u / (n_pos * n_neg))


def step_metrics(labels: np.ndarray, probabilities: np.ndarray) -> dict[str, Any]:
    """Held-out step metrics from true ratings and (steps, 3) predicted probabilities."""
    predicted = np.array(LABELS)[probabilities.argmax(axis=1)] if len(labels) else labels
    label_counts = {str(c): int((labels == c).sum()) for c in LABELS}
    steps = len(labels)
    return {
        "held_out_steps": steps,
        "step_accuracy": float((predicted == labels).mean()) if steps else None,
        # The best constant guess on this very set: a bar that no learning can't clear.
        "baseline_accuracy": max(label_counts.values()) / steps if steps else None,
        "auroc_negative": auroc(probabilities[:, 0], labels == -1) if steps else None,
        "label_counts": label_counts,
        "predicted_counts": {str(c): int((predicted == c).sum()) for c in LABELS},
    }


def evaluate_steps(
    model: PRM, tokenizer: PreTrainedTokenizerBase, examples: list[Example], args: TrainingArgs
) -> dict[str, Any]:
    """Held-out step accuracy, the majority-class baseline, AUROC of P(-1) for -1 vs rest.

    Keys: held_out_examples, held_out_steps, step_accuracy, baseline_accuracy,
    auroc_negative (None when one class is missing), label_counts, predicted_counts,
    eval_tokens_per_second.
    """
    items = [(e.problem, e.steps) for e in examples]
    probabilities, throughput = step_probabilities(model, tokenizer, items, args)
    labels = np.array([label for e in examples for label in e.labels], dtype=np.int64)
    stacked = np.concatenate(probabilities) if probabilities else np.zeros((0, len(LABELS)))
    return {
        "held_out_examples": len(examples),
        **step_metrics(labels, stacked),
        "eval_tokens_per_second": throughput.tokens_per_second,
    }


def is_improvement(
    new_metrics: dict[str, Any],
    current_metrics: dict[str, Any] | None,
    *,
    auroc_tolerance: float = AUROC_TOLERANCE,
) -> bool:
    """Whether a new checkpoint may replace the current one.

    Rule: its held-out ``step_accuracy`` is not lower and its ``auroc_negative`` is not
    lower by more than ``auroc_tolerance``. A metric the current checkpoint lacks is not
    compared; one the new checkpoint lacks while the current has it counts as a
    regression. No current metrics at all: the new checkpoint wins.
    """
    if not current_metrics:
        return True
    tolerances = {"step_accuracy": 1e-12, "auroc_negative": auroc_tolerance}
    for key, tolerance in tolerances.items():
        current = current_metrics.get(key)
        if current is None:
            continue
        new = new_metrics.get(key)
        if new is None or new < current - tolerance:
            return False
    return True


def _versions() -> dict[str, str]:
    return {
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__,
        "numpy": np.__version__,
    }


def _write_json(path: Path, value: Any) -> None:
    # Metrics may hold dataclasses (FitStats) and numpy scalars.
    def plain(item: Any) -> Any:
        if dataclasses.is_dataclass(item) and not isinstance(item, type):
            return dataclasses.asdict(item)
        if isinstance(item, np.generic):
            return item.item()
        raise TypeError(f"not JSON serializable: {type(item).__name__}")

    path.write_text(json.dumps(value, indent=2, sort_keys=True, default=plain) + "\n")


def save_checkpoint(
    directory: str | os.PathLike[str],
    model: nn.Module,
    tokenizer: PreTrainedTokenizerBase,
    args: TrainingArgs,
    metrics: dict[str, Any],
    label_count: int,
) -> None:
    """Write a checkpoint that describes itself; under torchrun only rank 0 writes.

    Files: the decoder as a Hugging Face model (config.json, model.safetensors), the head
    (prm_head.safetensors), the tokenizer, training_args.json, metrics.json and meta.json.
    The directory is written beside the target and renamed into place, so a crash never
    leaves half a checkpoint; an existing checkpoint at the target is replaced.
    """
    if _rank_and_world()[0] != 0:
        return
    prm: PRM = model.module if isinstance(model, DistributedDataParallel) else model  # type: ignore[assignment]
    target = Path(directory)
    if target.exists() and not (target / "meta.json").exists():
        raise FileExistsError(f"{target} exists and is not a checkpoint")
    staging = target.with_name(f".{target.name}.partial-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    prm.backbone.save_pretrained(staging, safe_serialization=True)
    save_model(prm.head, str(staging / HEAD_FILE))
    tokenizer.save_pretrained(staging)
    _write_json(staging / "training_args.json", dataclasses.asdict(args))
    _write_json(staging / "metrics.json", metrics)
    _write_json(staging / "meta.json", _meta(prm, args, label_count))
    shutil.rmtree(target, ignore_errors=True)
    os.replace(staging, target)


def _meta(model: PRM, args: TrainingArgs, label_count: int) -> dict[str, Any]:
    return {
        "format": CHECKPOINT_FORMAT,
        "label_count": label_count,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "base_model": args.base_model,
        "model_type": model.backbone.config.model_type,
        "step_token": STEP_TOKEN,
        "classes": list(LABELS),
        "versions": _versions(),
    }


def load_checkpoint(
    directory: str | os.PathLike[str], device: Device | None = None
) -> tuple[PRM, PreTrainedTokenizerBase, TrainingArgs, dict[str, Any]]:
    """A saved PRM in eval mode on ``device`` (default: the saved args' device), with its
    tokenizer, training arguments and meta.json."""
    path = Path(directory)
    meta = json.loads((path / "meta.json").read_text())
    if meta.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"{path}: not a {CHECKPOINT_FORMAT} checkpoint")
    saved = json.loads((path / "training_args.json").read_text())
    known = {f.name for f in dataclasses.fields(TrainingArgs)}
    args = TrainingArgs(**{k: v for k, v in saved.items() if k in known})
    model = PRM(load_backbone(path))
    load_model(model.head, str(path / HEAD_FILE))
    tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    model.to(resolve_device(device or args.device)).eval()
    return model, tokenizer, args, meta
