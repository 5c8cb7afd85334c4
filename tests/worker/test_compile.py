"""``compile``: each decoder layer through torch.compile (worker/model.py ``compile_layers``)
while a fit trains and while scoring runs."""

from dataclasses import replace

import numpy as np
import pytest
import torch
from torch._dynamo.utils import counters

from tests.worker import arithmetic_examples, tiny_args
from worker.model import decoder_layers
from worker.score import step_probabilities
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


def test_compiled_scoring_gives_the_eager_probabilities_and_the_layers_back() -> None:
    train, held_out = split_by_problem(arithmetic_examples(40, seed=2), 0.25, 0)
    args = tiny_args(epochs=1)
    model, tokenizer, _device = setup(args)
    fit(model, tokenizer, train, args)
    items = [(e.problem, e.steps) for e in held_out]
    layers = list(decoder_layers(model.backbone))
    eager, _ = step_probabilities(model, tokenizer, items, args)
    torch._dynamo.reset()
    counters.clear()

    compiled, _ = step_probabilities(model, tokenizer, items, replace(args, compile=True))

    assert counters["stats"]["unique_graphs"] >= 1  # it did compile
    assert list(decoder_layers(model.backbone)) == layers
    for expected, got in zip(eager, compiled, strict=True):
        np.testing.assert_allclose(got, expected, atol=1e-5)


@pytest.mark.gpu
def test_compiled_bf16_scoring_on_cuda_agrees_with_eager() -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    _, held_out = split_by_problem(arithmetic_examples(40, seed=2), 0.25, 0)
    args = tiny_args(device="cuda", bf16=True)
    model, tokenizer, _device = setup(args)
    items = [(e.problem, e.steps) for e in held_out]
    eager, _ = step_probabilities(model, tokenizer, items, args)

    compiled, _ = step_probabilities(model, tokenizer, items, replace(args, compile=True))

    for expected, got in zip(eager, compiled, strict=True):
        np.testing.assert_allclose(got, expected, atol=0.02)  # bf16 rounds either way
