"""The models bench/prm_quality.py judges, and how each is trained: the constant baseline, the
tiny decoder, and the worker's own models on a pretrained backbone (head, full, LoRA)."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from transformers import PreTrainedTokenizerBase

from app.core.config import get_settings
from bench.prm_quality_data import Probabilities, Scored, Split, examples
from worker.device import Device
from worker.features import FeatureCache, cache_for
from worker.layout import LABELS
from worker.model import HEAD_READINGS, LAST_LAYER, PRM
from worker.pretrained import resolve_base_model
from worker.score import Throughput, fill_cache, step_probabilities
from worker.train import Example, fit, setup
from worker.training_args import TINY, TrainingArgs, training_args_for

DEFAULT_BASE = "smollm2-135m"


FULL = "smollm2-135m-full"


LORA = "smollm2-135m-lora"


MODELS = ("constant", "tiny", "smollm2-135m", FULL, LORA)


SEEDLESS = ("constant",)
"""Models that no training seed changes: trained once whatever ``--train-seeds`` says."""


DEFAULT_MODELS = ("constant", "tiny", "smollm2-135m")


LINEAR: dict[str, Any] = {"head_hidden": 0, "head_members": 1, "head_class_balance": False}
"""Every head field a preset does not name: whatever the worker's default head becomes, a
preset stays the head it was measured as."""


ALL_READINGS = LINEAR | {"head_readings": HEAD_READINGS}


HEADS: dict[str, dict[str, Any]] = {
    "last": LINEAR | {"head_readings": LAST_LAYER},
    "ends": LINEAR | {"head_readings": ("end@1", "end@0.75", "end@0.5")},
    "all": ALL_READINGS,
    "all-l2x10": ALL_READINGS | {"weight_decay": 1.0},
    "all-balanced": ALL_READINGS | {"head_class_balance": True},
    "all-mlp": ALL_READINGS | {"head_hidden": 256},
    "all-x5": ALL_READINGS | {"head_members": 5},
    "all-mlp-x5": ALL_READINGS | {"head_hidden": 256, "head_members": 5},
}
"""Heads on SmolLM2's cached features, each a model ``smollm2-135m:<name>``: what they read
(worker/model.py ``HEAD_READINGS``) and how (worker/head.py), the rest as the CPU default.
``smollm2-135m`` alone is the worker's default head."""


@dataclass
class Trained:
    name: str
    probabilities: Probabilities
    train_seconds: float
    notes: dict[str, Any] = field(default_factory=dict)


def train_constant(data: Split, _options: argparse.Namespace) -> Trained:
    """The training set's class shares for every step."""
    labels = [label for e in examples(data.train) for _, label in e.labeled]
    shares = np.array([labels.count(c) for c in LABELS], dtype=np.float64) / len(labels)

    def probabilities(items: Sequence[Scored]) -> list[np.ndarray]:
        return [np.tile(shares, (len(i.steps), 1)) for i in items]

    return Trained("constant", probabilities, 0.0, {"class_shares": shares.tolist()})


