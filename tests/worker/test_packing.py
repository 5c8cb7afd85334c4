"""Packing: several solutions per row, each attending to itself alone (issue 27).

A packed batch must train as the padded batch of the same solutions does: the same loss
and the same gradients, for each attention implementation that transformers builds the
per-solution mask for (from where the position ids restart).
"""

from __future__ import annotations

import random

import pytest
import torch
from transformers import PreTrainedTokenizerBase

from tests.worker import PROBLEM, arithmetic_examples, deterministic_torch, tiny_args
from worker.batching import Batch, collate, collate_packed, fill_rows, pack_rows
from worker.build import build_tiny
from worker.layout import IGNORE_INDEX, Encoded, build_tiny_tokenizer, encode
from worker.model import PRM
from worker.train import fit, setup

CPU = torch.device("cpu")
WIDTH = 64
STEP_COUNTS = (7, 3, 2, 1, 1)
"""Solutions of 59, 35, 29, 23 and 23 tokens (a byte a token): in rows of 64 the longest
sits alone, 35 + 29 fill a row exactly, and 23 + 23 share one with a tail of padding."""
RATINGS = (1, 0, 1, -1, 1, 0, 1)


def _made(length: int, first_token: int) -> Encoded:
    """``length`` distinct tokens from ``first_token``, the last one labeled +1."""
    return Encoded(
        input_ids=list(range(first_token, first_token + length)),
        label_ids=[IGNORE_INDEX] * (length - 1) + [2],
        step_end_positions=[length - 1],
    )


def test_collate_packed_lays_each_sequence_whole_into_rows_of_the_width() -> None:
    encoded = [_made(5, 100), _made(3, 200), _made(4, 300), _made(2, 400)]

    batch = collate_packed(encoded, pad_token_id=0, device=CPU, width=8)

    # First-fit decreasing: 5 opens a row, 4 the next, 3 fills the first, 2 joins the 4.
    assert batch.input_ids.tolist() == [
        [100, 101, 102, 103, 104, 200, 201, 202],
        [300, 301, 302, 303, 400, 401, 0, 0],
    ]
    assert batch.position_ids is not None
    # The tail restarts at 0 too: a segment of its own.
    assert batch.position_ids.tolist() == [[0, 1, 2, 3, 4, 0, 1, 2], [0, 1, 2, 3, 0, 1, 0, 1]]
    ignored = IGNORE_INDEX
    assert batch.label_ids.tolist() == [
        [ignored, ignored, ignored, ignored, 2, ignored, ignored, 2],
        [ignored, ignored, ignored, 2, ignored, 2, ignored, ignored],
    ]
    assert batch.attention_mask is None
    assert batch.tokens == 14


@pytest.mark.parametrize("seed", range(5))
def test_pack_rows_places_every_sequence_once_and_no_two_rows_would_share_one(seed: int) -> None:
    rng = random.Random(seed)
    width = 100
    lengths = [rng.randint(1, width) for _ in range(rng.randint(1, 40))]

    rows = pack_rows(lengths, width)

    assert sorted(index for row in rows for index in row) == list(range(len(lengths)))
    loads = sorted(sum(lengths[i] for i in row) for row in rows)
    assert loads[-1] <= width
    # First fit opens a row only for a sequence that no earlier row had room for.
    assert len(loads) == 1 or loads[0] + loads[1] > width


def test_pack_rows_refuses_a_sequence_wider_than_a_row() -> None:
    with pytest.raises(ValueError, match="a sequence of 9 tokens does not fit a row of 8"):
        pack_rows([3, 9], 8)


@pytest.mark.parametrize("seed", range(5))
def test_fill_rows_batches_every_sequence_once_into_rows_it_nearly_fills(seed: int) -> None:
    rng = random.Random(seed)
    width, rows = 2048, 5
    # PRM800K's shape: about 545 tokens a solution, from 150 to 1,100.
    lengths = [rng.randint(150, 1100) for _ in range(300)]
    order = rng.sample(range(len(lengths)), len(lengths))

    batches = fill_rows(order, lengths, rows, width)

    assert sorted(i for batch in batches for i in batch) == list(range(len(lengths)))
    for batch in batches:
        assert len(pack_rows([lengths[i] for i in batch], width)) <= rows
    filled = [sum(lengths[i] for i in batch) / (rows * width) for batch in batches[:-1]]
    assert min(filled) > 0.85 and sum(filled) / len(filled) > 0.95
    # In about the order given: the first batch starts with the first sequence.
    assert batches[0][0] == order[0]


def test_fill_rows_refuses_a_sequence_wider_than_a_row() -> None:
    with pytest.raises(ValueError, match="a sequence of 9 tokens does not fit a row of 8"):
        fill_rows([0, 1], [3, 9], 2, 8)


def test_fit_on_filled_rows_trains_on_every_example_each_epoch() -> None:
    examples = arithmetic_examples(24, seed=6)
    args = tiny_args(epochs=4, batch_size=8, pack=True, pack_rows=1, max_length=256)
    with deterministic_torch():
        model, tokenizer, _ = setup(args)
        filled = fit(model, tokenizer, examples, args)
        padded_args = tiny_args(epochs=4, batch_size=8, max_length=256)
        model, tokenizer, _ = setup(padded_args)
        padded = fit(model, tokenizer, examples, padded_args)

    assert filled.tokens == padded.tokens  # every example once an epoch, either way
    assert filled.epoch_losses[-1] < filled.epoch_losses[0]
    assert filled.optimizer_steps != padded.optimizer_steps  # batches of their own sizes


