"""The one encoding (labels on the step-end token, never one off), the tiny model, the PRM."""

import json
import os
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from transformers import (
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedTokenizerBase,
    PreTrainedTokenizerFast,
)

from worker.batching import collate, length_batches
from worker.build import build_model, build_tiny
from worker.device import use_expandable_cuda_segments
from worker.layout import (
    IGNORE_INDEX,
    STEP_TOKEN,
    build_tiny_tokenizer,
    byte_tokenizer,
    encode,
    encode_many,
    step_token_id,
)
from worker.model import PRM
from worker.training_args import MODE_TRAINING, TrainingArgs, training_args_for

TRICKY_STEPS = [
    "First, 2+3=5.",
    f"A step that quotes the marker {STEP_TOKEN} and <|pad|> <|eos|> inside it",
    "Unicode: ∑ x² ≤ π, naïve café, 数学, 🙂",
    "",
    "  spaces  \n and a newline ",
    "<|step",
]
TRICKY_LABELS = [1, 0, 1, 0, 1, -1]


@pytest.fixture(scope="module")
def tokenizer() -> PreTrainedTokenizerBase:
    return build_tiny_tokenizer()


def test_each_label_sits_on_a_step_end_token(tokenizer: PreTrainedTokenizerBase) -> None:
    encoded = encode(tokenizer, "Problem ∫?", TRICKY_STEPS, TRICKY_LABELS, max_length=4096)

    assert len(encoded.step_end_positions) == len(TRICKY_STEPS)
    assert [tokenizer.decode([encoded.input_ids[p]]) for p in encoded.step_end_positions] == [
        STEP_TOKEN
    ] * len(TRICKY_STEPS)
    labeled = [i for i, label in enumerate(encoded.label_ids) if label != IGNORE_INDEX]
    assert labeled == encoded.step_end_positions
    assert [encoded.label_ids[p] - 1 for p in labeled] == TRICKY_LABELS
    # Marker-like text inside a step stays text: only real step ends are step tokens.
    assert encoded.input_ids.count(step_token_id(tokenizer)) == len(TRICKY_STEPS)


def test_the_tokens_between_step_ends_spell_the_step(tokenizer: PreTrainedTokenizerBase) -> None:
    encoded = encode(tokenizer, "Problem", TRICKY_STEPS, None, max_length=4096)

    starts = [encoded.step_end_positions[0] - len(tokenizer.encode(TRICKY_STEPS[0]))]
    starts += [end + 1 for end in encoded.step_end_positions[:-1]]
    texts = [
        tokenizer.decode(encoded.input_ids[start:end])
        for start, end in zip(starts, encoded.step_end_positions, strict=True)
    ]
    assert texts == TRICKY_STEPS
    assert tokenizer.decode(encoded.input_ids[: starts[0]]) == "<|bos|>Problem\n"
    assert set(encoded.label_ids) == {IGNORE_INDEX}


@pytest.mark.parametrize("max_length", [2, 3, 8, 20, 40, 60, 90, 120, 200])
def test_truncation_keeps_every_kept_label_aligned(
    tokenizer: PreTrainedTokenizerBase, max_length: int
) -> None:
    full = encode(tokenizer, "A long problem statement.", TRICKY_STEPS, TRICKY_LABELS, 4096)
    encoded = encode(
        tokenizer, "A long problem statement.", TRICKY_STEPS, TRICKY_LABELS, max_length
    )

    assert len(encoded.input_ids) == len(encoded.label_ids) == min(max_length, len(full.input_ids))
    assert encoded.input_ids[0] == tokenizer.bos_token_id
    # The latest tokens survive, the same tokens as in the full layout.
    assert (
        encoded.input_ids[1:] == full.input_ids[len(full.input_ids) - len(encoded.input_ids) + 1 :]
    )
    kept = len(encoded.step_end_positions)
    assert kept >= 1, "the last step always survives"
    assert encoded.first_step + kept == len(TRICKY_STEPS)
    for offset, position in enumerate(encoded.step_end_positions):
        assert tokenizer.decode([encoded.input_ids[position]]) == STEP_TOKEN
        assert encoded.label_ids[position] - 1 == TRICKY_LABELS[encoded.first_step + offset]
    labeled = [i for i, label in enumerate(encoded.label_ids) if label != IGNORE_INDEX]
    assert labeled == encoded.step_end_positions


