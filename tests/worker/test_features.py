"""Step features: what head mode reads of the backbone, and the cache that keeps it."""

import copy
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModel, PreTrainedTokenizerBase, Qwen2Config

from tests.worker import tiny_args
from worker import score as scoring
from worker.batching import collate
from worker.build import keep_layers
from worker.features import FeatureCache, cache_for, prefix_keys, sequence_key
from worker.layout import build_tiny_tokenizer, encode
from worker.model import HEAD_READINGS, PRM
from worker.score import step_features
from worker.train import setup

PROBLEM = "Add the numbers, then check the sum."
STEPS = ["1+2=3", "A longer step: 3+4=7, and so on.", "", "7+1=8"]


@pytest.fixture(scope="module")
def head_model() -> tuple[PRM, object]:
    model, tokenizer, _ = setup(tiny_args(mode="head"))
    return model, tokenizer


def _cache(model: PRM, directory: Path, remember: bool = False) -> FeatureCache:
    cache = cache_for(model, tiny_args(mode="head"), directory, remember)
    assert cache is not None  # head mode
    return cache


def _last_states(backbone: torch.nn.Module, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    output = backbone(input_ids=ids, attention_mask=mask, use_cache=False)
    states: torch.Tensor = output.last_hidden_state
    return states


def test_each_reading_is_the_state_it_names(head_model: tuple[PRM, object]) -> None:
    model, tokenizer = head_model
    encoded = encode(tokenizer, PROBLEM, STEPS, None, 512)  # type: ignore[arg-type]
    batch = collate([encoded], 0, torch.device("cpu"))
    width = model.width
    with torch.no_grad():
        features = step_features(model, tokenizer, [(PROBLEM, STEPS)], tiny_args(mode="head"))
        read = torch.from_numpy(features[0][0])
        full = _last_states(model.backbone, batch.input_ids, batch.attention_mask)[0]
        shorter = copy.deepcopy(model.backbone)
        keep_layers(shorter, 0.5)  # the tiny model's first of its two layers
        half = _last_states(shorter, batch.input_ids, batch.attention_mask)[0]

    assert read.shape == (len(STEPS), width * len(HEAD_READINGS))
    blocks = dict(zip(HEAD_READINGS, read.split(width, dim=1), strict=True))
    ends, starts = encoded.step_end_positions, encoded.step_start_positions
    spans = [full[s : e + 1].mean(dim=0) for s, e in zip(starts, ends, strict=True)]
    close = {"atol": 2e-3, "rtol": 2e-3}  # the features are rounded to float16
    assert torch.allclose(blocks["end@1"], full[ends], **close)
    assert torch.allclose(blocks["end@0.5"], half[ends], **close)
    assert torch.allclose(blocks["mean@1"], torch.stack(spans), **close)
    assert not torch.allclose(blocks["end@0.5"], blocks["end@1"], **close)
    # The empty step is its end token alone.
    assert starts[2] == ends[2] and torch.allclose(blocks["mean@1"][2], full[ends[2]], **close)


def test_a_step_prefix_is_read_from_its_whole_sequence(
    head_model: tuple[PRM, object], tmp_path: Path
) -> None:
    model, tokenizer = head_model
    args = tiny_args(mode="head")
    cache = _cache(model, tmp_path)
    whole, _ = step_features(model, tokenizer, [(PROBLEM, STEPS)], args, cache)

    path, throughput = step_features(model, tokenizer, [(PROBLEM, STEPS[:2])], args, cache)

    assert throughput.sequences == 0 and cache.hits == 1
    np.testing.assert_array_equal(path[0], whole[0][:2])
    fresh, _ = step_features(model, tokenizer, [(PROBLEM, STEPS[:2])], args)
    np.testing.assert_allclose(fresh[0], path[0], atol=2e-3, rtol=2e-3)
    # Another problem with the same steps is another sequence.
    _, computed = step_features(model, tokenizer, [("Other.", STEPS[:2])], args, cache)
    assert computed.sequences == 1


CANDIDATES = ["3+4=7", "A much longer candidate: 3+4=7, checked twice over.", "", "7"]
SHARING = [
    *((PROBLEM, [*STEPS[:2], candidate]) for candidate in CANDIDATES),  # after two steps
    *((PROBLEM, [candidate]) for candidate in CANDIDATES[:2]),  # first steps: the problem
    ("Other.", STEPS),  # alone
]
"""PRM800K phase 1's shape: candidates for the next step after one prefix."""


def _tiny_qwen2() -> PRM:
    """A 2-layer Qwen2 (biases on its attention projections) on the byte tokenizer."""
    tokenizer = build_tiny_tokenizer()
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
    )
    torch.manual_seed(0)
    return PRM(AutoModel.from_config(config), HEAD_READINGS)