def _solutions(tokenizer: PreTrainedTokenizerBase) -> list[Encoded]:
    return [
        encode(tokenizer, PROBLEM, ["1+2=3"] * count, list(RATINGS[:count]), WIDTH)
        for count in STEP_COUNTS
    ]


def _tiny(attention: str, device: torch.device = CPU) -> tuple[PRM, list[Encoded], int]:
    """The tiny PRM on ``attention``, the solutions of STEP_COUNTS and the pad token."""
    model, tokenizer = build_tiny(seed=0)
    model.backbone.set_attn_implementation(attention)
    return model.to(device), _solutions(tokenizer), tokenizer.pad_token_id


Trained = tuple[torch.Tensor, dict[str, torch.Tensor]]
"""A batch's loss and every parameter's gradient."""


def _padded_and_packed(
    attention: str, device: torch.device = CPU, bf16: bool = False
) -> list[Trained]:
    """The loss and gradients of the padded batch, then of the packed one, on one tiny PRM."""
    model, encoded, pad = _tiny(attention, device)
    batches = [collate(encoded, pad, device), collate_packed(encoded, pad, device, WIDTH)]
    assert batches[0].tokens == batches[1].tokens == sum(len(e.input_ids) for e in encoded)
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
        return [_loss_and_gradients(model, batch) for batch in batches]


def _loss_and_gradients(model: PRM, batch: Batch) -> Trained:
    model.zero_grad(set_to_none=True)
    loss = model(batch.input_ids, batch.attention_mask, batch.label_ids, batch.position_ids).loss
    assert loss is not None
    loss.backward()  # type: ignore[no-untyped-call]
    gradients = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    assert len(gradients) == len(list(model.parameters()))
    return loss.detach(), gradients


def test_the_solutions_pack_some_rows_shared_and_one_alone() -> None:
    """The layout the tests below compare: sequences share rows, one fills a row exactly."""
    lengths = [len(e.input_ids) for e in _solutions(build_tiny_tokenizer())]

    assert lengths == [59, 35, 29, 23, 23]
    assert pack_rows(lengths, WIDTH) == [[0], [1, 2], [3, 4]]


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_a_packed_batch_gives_the_padded_batchs_loss_and_gradients(attention: str) -> None:
    with deterministic_torch():
        padded, packed = _padded_and_packed(attention)

    torch.testing.assert_close(packed, padded, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_solutions_sharing_a_row_would_read_each_other_without_the_packed_mask(
    attention: str,
) -> None:
    """What the test above relies on: the mask, not luck, keeps the solutions apart."""
    with deterministic_torch(), torch.no_grad():
        model, encoded, pad = _tiny(attention)
        packed = collate_packed(encoded, pad, CPU, WIDTH)
        apart = model(packed.input_ids, None, packed.label_ids, packed.position_ids).loss
        # A 2D mask turns transformers' packed-sequence detection off: one causal mask a row.
        one_mask = torch.ones_like(packed.input_ids)
        across = model(packed.input_ids, one_mask, packed.label_ids, packed.position_ids).loss
        unpositioned = model(packed.input_ids, None, packed.label_ids).loss

    assert apart is not None and across is not None and unpositioned is not None
    # A hundred times the tolerance above (a leak moves this loss by about 4e-3).
    assert abs(float(across - apart)) > 1e-3
    assert abs(float(unpositioned - apart)) > 1e-3


def test_fit_packed_learns_as_fit_padded() -> None:
    examples = arithmetic_examples(24, seed=6)
    runs = {}
    for pack in (False, True):
        args = tiny_args(epochs=4, batch_size=8, pack=pack)
        with deterministic_torch():
            model, tokenizer, _ = setup(args)
            runs[pack] = fit(model, tokenizer, examples, args)

    packed, padded = runs[True], runs[False]
    assert packed.epoch_losses[-1] < packed.epoch_losses[0]
    assert packed.epoch_losses == pytest.approx(padded.epoch_losses, rel=1e-3)
    assert packed.tokens == padded.tokens and packed.optimizer_steps == padded.optimizer_steps


def _flex_attention_available() -> bool:
    from transformers.utils import is_torch_flex_attn_available

    return bool(is_torch_flex_attn_available())


@pytest.mark.gpu
@pytest.mark.parametrize("attention", ["sdpa", "eager", "flex_attention"])
def test_packed_matches_padded_on_cuda(attention: str) -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    if attention == "flex_attention" and not _flex_attention_available():
        pytest.skip("this torch has no flex_attention")
    cuda = torch.device("cuda")
    torch.manual_seed(0)

    padded, packed = _padded_and_packed(attention, cuda)
    (padded_loss, _), (packed_loss, _) = _padded_and_packed(attention, cuda, bf16=True)

    torch.testing.assert_close(packed, padded, atol=1e-5, rtol=1e-4)
    # bf16 keeps about 3 significant digits: this checks the bf16 path runs and agrees, the
    # float32 comparison above that the mask keeps the solutions apart.
    torch.testing.assert_close(packed_loss, padded_loss, atol=5e-3, rtol=5e-3)


@pytest.mark.gpu
def test_fit_packed_on_cuda_in_bf16() -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    args = tiny_args(device="cuda", bf16=True, epochs=4, batch_size=8, pack=True)
    model, tokenizer, _ = setup(args)

    stats = fit(model, tokenizer, arithmetic_examples(24, seed=6), args)

    assert stats.epoch_losses[-1] < stats.epoch_losses[0]
