"""bf16 weights trained through fp32 master copies (``TrainingArgs.master_weights``).

Autocast keeps a model's weights in float32 and casts them for each matrix product; every
other operation (norms, residual adds, activations, the casts themselves) then runs on
float32 tensors, and on an H100 that elementwise work, not the matrix products, bounds a
1.5B model's training step (BENCHMARKS.md, "On a GPU"). Here the model itself runs in bf16
for the length of a fit, and the optimizer steps float32 copies of the trainable weights:
bf16 alone would lose small updates (a bf16 weight of 1.0 cannot move by less than 2^-8),
the float32 copy keeps them. After the fit the model holds its float32 weights again, so
checkpoints and scoring see what they always saw.
"""

from __future__ import annotations

import torch
from torch import nn


class MasterWeights:
    """A model cast to bf16 while its trainable weights live on as float32 masters.

    ``masters`` are what the optimizer steps; ``grads_to_masters`` hands each bf16 gradient
    to its master (freeing the bf16 one) before the step, ``masters_to_model`` copies the
    stepped masters back after it, and ``restore`` ends the fit: every parameter back in its
    own dtype, the trainable ones with the masters' values.
    """

    def __init__(self, model: nn.Module) -> None:
        self.parameters = [p for p in model.parameters() if p.is_floating_point()]
        self.dtypes = [p.dtype for p in self.parameters]
        self.trained: list[torch.Tensor] = [p for p in self.parameters if p.requires_grad]
        self.masters: list[torch.Tensor] = [
            nn.Parameter(p.detach().float().clone()) for p in self.trained
        ]
        with torch.no_grad():
            for parameter in self.parameters:
                parameter.data = parameter.data.to(torch.bfloat16)

    def grads_to_masters(self) -> None:
        for parameter, master in zip(self.trained, self.masters, strict=True):
            grad = parameter.grad
            master.grad = None if grad is None else grad.float()
            parameter.grad = None

    @torch.no_grad()
    def masters_to_model(self) -> None:
        # One launch per group of tensors, casting on the way.
        torch._foreach_copy_(self.trained, self.masters)

    @torch.no_grad()
    def restore(self) -> None:
        masters = {id(p): master for p, master in zip(self.trained, self.masters, strict=True)}
        for parameter, dtype in zip(self.parameters, self.dtypes, strict=True):
            parameter.data = masters.get(id(parameter), parameter.data).detach().to(dtype)
            parameter.grad = None
