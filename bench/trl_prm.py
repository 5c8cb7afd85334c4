"""TRL's PRMTrainer on the worker's model and data: training tokens/s, peak memory, step AUROC.

    PYTHONPATH=/tmp/trlsite .venv/bin/python -m bench.trl_prm --device cpu --per-subset 8 \
        --max-steps 2                                       # a smoke run
    python -m bench.trl_prm --device cuda --json trl-prm.json    # the comparison (issue 27)

TRL is not a dependency of the project: it, and what it needs that the worker lacks
(``datasets``, ``dill``, ``multiprocess``), is installed for this bench alone, on a path of
its own (``PYTHONPATH``); the module imports it only when it trains. TRL 1.13.0 is the last
release with a PRMTrainer (``trl.experimental.prm``; 1.14 dropped it). It runs with
transformers 5.17 and 5.24.

The model: SmolLM2-135M (``--base-model``, resolved and prepared as the worker's is) as
TRL's PRMs are, a token-classification model with two classes (0: the step is wrong, 1: it
is right), its head new, every weight trained. The data: bench/prm_quality.py's split of
ProcessBench (its ``split``, ``restrict``, ``fixed_sample``, seed and shares), the training
problems in TRL's stepwise format: the problem as ``prompt`` (a newline after it), the
steps as ``completions``, each followed by TRL's ``step_separator`` ("\\n"), whose token
carries the step's label: ``True`` before the first error, ``False`` on it. The steps after
it have no label; in a causal model they change nothing before them, so they are dropped
(the worker keeps them as unlabeled context, so it trains on more tokens per solution).

Hyperparameters are bench/prm_quality.py's ``smollm2-135m-full`` (``smollm2_args``: the
worker's full mode): learning rate 2e-5, linear decay after 5% warmup, 2 epochs
(``--epochs``), 16 sequences a step, at most 2,048 tokens on a GPU (1,024 on the CPU),
AdamW with weight decay 0.01 (not on biases and norms, in both), gradient norm clipped at
1, bf16 autocast on CUDA over float32 weights, no gradient checkpointing (TRL's default
turns it on: ``--gradient-checkpointing``). TRL's own choices stay: random batches padded
to their longest (the worker groups similar lengths, so it pads less), a sequence too long
cut at its end (the worker cuts its beginning), dropout off, its tokenization, and its
loss: the mean cross entropy over a batch's labeled tokens, as the worker's.

Figures. Training tokens/s: non-padding tokens (transformers' own count,
``include_num_input_tokens_seen="non_padding"``) over the wall time of ``trainer.train()``,
its first steps included. Peak memory: ``torch.cuda.max_memory_allocated`` during training
(none on the CPU). Quality: bench/prm_quality.py's ``judge_model`` and ``figures``, the
threshold chosen on the calibration problems, the figures read on the test problems, over
``--train-seeds`` as there. They take three class probabilities per step (P(-1), P(0),
P(+1)); a binary PRM has no neutral class, so P(wrong) stands as P(-1), 0 as P(0) and
P(right) as P(+1): step AUROC ranks the steps by P(wrong), and ProcessBench's predicted
first error is the first step whose P(right) is below the threshold. Scoring lays each
solution out with TRL's own ``tokenize_row``, every step, uncut.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import torch
import transformers
from transformers import (
    AutoModelForTokenClassification,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from app.core.config import get_settings
from bench import SHARED_DATA
from bench.prm_quality import seed_list
from bench.prm_quality_data import (
    CALIBRATION_SHARE,
    Scored,
    Split,
    examples,
    split_from_options,
)
from bench.prm_quality_report import figures, judge_model, show_estimate
from bench.prm_quality_training import FULL, Trained, smollm2_args
from worker.device import resolve_device, score_batch_size_on, uses_bf16
from worker.eval_sets import (
    PROCESSBENCH_SUBSETS,
    ProcessBenchItem,
)
from worker.layout import IGNORE_INDEX, padding_with_eos
from worker.pretrained import resolve_base_model
from worker.training_args import TrainingArgs

NAME = "trl-prm"
PROMPT_END = "\n"
"""Ends the problem: TRL's tokenization joins the prompt and the first step with nothing."""
WRONG = 0
"""The class of a wrong step in TRL's PRM (its labels are booleans: False is class 0)."""


