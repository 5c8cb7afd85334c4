"""bf16 weights with float32 masters (worker/precision.py) and fit's use of them."""

import numpy as np
import pytest
import torch
from torch import nn

from tests.worker import arithmetic_examples, deterministic_torch, tiny_args
from worker.precision import MasterWeights
from worker.train import fit, setup, split_by_problem


def _linear(value: float) -> nn.Linear:
    layer = nn.Linear(1, 1, bias=True)
    with torch.no_grad():
        layer.weight.fill_(value)
        layer.bias.fill_(value)
    return layer


def test_the_model_runs_in_bf16_and_the_masters_keep_float32_values() -> None:
    layer = _linear(1 / 3)
    layer.bias.requires_grad_(False)

    masters = MasterWeights(layer)

    assert layer.weight.dtype == layer.bias.dtype == torch.bfloat16
    assert [m.dtype for m in masters.masters] == [torch.float32]  # the trainable weight only
    assert masters.masters[0].item() == pytest.approx(1 / 3, abs=1e-7)
    masters.restore()
    assert layer.weight.dtype == layer.bias.dtype == torch.float32
    assert layer.weight.item() == pytest.approx(1 / 3, abs=1e-7)  # not bf16's 0.3340
    assert layer.bias.item() != pytest.approx(1 / 3, abs=1e-5)  # frozen: went through bf16


def test_an_update_too_small_for_bf16_is_kept() -> None:
    """bf16 has 8 bits of mantissa: 1.0 - 1e-4 rounds back to 1.0, the master keeps it."""
    layer = _linear(1.0)
    masters = MasterWeights(layer)
    optimizer = torch.optim.SGD(masters.masters, lr=1e-4)

    for _ in range(3):
        loss = layer(torch.ones(1, 1, dtype=torch.bfloat16)).sum()  # d loss / d w = 1
        loss.backward()
        masters.grads_to_masters()
        assert layer.weight.grad is None and masters.masters[0].grad is not None
        optimizer.step()
        optimizer.zero_grad()
        masters.masters_to_model()
        assert layer.weight.item() == 1.0  # the bf16 copy cannot show the change

    masters.restore()
    assert layer.weight.item() == pytest.approx(1.0 - 3e-4, abs=1e-6)


def test_fit_with_master_weights_learns_and_leaves_float32_weights() -> None:
    # Three epochs take the last epoch's loss to 0.46 of the first's (six: 0.48, in twice
    # the time): learning shows by then, and the test asks for 0.8.
    args = tiny_args(master_weights=True, epochs=3)
    train, _ = split_by_problem(arithmetic_examples(120, seed=2), 0.25, 0)
    with deterministic_torch(0):
        model, tokenizer, _device = setup(args)
        before = {name: p.detach().clone() for name, p in model.named_parameters()}
        stats = fit(model, tokenizer, train, args)

    assert all(np.isfinite(stats.epoch_losses))
    assert stats.epoch_losses[-1] < 0.8 * stats.epoch_losses[0]
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    moved = [not torch.equal(p, before[name]) for name, p in model.named_parameters()]
    assert all(moved)


def test_fit_that_fails_still_gives_the_weights_back_in_float32() -> None:
    args = tiny_args(master_weights=True, epochs=1)
    train, _ = split_by_problem(arithmetic_examples(40, seed=2), 0.25, 0)
    model, tokenizer, _device = setup(args)

    def stop_with_an_error() -> bool:
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError, match="interrupted"):
        fit(model, tokenizer, train, args, should_stop=stop_with_an_error)
    assert {p.dtype for p in model.parameters()} == {torch.float32}


@pytest.mark.gpu
def test_fit_with_master_weights_on_cuda() -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    args = tiny_args(device="cuda", master_weights=True, epochs=6)
    train, _ = split_by_problem(arithmetic_examples(120, seed=2), 0.25, 0)
    model, tokenizer, _device = setup(args)

    stats = fit(model, tokenizer, train, args)

    assert stats.epoch_losses[-1] < 0.8 * stats.epoch_losses[0]
    assert {p.dtype for p in model.parameters()} == {torch.float32}


@pytest.mark.gpu
def test_fit_compiled_on_packed_rows_on_cuda() -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    args = tiny_args(device="cuda", master_weights=True, pack=True, compile=True, epochs=6)
    train, _ = split_by_problem(arithmetic_examples(120, seed=2), 0.25, 0)
    model, tokenizer, _device = setup(args)

    stats = fit(model, tokenizer, train, args)

    assert stats.epoch_losses[-1] < 0.8 * stats.epoch_losses[0]