@pytest.mark.parametrize("max_length", [3, 20, 60, 4096])
def test_many_solutions_encode_as_each_alone(
    tokenizer: PreTrainedTokenizerBase, max_length: int
) -> None:
    """One tokenizer call for all: no piece runs into its neighbour, none goes missing."""
    solutions: list[tuple[str, list[str], list[int | None] | None]] = [
        ("Problem ∫?", TRICKY_STEPS, [*TRICKY_LABELS]),
        ("No steps", [], None),
        ("", ["only", "unlabeled"], None),
        ("A long problem statement.", TRICKY_STEPS[::-1], [None, 1, None, 0, -1, 1]),
    ]

    together = encode_many(tokenizer, solutions, max_length)

    assert together == [encode(tokenizer, p, s, labels, max_length) for p, s, labels in solutions]
    assert encode_many(tokenizer, [], max_length) == []


def test_labels_must_match_the_steps(tokenizer: PreTrainedTokenizerBase) -> None:
    with pytest.raises(ValueError, match="2 labels for 3 steps"):
        encode(tokenizer, "p", ["a", "b", "c"], [1, 1], 100)


def test_a_tokenizer_without_the_step_token_is_refused() -> None:
    with pytest.raises(ValueError, match="no <\\|step\\|> token"):
        step_token_id(byte_tokenizer())


def test_the_tiny_model_is_the_same_for_a_seed() -> None:
    first, _ = build_tiny(seed=7)
    again, _ = build_tiny(seed=7)
    other, _ = build_tiny(seed=8)

    for (name, a), b in zip(first.state_dict().items(), again.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
    assert not torch.equal(first.head.members[0].weight, other.head.members[0].weight)


def test_loss_is_cross_entropy_on_the_labeled_positions_only() -> None:
    model, tokenizer = build_tiny(seed=0)
    encoded = encode(tokenizer, "p", ["1+1=2", "1+1=3"], [1, -1], 64)
    input_ids = torch.tensor([encoded.input_ids])
    labels = torch.tensor([encoded.label_ids])
    mask = torch.ones_like(input_ids)

    output = model(input_ids, mask, labels)

    positions = encoded.step_end_positions
    expected = F.cross_entropy(output.logits[0, positions], torch.tensor([2, 0]))
    assert output.loss is not None
    assert torch.allclose(output.loss, expected)
    unlabeled = model(input_ids, mask, torch.full_like(labels, IGNORE_INDEX)).loss
    assert unlabeled is not None and unlabeled.item() == 0.0


def test_a_local_base_model_gets_the_step_token(tmp_path: Path) -> None:
    """A real base model is a local directory; its vocabulary grows by the step token."""
    # No step token and no pad token, like most base models.
    tokenizer = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=byte_tokenizer().backend_tokenizer,
        bos_token="<|bos|>",
        eos_token="<|eos|>",
    )
    vocabulary = len(tokenizer)
    assert STEP_TOKEN not in tokenizer.get_vocab()
    config = LlamaConfig(
        vocab_size=vocabulary,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
    )
    LlamaForCausalLM(config).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)

    model, loaded = build_model(TrainingArgs(base_model=str(tmp_path), device="cpu"))

    assert isinstance(model, PRM)
    assert loaded.pad_token == "<|eos|>"
    assert step_token_id(loaded) == vocabulary
    assert model.backbone.get_input_embeddings().num_embeddings == vocabulary + 1
    encoded = encode(loaded, "p", ["x", "y"], [1, 0], 64)
    logits = model(torch.tensor([encoded.input_ids]), torch.ones(1, len(encoded.input_ids))).logits
    assert logits.shape == (1, len(encoded.input_ids), 3)