def stepwise_rows(items: Sequence[ProcessBenchItem]) -> list[dict[str, Any]]:
    """The items as TRL's stepwise rows (prompt, completions, labels): their labeled steps
    (prm_quality's ``examples``), the unlabeled ones after the first error dropped."""
    rows = []
    for example in examples(items):
        labeled = example.labeled
        if [index for index, _ in labeled] != list(range(len(labeled))):
            raise ValueError(f"the labeled steps are not a prefix: {example.labels}")
        rows.append(
            {
                "prompt": example.problem + PROMPT_END,
                "completions": example.steps[: len(labeled)],
                "labels": [rating > 0 for _, rating in labeled],
            }
        )
    return rows


def three_classes(wrong: np.ndarray) -> np.ndarray:
    """(steps, 3) probabilities of -1, 0 and +1 from a binary PRM's P(wrong) per step."""
    return np.stack([wrong, np.zeros_like(wrong), 1.0 - wrong], axis=1)


def _prm() -> Any:
    """TRL's PRM module (PRMConfig, PRMTrainer), imported when it is needed."""
    from trl.experimental import prm  # type: ignore[import-not-found]

    return prm


@dataclass(frozen=True)
class Training:
    """What one ``trainer.train()`` did and cost."""

    tokens: int
    """Non-padding tokens of the batches trained on."""
    seconds: float
    optimizer_steps: int
    peak_memory_gib: float | None
    """The GPU's peak allocation while training; None on the CPU."""

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds


def train(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    items: Sequence[ProcessBenchItem],
    config: Any,
) -> Training:
    """Train ``model`` on ``items`` with TRL's PRMTrainer and ``config``, a PRMConfig."""
    from datasets import Dataset  # type: ignore[import-not-found]

    trainer = _prm().PRMTrainer(
        model=model,
        args=config,
        train_dataset=Dataset.from_list(stepwise_rows(items)),
        processing_class=tokenizer,
    )
    device = model.device
    cuda = device.type == "cuda"
    if cuda:
        gc.collect()  # what an earlier seed's trainer left
        torch.cuda.reset_peak_memory_stats(device)
    started = time.perf_counter()
    trainer.train()
    if cuda:
        torch.cuda.synchronize(device)
    seconds = time.perf_counter() - started
    return Training(
        int(trainer.state.num_input_tokens_seen),
        seconds,
        trainer.state.global_step,
        torch.cuda.max_memory_allocated(device) / 2**30 if cuda else None,
    )


def wrong_probabilities(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    items: Sequence[Scored],
    config: Any,
    batch_size: int,
) -> list[np.ndarray]:
    """Per item, P(step is wrong) for each of its steps, laid out by TRL's ``tokenize_row``
    as in training, but every step and uncut."""
    rows = [
        _prm().PRMTrainer.tokenize_row(
            {
                "prompt": item.problem + PROMPT_END,
                "completions": item.steps,
                "labels": [True] * len(item.steps),
            },
            tokenizer,
            config.step_separator,
            max_length=None,
            max_completion_length=None,
            train_on_last_step_only=False,
            is_eval=True,
        )
        for item in items
    ]
    scored = [np.zeros(0) for _ in items]
    order = sorted(range(len(rows)), key=lambda k: len(rows[k]["input_ids"]))
    model.eval()
    with (
        torch.inference_mode(),
        torch.autocast(model.device.type, dtype=torch.bfloat16, enabled=config.bf16),
    ):
        for start in range(0, len(order), batch_size):
            chosen = order[start : start + batch_size]
            batch = tokenizer.pad(
                [{"input_ids": rows[k]["input_ids"]} for k in chosen], return_tensors="pt"
            ).to(model.device)
            wrong = model(**batch).logits.float().softmax(-1)[..., WRONG].cpu().numpy()
            for row, k in enumerate(chosen):
                ends = [i for i, label in enumerate(rows[k]["labels"]) if label != IGNORE_INDEX]
                scored[k] = wrong[row, ends]
    return scored


