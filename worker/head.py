"""The PRM's head: which step features it reads, and how it turns them into ratings.

In ``full`` and ``lora`` modes the head is one linear layer on the last layer's hidden state,
trained with the backbone (``StepHead`` with its defaults). In ``head`` mode the backbone is
frozen and every step's features are cached as several readings of it (worker/model.py
``HEAD_READINGS``); the head reads some of them (``TrainingArgs.head_readings``),
standardizes them, and maps them to the three classes with one or more members (linear
layers, or small MLPs with ``head_hidden``). With several members (``head_members``) each is
trained on its own bootstrap resample of the labeled steps, from its own initialization:
their mean is the PRM's prediction and their disagreement its uncertainty about what the
labels so far do not pin down (ActPRM's ensemble on one backbone; worker/select.py uses it).
Training one takes seconds: it never runs the backbone.
"""

from __future__ import annotations

import copy
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import numpy as np
import torch
from torch import nn

NUM_CLASSES = 3
"""-1, 0, +1 in class order (class index = rating + 1)."""


class StepHead(nn.Module):
    """Step features to class logits: columns picked, standardized, one or more members."""

    columns: torch.Tensor | None
    shift: torch.Tensor | None
    scale: torch.Tensor | None

    def __init__(
        self,
        width: int,
        columns: list[int] | None = None,
        hidden: int = 0,
        members: int = 1,
        standardized: bool = False,
    ) -> None:
        super().__init__()
        self.register_buffer("columns", None if columns is None else torch.tensor(columns))
        inputs = width if columns is None else len(columns)
        self.register_buffer("shift", torch.zeros(inputs) if standardized else None)
        self.register_buffer("scale", torch.ones(inputs) if standardized else None)
        self.members = nn.ModuleList(_member(inputs, hidden) for _ in range(members))

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    def inputs(self, features: torch.Tensor) -> torch.Tensor:
        """The columns this head reads, standardized as in training."""
        if self.columns is not None:
            features = features.index_select(-1, self.columns)
        if self.shift is not None and self.scale is not None:
            features = (features - self.shift) / self.scale
        return features

    def member_logits(self, features: torch.Tensor) -> torch.Tensor:
        """(members, ..., 3)."""
        inputs = self.inputs(features)
        return torch.stack([member(inputs) for member in self.members])

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """(..., 3) logits: a lone member's own, or the log of the members' mean softmax."""
        logits = self.member_logits(features)
        if len(self.members) == 1:
            return logits[0]
        return torch.logsumexp(logits.log_softmax(-1), dim=0) - math.log(len(self.members))

    def member_probabilities(self, features: np.ndarray) -> np.ndarray:
        """(members, steps, 3) class probabilities, in float64 so that tiny step scores stay
        positive in long products."""
        exact = copy.deepcopy(self).to(device="cpu", dtype=torch.float64)
        with torch.no_grad():
            logits = exact.member_logits(torch.from_numpy(features.astype(np.float64)))
            probabilities: np.ndarray = logits.softmax(-1).numpy()
        return probabilities

    def probabilities(self, features: np.ndarray) -> np.ndarray:
        """(steps, 3): the members' mean class probabilities."""
        mean: np.ndarray = self.member_probabilities(features).mean(axis=0)
        return mean

    def embedding(self, features: np.ndarray) -> np.ndarray:
        """Where a solution sits in what the head reads: the mean of its steps' standardized
        inputs, projected to ``EMBEDDING_WIDTH`` dimensions by a fixed random matrix (which
        keeps distances, nearly: Johnson and Lindenstrauss), so a pool's embeddings stay
        small. Zeros for a solution with no steps."""
        with torch.no_grad():
            inputs = self.inputs(torch.from_numpy(features).to(self.device, torch.float32))
        if not len(inputs):
            return np.zeros(EMBEDDING_WIDTH, dtype=np.float32)
        mean = inputs.mean(dim=0).cpu().numpy()
        projected: np.ndarray = mean @ _projection(len(mean))
        return projected


EMBEDDING_WIDTH = 64