@pytest.mark.parametrize("backbone", ["llama", "qwen2"])
@pytest.mark.parametrize("per_batch", [1, 3])
def test_candidates_after_one_prefix_share_its_key_value_cache(
    head_model: tuple[PRM, PreTrainedTokenizerBase], backbone: str, per_batch: int
) -> None:
    model, tokenizer = head_model
    if backbone == "qwen2":
        model = _tiny_qwen2()
    args = tiny_args(mode="head", score_batch_size=per_batch)
    whole = [encode(tokenizer, problem, steps, None, args.max_length) for problem, steps in SHARING]

    shared, throughput = step_features(model, tokenizer, SHARING, args)

    # Each alone, as it was computed before: its whole sequence in one forward pass.
    for item, values in zip(SHARING, shared, strict=True):
        alone, computed = step_features(model, tokenizer, [item], args)
        assert computed.tokens == len(whole[SHARING.index(item)].input_ids)
        np.testing.assert_allclose(values, alone[0], atol=2e-3, rtol=2e-3)
    # Each prefix once, then every candidate's own tokens.
    two_steps, first_steps = whole[0].step_start_positions[-1], whole[4].step_start_positions[-1]
    run = [two_steps, first_steps, *(len(w.input_ids) for w in whole[-1:])]
    run += [len(w.input_ids) - two_steps for w in whole[:4]]
    run += [len(w.input_ids) - first_steps for w in whole[4:6]]
    assert throughput.sequences == len(SHARING) and throughput.tokens == sum(run)


def test_a_remembering_cache_gives_back_what_it_saw_without_tokenizing(
    head_model: tuple[PRM, object], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, tokenizer = head_model
    args = tiny_args(mode="head")
    cache = _cache(model, tmp_path, remember=True)
    items = [(PROBLEM, STEPS), ("Other.", STEPS[:2])]
    first, _ = step_features(model, tokenizer, items, args, cache)
    tokenized: list[int] = []
    real_windows = scoring._windows

    def counting(
        tokenizer: PreTrainedTokenizerBase,
        items: list[tuple[str, list[str]]],
        max_length: int,
        first_item: int = 0,
    ) -> list[scoring._Window]:
        tokenized.append(len(items))
        return real_windows(tokenizer, items, max_length, first_item)

    monkeypatch.setattr(scoring, "_windows", counting)
    again, throughput = step_features(model, tokenizer, [items[1], items[0]], args, cache)

    assert tokenized == [] and throughput.sequences == 0 and throughput.solutions == 2
    np.testing.assert_array_equal(again[0], first[1])
    np.testing.assert_array_equal(again[1], first[0])
    with pytest.raises(ValueError, match="read-only"):
        again[0][0, 0] = 1.0  # shared between callers: nobody may change them
    # A new item is tokenized (alone) and read; a changed truncation is another text.
    longer = step_features(model, tokenizer, [(PROBLEM, STEPS[:3]), items[0]], args, cache)[0]
    assert tokenized == [1]
    np.testing.assert_array_equal(longer[0], first[0][:3])
    shorter = tiny_args(mode="head", max_length=args.max_length - 1)
    step_features(model, tokenizer, items[:1], shorter, cache)
    assert tokenized == [1, 1]


def test_a_cache_that_does_not_remember_tokenizes_every_time(
    head_model: tuple[PRM, object], tmp_path: Path
) -> None:
    model, tokenizer = head_model
    args = tiny_args(mode="head")
    cache = _cache(model, tmp_path)
    step_features(model, tokenizer, [(PROBLEM, STEPS)], args, cache)

    again, throughput = step_features(model, tokenizer, [(PROBLEM, STEPS)], args, cache)

    assert cache.texts is None and cache.hits == 1 and throughput.sequences == 0
    again[0][0, 0] = 1.0  # a fresh array, the caller's own


def test_prefix_keys_are_the_keys_of_the_cut_sequences() -> None:
    ids, ends = [5, 6, 7, 99, 8, 99, 9, 10, 99], [3, 5, 8]

    keys = prefix_keys(ids, ends)

    assert keys == [
        sequence_key(ids[:4], ends[:1]),
        sequence_key(ids[:6], ends[:2]),
        sequence_key(ids, ends),
    ]


def test_the_cache_is_per_backbone_and_readings(tmp_path: Path) -> None:
    head, _, _ = setup(tiny_args(mode="head"))
    full, _, _ = setup(tiny_args(mode="full"))
    other, _, _ = setup(tiny_args(mode="head", seed=1))

    caches = [cache_for(m, tiny_args(mode="head"), tmp_path) for m in (head, full, other)]

    paths = {c.path for c in caches if isinstance(c, FeatureCache)}
    assert len(paths) == 3  # the full-mode model reads the last layer alone