def prm_config(
    worker: TrainingArgs, output_dir: str, max_steps: int | None, checkpointing: bool | None
) -> Any:
    """TRL's PRMConfig with the worker's hyperparameters ``worker`` (its device, seed)."""
    device = resolve_device(worker.device)
    return _prm().PRMConfig(
        output_dir=output_dir,
        learning_rate=worker.learning_rate,
        num_train_epochs=worker.epochs,
        max_steps=max_steps or -1,
        per_device_train_batch_size=worker.batch_size,
        max_length=worker.max_length,
        weight_decay=worker.weight_decay,
        lr_scheduler_type="linear",
        warmup_steps=worker.warmup_ratio,  # below 1: a share of the optimizer steps
        max_grad_norm=worker.max_grad_norm,
        bf16=uses_bf16(worker, device),
        gradient_checkpointing=worker.gradient_checkpointing
        if checkpointing is None
        else checkpointing,
        use_cpu=device.type == "cpu",
        seed=worker.seed,
        include_num_input_tokens_seen="non_padding",
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
    )


def padding_tokenizer(directory: str | Path) -> PreTrainedTokenizerBase:
    """The model's tokenizer, padding as the worker's does (TRL's collator pads every
    batch), without the worker's step token, which TRL's model has no embedding for."""
    return padding_with_eos(AutoTokenizer.from_pretrained(directory))


def train_trl(data: Split, options: argparse.Namespace, train_seed: int) -> Trained:
    """TRL's PRM trained on ``data.train``, as prm_quality's figures take a model."""
    directory = resolve_base_model(options.base_model, get_settings().model_dir)
    worker = smollm2_args(FULL, directory, options.device, train_seed)
    if options.epochs:
        worker = replace(worker, epochs=options.epochs)
    transformers.set_seed(worker.seed)  # the new head's weights
    tokenizer = padding_tokenizer(directory)
    model = AutoModelForTokenClassification.from_pretrained(
        directory, num_labels=2, id2label={0: "wrong", 1: "right"}, dtype=torch.float32
    )
    with tempfile.TemporaryDirectory(prefix="trl-prm-") as scratch:
        config = prm_config(worker, scratch, options.max_steps, options.gradient_checkpointing)
        cpu_started = time.process_time()
        training = train(model, tokenizer, data.train, config)
        cpu_seconds = time.process_time() - cpu_started

    def probabilities(items: Sequence[Scored]) -> list[np.ndarray]:
        per_batch = score_batch_size_on(worker, model.device)
        wrong = wrong_probabilities(model, tokenizer, items, config, per_batch)
        return [three_classes(p) for p in wrong]

    notes = {
        "trainer": f"trl {metadata.version('trl')} PRMTrainer",
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(model.device)
        if model.device.type == "cuda"
        else "cpu",
        "base_model": options.base_model,
        "learning_rate": config.learning_rate,
        "epochs": config.num_train_epochs,
        "max_steps": config.max_steps,
        "batch_size": config.per_device_train_batch_size,
        "max_length": config.max_length,
        "weight_decay": config.weight_decay,
        "warmup_share": config.warmup_steps,
        "max_grad_norm": config.max_grad_norm,
        "bf16": config.bf16,
        "gradient_checkpointing": config.gradient_checkpointing,
        "step_separator": config.step_separator,
        "train_sampling": config.train_sampling_strategy,
        "train_wall_seconds": round(training.seconds, 1),
        "training": asdict(training) | {"tokens_per_second": training.tokens_per_second},
    }
    return Trained(NAME, probabilities, cpu_seconds, notes)


