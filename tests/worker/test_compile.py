"""fit with ``compile``: each decoder layer through torch.compile (worker/train.py)."""

import pytest
import torch
from torch._dynamo.utils import counters

from tests.worker import arithmetic_examples, tiny_args
from worker.model import decoder_layers
from worker.train import fit, setup, split_by_problem


def test_a_compiled_fit_learns_as_the_eager_one_and_gives_the_layers_back() -> None:
    train, _ = split_by_problem(arithmetic_examples(40, seed=2), 0.25, 0)
    losses = {}
    for compiled in (False, True):
        args = tiny_args(pack=True, compile=compiled, epochs=1)
        model, tokenizer, _device = setup(args)
        layers = list(decoder_layers(model.backbone))
        torch._dynamo.reset()
        counters.clear()

        losses[compiled] = fit(model, tokenizer, train, args).epoch_losses

        assert list(decoder_layers(model.backbone)) == layers  # the plain layers again
        # Compiled: one graph serves both layers; eager: none at all.
        assert counters["stats"]["unique_graphs"] == (1 if compiled else 0)
    assert losses[True] == pytest.approx(losses[False], rel=1e-4)
