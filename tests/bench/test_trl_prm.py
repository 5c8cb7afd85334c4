"""bench/trl_prm.py: TRL's rows and probabilities mean what prm_quality's figures read.

The end-to-end test needs TRL (and ``datasets``), installed for that bench alone: it is
skipped where they are not importable, as in the project's own environment.
"""

import json
from pathlib import Path

import numpy as np
import pytest
from transformers import LlamaConfig, LlamaForCausalLM

from bench.prm_quality_data import split
from bench.prm_quality_report import figures, judge_model
from bench.prm_quality_training import Trained
from bench.trl_prm import main, padding_tokenizer, stepwise_rows, three_classes
from worker.build import TINY_CONFIG
from worker.eval_sets import ProcessBenchItem, fixed_sample, load_processbench
from worker.layout import byte_tokenizer


def _item(steps: int, label: int) -> ProcessBenchItem:
    return ProcessBenchItem(
        "gsm8k",
        f"{steps}-{label}",
        "What is 1 + 1?",
        [f"step {k}" for k in range(steps)],
        label,
        label < 0,
    )


def test_a_row_ends_at_the_first_error_and_a_correct_solution_keeps_every_step() -> None:
    wrong, right = stepwise_rows([_item(4, 1), _item(3, -1)])

    assert wrong == {
        "prompt": "What is 1 + 1?\n",
        "completions": ["step 0", "step 1"],
        "labels": [True, False],
    }
    assert right["completions"] == ["step 0", "step 1", "step 2"]
    assert right["labels"] == [True, True, True]


def test_a_tokenizer_without_a_padding_token_pads_with_its_end_of_text(tmp_path: Path) -> None:
    tokenizer = byte_tokenizer()
    tokenizer.pad_token = None  # as transformers 5.17 converts SmolLM2's GGUF
    tokenizer.save_pretrained(tmp_path)

    loaded = padding_tokenizer(tmp_path)

    assert loaded.pad_token == loaded.eos_token is not None
    padded = loaded.pad({"input_ids": [[1, 2, 3], [4]]}, return_tensors="pt")
    assert padded["attention_mask"].tolist() == [[1, 1, 1], [1, 0, 0]]


def test_p_wrong_is_read_as_p_minus_one_and_p_right_as_fine(shared_data: Path) -> None:
    """An oracle's P(wrong) (1 on the first error, 0 before and after it) through
    ``three_classes`` gets prm_quality's figures right: AUROC 1, every first error found."""
    data = split(fixed_sample(load_processbench(shared_data, ["gsm8k"]), 60, 0), 0.5, 0)

    def oracle(items: list[ProcessBenchItem]) -> list[np.ndarray]:
        return [
            three_classes((np.arange(len(i.steps)) == i.label).astype(np.float64)) for i in items
        ]

    assert np.allclose(three_classes(np.array([0.25]))[0], [0.25, 0.0, 0.75])
    result = figures("oracle", [judge_model(Trained("oracle", oracle, 0.0), data, 0)], 0)

    assert result["step_auroc"]["all"]["value"] == 1.0
    assert result["processbench"]["f1"]["value"] == 1.0


def test_trl_trains_and_is_judged_on_the_split(
    shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("datasets")
    pytest.importorskip("trl.experimental.prm")
    tokenizer = byte_tokenizer()
    model = tmp_path / "model"
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        **TINY_CONFIG,
    )
    LlamaForCausalLM(config).save_pretrained(model)
    tokenizer.save_pretrained(model)
    saved = tmp_path / "figures.json"

    main(
        [
            f"--base-model={model}",
            "--device=cpu",
            "--subsets=gsm8k",
            "--per-subset=12",
            "--max-steps=2",
            f"--json={saved}",
        ]
    )

    (result,) = json.loads(saved.read_text())
    (run,) = result["per_seed"]
    assert run["notes"]["training"]["optimizer_steps"] == 2
    assert result["training"]["tokens"][0] > 0
    assert result["training"]["peak_memory_gib"] is None
    assert set(result["step_auroc"]) == {"all", "gsm8k"}
    assert (
        result["split"]["test"]
        == run["processbench"]["subsets"]["gsm8k"]["correct"]
        + run["processbench"]["subsets"]["gsm8k"]["erroneous"]
    )
    assert "tokens/s" in capsys.readouterr().out.splitlines()[-1]