def training_figures(result: dict[str, Any]) -> dict[str, Any]:
    """Speed and memory over the training seeds: the mean tokens/s, the largest peak."""
    runs = [run["notes"]["training"] for run in result["per_seed"]]
    peaks = [run["peak_memory_gib"] for run in runs if run["peak_memory_gib"] is not None]
    return {
        "tokens_per_second": float(np.mean([run["tokens_per_second"] for run in runs])),
        "tokens": [run["tokens"] for run in runs],
        "seconds": [run["seconds"] for run in runs],
        "optimizer_steps": [run["optimizer_steps"] for run in runs],
        "peak_memory_gib": max(peaks) if peaks else None,
    }


def summary(result: dict[str, Any]) -> str:
    """One line: speed, memory and quality."""
    training = result["training"]
    peak = training["peak_memory_gib"]
    return (
        f"{NAME} ({result['notes']['trainer']}, {result['notes']['device']}, training seeds "
        f"{', '.join(map(str, result['train_seeds']))}): "
        f"{sum(training['tokens']):,} tokens in {sum(training['seconds']):.1f} s, "
        f"{training['tokens_per_second']:,.0f} tokens/s, peak "
        f"{'n/a' if peak is None else f'{peak:.2f} GiB'}; step AUROC "
        f"{show_estimate(result['step_auroc']['all'])}, ProcessBench F1 "
        f"{show_estimate(result['processbench']['f1'])} on {result['split']['test']} test solutions"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.trl_prm", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--data", type=Path, default=SHARED_DATA)
    parser.add_argument("--base-model", default="smollm2-135m")
    parser.add_argument("--device", choices=("cpu", "cuda", "auto"), default="auto")
    parser.add_argument(
        "--subsets", default=",".join(PROCESSBENCH_SUBSETS), help="judged on (and calibrated)"
    )
    parser.add_argument("--train-subsets", help="trained on (default: --subsets)")
    parser.add_argument(
        "--per-subset", type=int, help="a fixed sample of each subset (default: all)"
    )
    parser.add_argument("--test-share", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=0, help="the split's (and bootstrap's)")
    parser.add_argument(
        "--train-seeds", type=seed_list, help="train once per seed, e.g. 0,1,2 (default: --seed)"
    )
    parser.add_argument("--epochs", type=int, help="default: the worker's (2)")
    parser.add_argument("--max-steps", type=int, help="stop after this many optimizer steps")
    parser.add_argument(
        "--gradient-checkpointing",
        action=argparse.BooleanOptionalAction,
        help="default: the worker's (off; TRL's own default is on)",
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    options = parser.parse_args(argv)
    options.device = resolve_device(options.device).type
    options.train_seeds = options.train_seeds or [options.seed]
    data = split_from_options(options)
    if data is None:
        parser.error(f"no ProcessBench files in {options.data}")
    print(
        f"ProcessBench: {len(data.train)} training, {len(data.calibration)} calibration, "
        f"{len(data.test)} test solutions; on {options.device}",
        flush=True,
    )
    started = time.perf_counter()
    # Each seed's model is judged, then let go, before the next one is trained.
    runs = [judge_model(train_trl(data, options, seed), data, seed) for seed in options.train_seeds]
    result = figures(NAME, runs, options.seed)
    result["wall_seconds"] = round(time.perf_counter() - started, 1)
    result["training"] = training_figures(result)
    result["split"] = {
        "seed": options.seed,
        "test_share": options.test_share,
        "calibration_share": CALIBRATION_SHARE,
        "judged_subsets": options.subsets.split(","),
        "trained_subsets": (options.train_subsets or options.subsets).split(","),
        "per_subset": options.per_subset,
        "train": len(data.train),
        "calibration": len(data.calibration),
        "test": len(data.test),
    }
    print(summary(result), flush=True)
    if options.json:
        # A list, as bench/prm_quality.py writes its models' figures.
        options.json.write_text(json.dumps([result], indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
