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
            inputs = self.inputs(torch.tensor(features, dtype=torch.float32, device=self.device))
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
    member sees every step once per epoch). ``on_step`` hears after every optimizer step
    (step, epoch, loss) and stops training by returning True.
    """
    inputs = _standardize(head, features)
    weights = _class_weights(classes) if training.class_balance else None
    losses = np.zeros((len(head.members), training.epochs))
    steps = 0
    for index, member in enumerate(head.members):
        generator = torch.Generator().manual_seed(training.seed * 1_000 + index)
        _reset(member, generator)
        rows = torch.arange(len(classes))
        if len(head.members) > 1:
            rows = torch.randint(len(classes), (len(classes),), generator=generator)
        trainer = _MemberTrainer(member, training, schedule, len(rows), weights)
        for epoch in range(training.epochs):
            order = rows[torch.randperm(len(rows), generator=generator)]
            epoch_losses = []
            for batch in torch.split(order, training.batch_size):
                epoch_losses.append(trainer.step(inputs[batch], classes[batch]))
                steps += 1
                if on_step(steps, epoch, epoch_losses[-1]):
                    return HeadFit(_mean_losses(losses, index, epoch), True, steps)
            losses[index, epoch] = float(np.mean(epoch_losses))
    return HeadFit(losses.mean(axis=0).tolist(), False, steps)


def _mean_losses(losses: np.ndarray, member: int, epoch: int) -> list[float]:
    """The complete epochs' mean losses over the members that finished (stopped early)."""
    done: list[float] = (
        losses[0, :epoch] if member == 0 else losses[:member].mean(axis=0)
    ).tolist()
    return done


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


class _MemberTrainer:
    """AdamW on one member, the L2 prior on its matrices, the learning-rate schedule."""

    def __init__(
        self,
        member: nn.Module,
        training: HeadTraining,
        schedule: Schedule,
        rows: int,
        weights: torch.Tensor | None,
    ) -> None:
        self.member = member
        self.training = training
        self.weights = weights
        self.optimizer = torch.optim.AdamW(
            member.parameters(), lr=training.learning_rate, weight_decay=0.0
        )
        total = training.epochs * math.ceil(rows / training.batch_size)
        self.schedule = schedule(self.optimizer, total, training.warmup_ratio)
        self.matrices = [p for p in member.parameters() if p.ndim >= 2]

    def step(self, inputs: torch.Tensor, classes: torch.Tensor) -> float:
        logits = self.member(inputs)
        penalty = sum(p.square().sum() for p in self.matrices)
        loss = nn.functional.cross_entropy(logits, classes, weight=self.weights)
        loss = loss + self.training.weight_decay / 2 * penalty
        loss.backward()  # type: ignore[no-untyped-call]
        self.optimizer.step()
        self.schedule.step()
        self.optimizer.zero_grad(set_to_none=True)
        return float(loss.item())
