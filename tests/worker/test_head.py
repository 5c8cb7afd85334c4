"""The head mode's head: members, readings, training, and checkpoints of it."""

import itertools
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from tests.worker import arithmetic_examples, tiny_args
from worker.checkpoint import HEAD_FILE, load_checkpoint, save_checkpoint
from worker.features import cache_for
from worker.head import HeadTraining, StepHead, fit_head
from worker.model import HEAD_READINGS, LAST_LAYER
from worker.score import score_solutions
from worker.train import fit, labeled_step_features, linear_schedule, setup

EXAMPLES = arithmetic_examples(120, seed=4)


def _training(**changes: object) -> HeadTraining:
    settings: dict[str, object] = {
        "learning_rate": 0.05,
        "epochs": 20,
        "batch_size": 32,
        "weight_decay": 0.001,
        "warmup_ratio": 0.0,
        "seed": 0,
    }
    return HeadTraining(**(settings | changes))  # type: ignore[arg-type]


def _separable(rows: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Three classes told apart by the first two columns; the rest is noise."""
    generator = torch.Generator().manual_seed(seed)
    classes = torch.randint(0, 3, (rows,), generator=generator)
    features = torch.randn(rows, 6, generator=generator)
    features[:, 0] += 3 * (classes == 0).float()
    features[:, 1] += 3 * (classes == 2).float()
    return features * 10 + 5, classes  # far from standard: standardizing must happen


def test_a_head_learns_and_its_members_differ_but_agree_on_the_clear_cases() -> None:
    features, classes = _separable(600, seed=0)
    head = StepHead(6, columns=[0, 1, 2], members=3, standardized=True)

    result = fit_head(head, features, classes, _training(), linear_schedule)

    assert result.epoch_losses[-1] < result.epoch_losses[0] and not result.stopped
    assert result.optimizer_steps == 3 * 20 * 19  # members x epochs x ceil(600 / 32)
    weights = [m.weight for m in head.members]  # type: ignore[union-attr]
    assert not torch.equal(weights[0], weights[1])  # own seed, own resample
    test, truth = _separable(300, seed=1)
    probabilities = head.member_probabilities(test.numpy())
    assert probabilities.shape == (3, 300, 3)
    assert (probabilities.mean(axis=0).argmax(axis=1) == truth.numpy()).mean() > 0.85
    assert np.allclose(probabilities.sum(axis=-1), 1.0)
    # Members agree where the data is clear: their spread is small next to the mean.
    assert probabilities.std(axis=0).mean() < 0.1


def test_a_head_reads_only_its_columns() -> None:
    features, classes = _separable(300, seed=2)
    head = StepHead(6, columns=[2, 3], standardized=True)  # noise columns only
    fit_head(head, features, classes, _training(), linear_schedule)

    scrambled = features.clone()
    scrambled[:, [0, 1, 4, 5]] = 0
    assert np.allclose(
        head.member_probabilities(features.numpy()), head.member_probabilities(scrambled.numpy())
    )


def test_class_balance_raises_the_rare_class() -> None:
    features, classes = _separable(900, seed=3)
    rare = torch.cat(
        [torch.nonzero(classes != 0).flatten(), torch.nonzero(classes == 0)[:20].flatten()]
    )
    features, classes = features[rare], classes[rare]
    noisy = features + torch.randn(features.shape, generator=torch.Generator().manual_seed(5)) * 20
    plain = StepHead(6, standardized=True)
    balanced = StepHead(6, standardized=True)

    fit_head(plain, noisy, classes, _training(), linear_schedule)
    fit_head(balanced, noisy, classes, _training(class_balance=True), linear_schedule)

    p_plain = plain.member_probabilities(noisy.numpy())[0][:, 0].mean()
    p_balanced = balanced.member_probabilities(noisy.numpy())[0][:, 0].mean()
    assert p_balanced > 2 * p_plain


def test_training_stops_when_asked() -> None:
    features, classes = _separable(200, seed=4)
    head = StepHead(6, hidden=4, members=2, standardized=True)

    result = fit_head(
        head, features, classes, _training(), linear_schedule, lambda step, _e, _l: step == 10
    )

    assert result.stopped and result.optimizer_steps == 10


def test_a_stop_while_features_are_computed_comes_after_one_chunk_and_keeps_it(
    tmp_path: Path,
) -> None:
    """A cold cache takes hours with phase-1 labels on a CPU: a stop must not wait for it.
    The chunk computed is kept, and the next fit computes only the rest."""
    args = tiny_args(mode="head", epochs=2)
    examples = arithmetic_examples(150, seed=4)  # three chunks of FEATURE_CHUNK (64)
    model, tokenizer, _ = setup(args)
    cache = cache_for(model, args, tmp_path)
    assert cache is not None
    asked = itertools.count()

    stopped = fit(
        model, tokenizer, examples, args, cache=cache, should_stop=lambda: next(asked) > 0
    )

    assert stopped.stopped and stopped.optimizer_steps == 0 and stopped.epochs == 0
    assert 0 < len(cache) <= 64  # one chunk's sequences (repeated solutions share one)
    trained = fit(model, tokenizer, examples, args, cache=cache, should_stop=lambda: False)
    assert not trained.stopped and trained.epochs == 2
    # The first chunk's 64 solutions are read from the cache.
    assert 0 < trained.feature_sequences <= len(examples) - 64
    assert trained.labeled_steps == sum(len(e.labeled) for e in examples)


@pytest.mark.parametrize(("hidden", "members"), [(0, 1), (8, 3)])
def test_a_head_mode_checkpoint_scores_the_same_after_loading(
    tmp_path: Path, hidden: int, members: int
) -> None:
    args = tiny_args(
        mode="head",
        epochs=3,
        head_readings=HEAD_READINGS,
        head_hidden=hidden,
        head_members=members,
    )
    model, tokenizer, _ = setup(args)
    fit(model, tokenizer, EXAMPLES, args)
    items = [(e.problem, e.steps) for e in EXAMPLES[:10]]
    before = score_solutions(model, tokenizer, items, args)
    save_checkpoint(tmp_path / "run", model, tokenizer, args, {}, len(EXAMPLES))

    loaded, loaded_tokenizer, loaded_args, _ = load_checkpoint(tmp_path / "run", "cpu")

    assert loaded_args == args and loaded.readings == HEAD_READINGS
    after = score_solutions(loaded, loaded_tokenizer, items, loaded_args)
    assert after == before
    assert [a.member_step_scores for a in after] == [b.member_step_scores for b in before]
    assert all(len(s.member_step_scores) == members for s in after)


def test_a_head_saved_before_readings_loads_as_one_linear_member(tmp_path: Path) -> None:
    args = tiny_args(mode="head", epochs=2)
    model, tokenizer, _ = setup(args)
    fit(model, tokenizer, EXAMPLES, args)
    save_checkpoint(tmp_path / "run", model, tokenizer, args, {}, len(EXAMPLES))
    # The old format: one linear layer on the last layer's raw step-end state.
    steps, _ = labeled_step_features(model, tokenizer, EXAMPLES[:5], args, None)
    weight, bias = torch.randn(3, model.width), torch.randn(3)
    save_file({"weight": weight, "bias": bias}, str(tmp_path / "run" / HEAD_FILE))

    loaded, _, _, _ = load_checkpoint(tmp_path / "run", "cpu")

    assert loaded.readings == LAST_LAYER
    last = steps.features[:, : model.width].numpy()
    expected = torch.softmax(
        torch.from_numpy(last).double() @ weight.double().T + bias.double(), -1
    )
    assert np.allclose(loaded.head.member_probabilities(last)[0], expected.numpy())


def test_embeddings_keep_near_solutions_near() -> None:
    features, classes = _separable(300, seed=6)
    head = StepHead(6, standardized=True)
    fit_head(head, features, classes, _training(epochs=1), linear_schedule)
    one = features[:5].numpy()
    near = one + 0.01
    far = features[100:105].numpy() * 3

    embeddings = [head.embedding(f) for f in (one, near, far)]

    assert embeddings[0].shape == (64,)
    assert np.linalg.norm(embeddings[0] - embeddings[1]) < 0.1 * np.linalg.norm(
        embeddings[0] - embeddings[2]
    )
    assert not head.embedding(np.zeros((0, 6), np.float32)).any()


@pytest.mark.gpu
def test_head_mode_trains_and_scores_with_the_backbone_on_cuda() -> None:
    """The features come from the host; the head trains there and goes back to the GPU."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    args = tiny_args(mode="head", device="cuda", epochs=3, head_hidden=8, head_members=2)
    model, tokenizer, _ = setup(args)

    stats = fit(model, tokenizer, EXAMPLES, args)
    scores = score_solutions(model, tokenizer, [(EXAMPLES[0].problem, EXAMPLES[0].steps)], args)
    steps, _ = labeled_step_features(model, tokenizer, EXAMPLES[:2], args, None)

    assert stats.optimizer_steps > 0 and model.head.device.type == "cuda"
    assert 0 < scores[0].score <= 1
    assert model.head.embedding(steps.features.numpy()).shape == (64,)