def train_worker_model(
    name: str,
    args: TrainingArgs,
    data: Split,
    deadline: float | None,
    cache_dir: Path,
    extra: Sequence[Example] = (),
    judged_extra: Sequence[Example] = (),
) -> Trained:
    """Train with the worker's ``fit`` (and its feature cache in head mode) on the split's
    training items and ``extra`` examples; ``deadline`` in CPU seconds. ``judged_extra``
    (examples scored later, e.g. PRM800K phase 1's test steps) warm the cache too."""
    started = time.process_time()
    started_wall = time.perf_counter()
    model, tokenizer, _device = setup(args)
    cache = cache_for(model, args, cache_dir)
    if cache is not None:
        warm(
            model,
            tokenizer,
            args,
            cache,
            [*data.train, *extra, *data.calibration, *data.test, *judged_extra],
        )
    stop = None if deadline is None else (lambda: time.process_time() - started > deadline)
    training = [*examples(data.train), *extra]
    stats = fit(model, tokenizer, training, args, should_stop=stop, cache=cache)
    train_seconds = time.process_time() - started
    # CPU time leaves out a GPU's work: the wall clock says what a GPU run took.
    train_wall_seconds = time.perf_counter() - started_wall

    def probabilities(items: Sequence[Scored]) -> list[np.ndarray]:
        scored, _ = step_probabilities(
            model, tokenizer, [(i.problem, i.steps) for i in items], args, cache
        )
        return scored

    notes = {
        "mode": args.mode,
        "base_model": Path(args.base_model).name,
        "extra_examples": len(extra),
        **(
            {
                "readings": list(args.head_readings),
                "members": args.head_members,
                "hidden": args.head_hidden,
                "class_balance": args.head_class_balance,
                "weight_decay": args.weight_decay,
            }
            if args.mode == "head"
            else {}
        ),
        "optimizer_steps": stats.optimizer_steps,
        "epochs": stats.epochs,
        "stopped_at_deadline": stats.stopped,
        "labeled_steps": stats.labeled_steps,
        "feature_seconds": round(stats.feature_seconds, 1),
        "device": args.device,
        "max_length": args.max_length,
        "train_wall_seconds": round(train_wall_seconds, 1),
    }
    return Trained(name, probabilities, train_seconds, notes)


def warm(
    model: PRM,
    tokenizer: PreTrainedTokenizerBase,
    args: TrainingArgs,
    cache: FeatureCache,
    items: Sequence[Scored],
) -> None:
    """Fill the feature cache first, saying how far it is: a cold cache takes long."""
    started = time.perf_counter()

    def report(done: int, throughput: Throughput) -> None:
        print(
            f"[{time.perf_counter() - started:7.1f} s] features: {done} of {len(items)} "
            f"solutions, {throughput.tokens_per_second:.0f} tokens/s",
            file=sys.stderr,
            flush=True,
        )

    fill_cache(model, tokenizer, [(i.problem, i.steps) for i in items], args, cache, report)


def known_models() -> list[str]:
    return [*MODELS, *(f"smollm2-135m:{head}" for head in HEADS)]


def train_model(name: str, data: Split, options: argparse.Namespace, train_seed: int) -> Trained:
    if name == "constant":
        return train_constant(data, options)
    if name == "tiny":
        args = training_args_for(
            TINY, device=options.device, epochs=options.tiny_epochs, seed=train_seed
        )
        return train_worker_model(name, args, data, None, options.cache_dir)
    directory = resolve_base_model(options.base_model, get_settings().model_dir)
    args = smollm2_args(name, directory, options.device, train_seed)
    deadline = cpu_deadline(args, options.lora_minutes)
    return train_worker_model(
        name,
        args,
        data,
        deadline,
        options.cache_dir,
        options.extra_examples,
        options.phase1_test,
    )


def cpu_deadline(args: TrainingArgs, minutes: float) -> float | None:
    """The CPU seconds fine-tuning may take on the CPU; None for a head or on a GPU.

    It counts this process's CPU time: on a GPU that is the launching thread's, not the
    training's, and there the modes run every epoch they ask for in minutes anyway.
    """
    return minutes * 60 if args.mode != "head" and args.device == "cpu" else None


def smollm2_args(name: str, directory: str, device: Device, train_seed: int) -> TrainingArgs:
    """SmolLM2's training arguments for ``name``: a head (``smollm2-135m`` or a preset of
    ``HEADS``), ``FULL`` or ``LORA``; each the worker's defaults for its mode otherwise."""
    on_gpu = device == "cuda"
    if name in (FULL, LORA):
        # 1,024 tokens keep the CPU's time down; a GPU takes the worker's 2,048.
        return training_args_for(
            directory,
            mode="full" if name == FULL else "lora",
            device=device,
            max_length=2048 if on_gpu else 1024,
            seed=train_seed,
        )
    head = HEADS.get(name.removeprefix("smollm2-135m:"), {})
    # float32 on a GPU, as the CPU default is without AMX tiles (uses_bf16): the features,
    # and so the cache and the head, of the CPU table's float32 runs, not bf16 ones.
    return training_args_for(
        directory,
        mode="head",
        device=device,
        bf16=False if on_gpu else None,
        seed=train_seed,
        **head,
    )