@functools.cache
def _projection(width: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    projection: np.ndarray = rng.standard_normal((width, EMBEDDING_WIDTH), dtype=np.float32)
    return projection / np.float32(np.sqrt(EMBEDDING_WIDTH))


def _member(inputs: int, hidden: int) -> nn.Module:
    if hidden == 0:
        return nn.Linear(inputs, NUM_CLASSES)
    return nn.Sequential(nn.Linear(inputs, hidden), nn.GELU(), nn.Linear(hidden, NUM_CLASSES))


def load_head_state(head: StepHead, state: dict[str, torch.Tensor]) -> None:
    """Load a saved head; a plain linear head from before heads had members loads as one."""
    if set(state) == {"weight", "bias"}:
        state = {f"members.0.{name}": value for name, value in state.items()}
    head.load_state_dict(state)


@dataclass(frozen=True)
class HeadTraining:
    """How ``fit_head`` trains: the knobs of TrainingArgs that concern the head."""

    learning_rate: float
    epochs: int
    batch_size: int
    weight_decay: float
    """An L2 penalty ``weight_decay / 2 * |W|^2`` on the matrices: the head's prior."""
    warmup_ratio: float
    seed: int
    class_balance: bool = False
    """Weigh each class by the inverse of its share, so that the rare -1 steps count as
    much as the +1 steps."""


Schedule = Callable[[torch.optim.Optimizer, int, float], torch.optim.lr_scheduler.LambdaLR]


@dataclass
class HeadFit:
    epoch_losses: list[float]
    """Each epoch's mean loss, averaged over the members."""
    stopped: bool
    optimizer_steps: int


def fit_head(
    head: StepHead,
    features: torch.Tensor,
    classes: torch.Tensor,
    training: HeadTraining,
    schedule: Schedule,
    on_step: Callable[[int, int, float], bool] = lambda _step, _epoch, _loss: False,
) -> HeadFit:
    """Train ``head`` on labeled steps: (steps, width) raw features and their classes.

    The standardization comes from all the steps; each member then trains from its own
    seed, on a bootstrap resample of the steps when there are several members (a lone
    member sees every step once per epoch). The members train side by side
    (``_StackedMembers``), each on its own batches, as if one after another. ``on_step``
    hears after every optimizer step of the members (step, epoch, loss), counting one step
    per member, and stops training by returning True.
    """
    inputs = _standardize(head, features)
    weights = _class_weights(classes) if training.class_balance else None
    generators, rows = [], []
    for index, member in enumerate(head.members):
        generator = torch.Generator().manual_seed(training.seed * 1_000 + index)
        _reset(member, generator)
        rows.append(
            torch.randint(len(classes), (len(classes),), generator=generator)
            if len(head.members) > 1
            else torch.arange(len(classes))
        )
        generators.append(generator)
    trainer = _StackedMembers(head.members, training, schedule, len(classes), weights)
    losses = np.zeros((len(head.members), training.epochs))
    steps = 0
    try:
        for epoch in range(training.epochs):
            orders = torch.stack(
                [
                    r[torch.randperm(len(r), generator=g)]
                    for r, g in zip(rows, generators, strict=True)
                ]
            )
            epoch_losses = []
            for batch in torch.split(orders, training.batch_size, dim=1):
                epoch_losses.append(trainer.step(inputs[batch], classes[batch]))
                steps += len(head.members)
                if on_step(steps, epoch, float(epoch_losses[-1].mean())):
                    return HeadFit(losses[:, :epoch].mean(axis=0).tolist(), True, steps)
            losses[:, epoch] = np.mean(epoch_losses, axis=0)
    finally:
        trainer.copy_back()
    return HeadFit(losses.mean(axis=0).tolist(), False, steps)


def _standardize(head: StepHead, features: torch.Tensor) -> torch.Tensor:
    picked = features if head.columns is None else features.index_select(-1, head.columns)
    if head.shift is None or head.scale is None:
        return picked
    with torch.no_grad():
        head.shift.copy_(picked.mean(dim=0))
        head.scale.copy_(picked.std(dim=0, unbiased=False).clamp(min=1e-6))
    return (picked - head.shift) / head.scale


def _class_weights(classes: torch.Tensor) -> torch.Tensor:
    counts = torch.bincount(classes, minlength=NUM_CLASSES).float()
    present = counts > 0
    weights = torch.zeros(NUM_CLASSES)
    weights[present] = counts.sum() / (present.sum() * counts[present])
    return weights


def _reset(member: nn.Module, generator: torch.Generator) -> None:
    """Initialize like nn.Linear does, from ``generator``: each member starts elsewhere."""
    for layer in member.modules():
        if isinstance(layer, nn.Linear):
            bound = 1 / math.sqrt(layer.in_features)
            with torch.no_grad():
                layer.weight.uniform_(-bound, bound, generator=generator)
                layer.bias.uniform_(-bound, bound, generator=generator)


class _StackedMembers:
    """The members' weights stacked, layer by layer, into one tensor each: one batched
    product per layer and one AdamW step train them all. Each member's gradient is its own
    loss's (the losses are summed; no weight is shared) and AdamW works element by element,
    so each member learns as it would alone, in a fifth of the small steps' overhead.
    ``copy_back`` puts the weights into the members."""

    def __init__(
        self,
        members: nn.ModuleList,
        training: HeadTraining,
        schedule: Schedule,
        rows: int,
        weights: torch.Tensor | None,
    ) -> None:
        self.layers = [_layers(member) for member in members]
        # Per position in a member: every member's linear layer there, or None (activation).
        self.positions: list[list[nn.Linear] | None] = [
            [cast(nn.Linear, layers[k]) for layers in self.layers]
            if isinstance(layer, nn.Linear)
            else None
            for k, layer in enumerate(self.layers[0])
        ]
        self.stacked = [
            None
            if same is None
            else (_stack([x.weight for x in same]), _stack([x.bias for x in same]))
            for same in self.positions
        ]
        parameters = [p for pair in self.stacked if pair is not None for p in pair]
        self.matrices = [pair[0] for pair in self.stacked if pair is not None]
        self.training = training
        self.weights = weights
        self.optimizer = torch.optim.AdamW(parameters, lr=training.learning_rate, weight_decay=0.0)
        total = training.epochs * math.ceil(rows / training.batch_size)
        self.schedule = schedule(self.optimizer, total, training.warmup_ratio)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        """(members, batch, width) inputs to (members, batch, 3) logits."""
        hidden = inputs
        for layer, pair in zip(self.layers[0], self.stacked, strict=True):
            if pair is None:
                hidden = layer(hidden)  # an activation, the same for every member
            else:
                weight, bias = pair
                hidden = torch.baddbmm(bias.unsqueeze(1), hidden, weight.transpose(1, 2))
        return hidden

    def step(self, inputs: torch.Tensor, classes: torch.Tensor) -> np.ndarray:
        """One AdamW step of every member on its own batch; each member's loss."""
        logits = self.forward(inputs)
        penalties = sum(m.square().sum(dim=(1, 2)) for m in self.matrices)
        losses = torch.stack(
            [
                nn.functional.cross_entropy(member_logits, member_classes, weight=self.weights)
                for member_logits, member_classes in zip(logits, classes, strict=True)
            ]
        )
        losses = losses + self.training.weight_decay / 2 * penalties
        losses.sum().backward()  # type: ignore[no-untyped-call]
        self.optimizer.step()
        self.schedule.step()
        self.optimizer.zero_grad(set_to_none=True)
        return losses.detach().numpy()

    def copy_back(self) -> None:
        with torch.no_grad():
            for same, pair in zip(self.positions, self.stacked, strict=True):
                if same is None or pair is None:
                    continue
                for index, linear in enumerate(same):
                    linear.weight.copy_(pair[0][index])
                    linear.bias.copy_(pair[1][index])


def _stack(tensors: list[torch.Tensor]) -> torch.Tensor:
    return torch.stack([t.detach() for t in tensors]).requires_grad_()


def _layers(member: nn.Module) -> list[nn.Module]:
    """A member's layers in order: a linear layer alone, or an MLP's."""
    return list(member) if isinstance(member, nn.Sequential) else [member]
