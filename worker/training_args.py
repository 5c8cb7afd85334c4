"""Training arguments: every knob of a run in ``TrainingArgs``, and the defaults per model and mode.

Three ways to train (``TrainingArgs.mode``): ``full`` trains every weight (the GPU default);
``head`` freezes the backbone, keeps only its first ``backbone_depth`` of layers, caches the
hidden state at every step end (worker/features.py) and trains the linear head alone (the
CPU default: a labeled step costs one forward pass, once); ``lora`` trains low-rank adapters
(peft) and merges them into the weights when the checkpoint is saved.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field
from pydantic.dataclasses import dataclass as pydantic_dataclass

from app.core.config import (
    BackboneDepth,
    BatchSize,
    Epochs,
    HeadHidden,
    HeadMembers,
    LearningRate,
    MaxLength,
    PackRows,
    Seed,
    WarmupRatio,
    WeightDecay,
)
from worker.device import Device, resolve_device
from worker.model import HEAD_READINGS, LAST_LAYER

TINY = "tiny"


Mode = Literal["full", "head", "lora"]


@pydantic_dataclass(config=ConfigDict(extra="forbid"))
class TrainingArgs:
    """Every knob of a training run; saved beside each checkpoint as training_args.json.

    The knobs a setting sets have that setting's bound (the types from app/core/config.py); a
    bad value raises ValueError (pydantic's ValidationError) naming the argument."""

    base_model: str = TINY
    """``"tiny"`` (built in code), a prepared model's name, or a local checkpoint directory."""
    mode: Mode = "full"
    """``full``, ``head`` or ``lora`` (see the module's docstring); ``training_args_for``
    picks ``full`` on CUDA and ``head`` on the CPU."""
    backbone_depth: BackboneDepth = 1.0
    """Share of the backbone's layers kept (the rest are dropped, also from the checkpoint);
    the head reads the last kept layer. Frozen, a middle layer tells good steps from bad
    better than the last one (BENCHMARKS.md, "PRM quality")."""
    learning_rate: LearningRate = 2e-5
    """Peak AdamW learning rate, reached after warmup and decayed linearly to zero."""
    epochs: Epochs = 2
    batch_size: BatchSize = 16
    """Sequences per optimizer step (per process under torchrun); in ``head`` mode, steps."""
    max_tokens_per_batch: Annotated[int, Field(ge=1)] | None = None
    """Also cap a batch's padded tokens (sequences x longest); None: batch_size alone."""
    length_pool_batches: Annotated[int, Field(ge=1)] = 4
    """Training batches group similar lengths within random pools of this many batches:
    1 gives random batches (most padding), more gives less padding but more alike batches."""
    max_length: MaxLength = 2048
    """Tokens per sequence; longer solutions lose their earliest tokens (see ``encode``)."""
    pack: bool = False
    """``full`` and ``lora`` modes: pack each batch's solutions into rows of ``max_length``
    tokens (``collate_packed``), each attending to itself alone, instead of padding them
    to the longest. No compute is spent on padding between solutions, and every row has
    the same width, so only the row count varies for torch.compile. Pays off when a batch
    holds many rows' worth of tokens: a short batch still fills one row of ``max_length``."""
    pack_rows: PackRows = 0
    """With ``pack``: 0 packs each batch of ``batch_size`` solutions, whose last row is part
    empty (18% of the positions at 16 solutions of PRM800K's shape); N > 0 makes each batch
    as many solutions as fill N rows (``fill_rows``), so that rows are nearly full and the
    solutions in a step vary."""
    weight_decay: WeightDecay = 0.01
    """AdamW decay, applied to matrices only (not biases or norms). In ``head`` mode an L2
    penalty ``weight_decay / 2 * |W|^2`` added to the loss instead: the probe's prior."""
    warmup_ratio: WarmupRatio = 0.05
    """Share of optimizer steps spent warming the learning rate up from zero."""
    max_grad_norm: Annotated[float, Field(ge=0)] = 1.0
    """Clip the gradient norm to this; 0 turns clipping off."""
    lora_rank: Annotated[int, Field(ge=1)] = 16
    """Rank of the adapters in ``lora`` mode (their scale alpha is twice the rank)."""
    seed: Seed = 0
    """Seeds the tiny model's weights, the head and batch order (the held-out split has
    its own seed: worker/split.py ``Split``)."""
    device: Device = "auto"
    """``auto`` takes CUDA when there is one."""
    bf16: bool | None = None
    """Precision: bfloat16 (autocast when training, bf16 weights when scoring) or float32.
    None: bf16 on a CUDA device that supports it and on a CPU with AMX tiles (twice as fast
    as float32 there); float32 elsewhere."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass: far less memory (a 1.5B model on an H100:
    24 GiB instead of 60), and there no slower, since it also eases memory traffic."""
    master_weights: bool = False
    """``full`` and ``lora`` modes: train the model in bf16 through float32 master copies of
    its trainable weights (worker/precision.py) instead of bf16 autocast over float32
    weights: half the activation memory and none of autocast's float32 elementwise work."""
    compile: bool = False
    """Put each decoder layer through ``torch.compile`` (``compile_layers``) while a fit
    trains (``full`` and ``lora`` modes) and while scoring runs: it fuses the elementwise
    chains between matrix products. The first batches pay for compiling one layer (and a new
    batch shape may recompile once): worth it for long runs."""
    score_batch_size: Annotated[int, Field(ge=1)] | None = None
    """Sequences per forward pass when scoring and evaluating; None: the device's choice
    (``score_batch_size_on``)."""
    head_readings: tuple[str, ...] = LAST_LAYER
    """``head`` mode: which of the cached readings (``HEAD_READINGS``) the head reads; the
    other modes read the last layer's state at the step end alone."""
    head_hidden: HeadHidden = 0
    """``head`` mode: 0 for linear members, else the width of each member's hidden layer."""
    head_members: HeadMembers = 1
    """``head`` mode: the members of the head's ensemble (worker/head.py)."""
    head_class_balance: bool = False
    """``head`` mode: weigh each class by the inverse of its share in training."""

    def __post_init__(self) -> None:
        # The one check across arguments: which readings the mode's features hold.
        readable = HEAD_READINGS if self.mode == "head" else LAST_LAYER
        if not self.head_readings or not set(self.head_readings) <= set(readable):
            raise ValueError(
                f"invalid training arguments: head_readings={','.join(self.head_readings)} "
                f"(the {self.mode} mode reads {', '.join(readable)})"
            )


TINY_TRAINING: dict[str, Any] = {
    "mode": "full",
    "learning_rate": 2e-3,
    "epochs": 15,
    "batch_size": 8,
    "max_length": 512,
    "warmup_ratio": 0.1,
    # Clipping at 1.0 suits pretrained models; it slows the tiny one down several-fold.
    "max_grad_norm": 0.0,
}
"""The tiny model learns from scratch: every weight, a far higher learning rate, more epochs."""

MODE_TRAINING: dict[Mode, dict[str, Any]] = {
    "full": {},
    # Five MLP members on every cached reading: many cheap epochs over steps, a firm L2
    # prior. Picked on ProcessBench's calibration problems, never its test ones, by the rule
    # BENCHMARKS.md ("PRM quality", issue 25) wrote down first; on the test problems it is
    # level with a linear probe on the last layer (F1) and a little ahead (step AUROC).
    "head": {
        "backbone_depth": 0.55,
        "learning_rate": 3e-3,
        "epochs": 30,
        "batch_size": 128,
        "weight_decay": 0.1,
        "warmup_ratio": 0.0,
        "head_readings": HEAD_READINGS,
        "head_hidden": 256,
        "head_members": 5,
    },
    "lora": {"learning_rate": 2e-4, "epochs": 2, "batch_size": 8},
}
"""Defaults per training mode, for pretrained base models."""


def default_mode(device: Device) -> Mode:
    """Full fine-tuning where there is a GPU; the frozen backbone and its head on the CPU."""
    return "full" if resolve_device(device).type == "cuda" else "head"


def training_args_for(base_model: str, **changes: Any) -> TrainingArgs:
    """TrainingArgs with the defaults that suit ``base_model`` and the mode, then ``changes``.

    ``mode`` missing or None picks the device's default (``default_mode``); other None
    values in ``changes`` mean "the default" too.
    """
    given = {key: value for key, value in changes.items() if value is not None}
    mode: Mode = given.get("mode") or default_mode(given.get("device", "auto"))
    defaults = TINY_TRAINING if base_model == TINY else MODE_TRAINING.get(mode, {})
    return TrainingArgs(**({"mode": mode} | defaults | given | {"base_model": base_model}))