def test_a_model_name_is_not_downloaded() -> None:
    with pytest.raises(FileNotFoundError, match="nothing is downloaded"):
        build_model(TrainingArgs(base_model="Qwen/Qwen2.5-Math-7B-Instruct"))


def test_collate_pads_right_and_counts_the_real_tokens(tokenizer: PreTrainedTokenizerBase) -> None:
    short = encode(tokenizer, "p", ["1+1=2"], [1], 512)
    long = encode(tokenizer, "problem", ["a step", "b step"], [1, -1], 512)

    batch = collate([short, long], tokenizer.pad_token_id, torch.device("cpu"))

    n = len(short.input_ids)
    assert batch.input_ids.shape == (2, len(long.input_ids))
    assert batch.tokens == n + len(long.input_ids) == int(batch.attention_mask.sum())
    assert batch.input_ids[0, :n].tolist() == short.input_ids
    assert set(batch.input_ids[0, n:].tolist()) == {tokenizer.pad_token_id}
    assert set(batch.label_ids[0, n:].tolist()) == {IGNORE_INDEX}
    assert batch.label_ids[1].tolist() == long.label_ids


def test_the_cuda_allocator_setting_is_a_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTORCH_CUDA_ALLOC_CONF", raising=False)
    use_expandable_cuda_segments()
    assert os.environ["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"

    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:128")
    use_expandable_cuda_segments()
    assert os.environ["PYTORCH_CUDA_ALLOC_CONF"] == "max_split_size_mb:128"


def test_length_batches_group_similar_lengths_within_limits() -> None:
    lengths = [50, 3, 7, 3, 100, 9, 8, 60, 2]

    batches = length_batches(lengths, max_sequences=3, max_tokens=120)

    assert sorted(i for batch in batches for i in batch) == list(range(len(lengths)))
    assert all(len(batch) <= 3 for batch in batches)
    assert all(len(b) * max(lengths[i] for i in b) <= 120 for b in batches if len(b) > 1)
    flat = [lengths[i] for batch in batches for i in batch]
    assert flat == sorted(lengths)
    assert [4] in batches, "a sequence longer than the token cap gets a batch of its own"


def test_training_args_suit_the_base_model(tmp_path: Path) -> None:
    tiny = training_args_for("tiny", epochs=3)
    local = training_args_for(str(tmp_path))

    assert (tiny.learning_rate, tiny.epochs, tiny.max_grad_norm) == (2e-3, 3, 0.0)
    # On this CPU a pretrained model trains its head on the frozen backbone.
    assert local == TrainingArgs(base_model=str(tmp_path), **MODE_TRAINING["head"], mode="head")
    full = training_args_for(str(tmp_path), mode="full", epochs=None)
    assert full == TrainingArgs(base_model=str(tmp_path), mode="full")
    assert training_args_for(str(tmp_path), mode="lora").learning_rate == 2e-4


@pytest.mark.parametrize(
    "change",
    [
        {"learning_rate": 0},
        {"epochs": 0},
        {"device": "tpu"},
        {"max_length": 1},
        {"warmup_ratio": 1.0},
        {"max_tokens_per_batch": 0},
        {"score_batch_size": 0},
    ],
)
def test_bad_training_arguments_fail_fast(change: dict[str, object]) -> None:
    with pytest.raises(ValueError, match=next(iter(change))):
        TrainingArgs(**change)  # type: ignore[arg-type]


def test_an_old_checkpoints_training_arguments_still_load(tmp_path: Path) -> None:
    """Checkpoints saved while TrainingArgs carried the split's held-out share load."""
    from worker.checkpoint import load_training_args

    saved = {"base_model": "tiny", "mode": "head", "held_out_fraction": 0.1, "epochs": 3}
    (tmp_path / "training_args.json").write_text(json.dumps(saved))
    args = load_training_args(tmp_path)
    assert (args.mode, args.epochs, args.head_readings) == ("head", 3, ("end@1",))
