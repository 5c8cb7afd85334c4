"""The network: a causal decoder's hidden states, read at each step end, and a 3-class head.

A PRM here is a causal decoder with a 3-class token-classification head (worker/head.py);
the head's output at a step's end token (worker/layout.py) is the step's score.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple, cast

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call
from transformers import Cache, PreTrainedModel

from worker.head import StepHead
from worker.layout import IGNORE_INDEX

LAST_LAYER: tuple[str, ...] = ("end@1",)
"""The one reading of ``full`` and ``lora`` modes: the last layer's state at each step end."""
HEAD_READINGS: tuple[str, ...] = ("end@1", "end@0.75", "end@0.5", "mean@1", "mean@0.75")
"""What ``head`` mode reads of the frozen backbone for each step, once, into the feature
cache: ``end@S`` is the hidden state at the step's end token after the share S of the kept
layers, ``mean@S`` the mean of that state over the step's tokens (its text and end token);
each through the backbone's final norm, as its last layer's output is. One forward pass
gives them all; the head picks what it reads (``TrainingArgs.head_readings``)."""


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
