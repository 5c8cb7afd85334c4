"""PRM worker throughput: training tokens/s, scoring solutions/s and tokens/s, and MFU.

Why one module over 500 lines: it is one bench script, and its synthetic tokenizer and
examples, its timing and its FLOP/MFU arithmetic serve only this command's table.

    .venv/bin/python -m bench.worker --config tiny --device cpu
    python -m bench.worker --config qwen2-1.5b --device cuda --steps 20 --batch-size 16

Training: ``fit`` runs ``--warmup-steps`` optimizer steps (untimed), then, in a second call
on the same model, exactly ``--steps`` steps on ``steps x batch-size`` synthetic examples;
tokens/s is that call's own figure (``FitStats``: non-padding tokens over the time from the
first step to the last, tokenization excluded). Scoring: ``score_with_throughput`` (what
``score_solutions`` returns, with its clock) over ``--solutions`` synthetic solutions after a
two-batch warmup; its time includes tokenization, as the worker's does.

Synthetic examples have the shape of PRM800K: a problem of 45-75 words, 8-15 steps of
20-60 words, ratings +1 (80%) or 0 (20%) and, in half the examples, a last step rated -1.

Models. ``tiny`` is the worker's own (``setup``: its config and byte tokenizer, one token
per byte). The ``qwen2-*`` configs are decoders built in code with ``Qwen2Config`` at the
published sizes, randomly initialized (weights do not change speed): ``qwen2-0.5b`` is
Qwen2.5-0.5B (Qwen2.5-Math has no 0.5B), ``qwen2-1.5b`` Qwen2.5-Math-1.5B and ``qwen2-7b``
Qwen2.5-Math-7B (whose vocabulary is 152,064, not 151,936). They are built as ``setup``
builds a local checkpoint (same ``PRM`` wrapper, ``prepare_tokenizer``, gradient
checkpointing, device), but from the config, on the device, with no checkpoint on disk.

Why a word-level tokenizer for the qwen2 configs: ``fit`` and ``score_solutions`` take text
and tokenize it themselves through ``encode`` (there is no way to hand them token ids), and
the Qwen tokenizer cannot be downloaded. The tiny byte tokenizer with a resized vocabulary
would be honest about nothing: one token per byte makes sequences 5-6 times longer than a
BPE tokenizer makes them, and only ids below 260 would ever be used. So each qwen2 config
gets a word-level tokenizer over the full vocabulary in which the word ``t<i>`` is token
``i``: a synthetic text of random words is a sequence of random token ids of exactly the
chosen length, and it still goes through ``encode``, ``collate`` and the rest of the real
path. One word is one token here; Qwen's tokenizer makes more than one token of a word of
LaTeX, so real PRM800K sequences are somewhat longer than these.

Training variants (issue 27): ``--master-weights`` trains bf16 weights through float32
masters instead of autocast, ``--pack`` packs each batch's solutions into rows of
``--max-length`` with per-solution attention, ``--compile`` runs the step through
``torch.compile``, ``--attention`` picks the qwen2 configs' attention kernel, ``--mode
lora`` trains low-rank adapters on a frozen backbone that ``--bf16-base`` builds in bf16
(how a 7B PRM fits one GPU). ``--json`` appends each table row to a JSON-lines file;
``--profile`` writes where 3 more training steps and 3 more scoring batches spend their time
(torch.profiler's operator table, and on a GPU how busy its kernels kept it).

MFU counts model FLOPs, not hardware FLOPs: 6 x N per trained token (4 x N in ``lora``
mode: a frozen weight has no gradient of its own), 2 x N per scored token, where N is the
parameters that multiply (everything but the input embedding, which is a lookup; the PRM
has no language-model head). Recomputation under gradient
checkpointing and attention's own FLOPs are not counted, as is usual for MFU. The peak is
the GPU's dense bf16 tensor-core figure, looked up from its name or given with
``--peak-tflops``. On CPU MFU is "n/a"; bf16 autocast is CUDA-only in the worker, so CPU
runs are float32 whatever ``--bf16`` says.

Also printed: the share of batch positions that were padding (from the same private batch
plans ``fit`` and ``step_probabilities`` make), and peak memory: the GPU's peak allocation
during the phase, or on CPU the process's peak resident memory so far.
"""

import argparse
import json
import random
import resource
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import transformers
from tokenizers import Tokenizer, models, pre_tokenizers
from torch.profiler import ProfilerActivity, profile
from transformers import AutoModel, PreTrainedTokenizerBase, PreTrainedTokenizerFast, Qwen2Config

from bench.synthetic_prm800k import WORDS
from worker.batching import length_batches, pack_rows
from worker.build import TINY_CONFIG, add_lora, enable_gradient_checkpointing
from worker.device import (
    resolve_device,
    score_batch_size_on,
    use_expandable_cuda_segments,
    uses_bf16,
)
from worker.layout import encode, prepare_tokenizer
from worker.model import PRM, input_embeddings
from worker.score import _windows, score_with_throughput
from worker.train import Example, _epoch_batches, fit, setup
from worker.training_args import TINY, TrainingArgs

QWEN2_CONFIGS: dict[str, dict[str, Any]] = {
    "qwen2-0.5b": {  # Qwen2.5-0.5B
        "hidden_size": 896,
        "intermediate_size": 4864,
        "num_hidden_layers": 24,
        "num_attention_heads": 14,
        "num_key_value_heads": 2,
        "vocab_size": 151_936,
        "max_position_embeddings": 32_768,
        "rope_theta": 1_000_000.0,
        "rms_norm_eps": 1e-6,
        "tie_word_embeddings": True,
    },
    "qwen2-1.5b": {  # Qwen2.5-Math-1.5B
        "hidden_size": 1536,
        "intermediate_size": 8960,
        "num_hidden_layers": 28,
        "num_attention_heads": 12,
        "num_key_value_heads": 2,
        "vocab_size": 151_936,
        "max_position_embeddings": 4096,
        "rope_theta": 10_000.0,
        "rms_norm_eps": 1e-6,
        "tie_word_embeddings": True,
    },
    "qwen2-7b": {  # Qwen2.5-Math-7B
        "hidden_size": 3584,
        "intermediate_size": 18_944,
        "num_hidden_layers": 28,
        "num_attention_heads": 28,
        "num_key_value_heads": 4,
        "vocab_size": 152_064,
        "max_position_embeddings": 4096,
        "rope_theta": 10_000.0,
        "rms_norm_eps": 1e-6,
        "tie_word_embeddings": False,
    },
}
CONFIGS = (TINY, *QWEN2_CONFIGS)

PEAK_BF16_TFLOPS = (
    ("H100 PCIe", 756.0),
    ("H100 NVL", 835.0),
    ("H100", 989.0),
    ("H200", 989.0),
    ("A100", 312.0),
)
"""Dense bf16 peaks (no sparsity) by a fragment of the device name; the first match wins."""

SPECIAL_TOKENS = {"unk_token": "<|unk|>", "bos_token": "<|bos|>", "eos_token": "<|eos|>"}
PROBLEM_WORDS = (45, 75)
STEP_WORDS = (20, 60)
STEPS_PER_SOLUTION = (8, 15)
STEP_RATINGS = (1, 1, 1, 1, 0)
ENDS_IN_ERROR = 0.5
"""Share of examples whose last step is rated -1 (a PRM800K path ends at its first -1)."""


def id_word_tokenizer(vocab_size: int) -> tuple[PreTrainedTokenizerBase, list[str]]:
    """A tokenizer of ``vocab_size`` tokens in which the word ``t<i>`` is token ``i``.

    Returns the tokenizer (step-end and pad tokens included, see ``prepare_tokenizer``)
    and its plain words, from which synthetic text is drawn.
    """
    # The specials and the step-end token take the last ids; the pad token is the eos.
    words = [f"t{i}" for i in range(vocab_size - len(SPECIAL_TOKENS) - 1)]
    vocab = {word: index for index, word in enumerate(words)}
    vocab[SPECIAL_TOKENS["unk_token"]] = len(words)
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token=SPECIAL_TOKENS["unk_token"]))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=core, **SPECIAL_TOKENS)
    tokenizer = prepare_tokenizer(fast)
    if len(tokenizer) != vocab_size:
        raise AssertionError(f"tokenizer has {len(tokenizer)} tokens, not {vocab_size}")
    return tokenizer, words


def build(
    config: str, args: TrainingArgs, attention: str = "sdpa", bf16_base: bool = False
) -> tuple[PRM, PreTrainedTokenizerBase, torch.device, Sequence[str]]:
    """The PRM, its tokenizer, its device and the words synthetic text is made of.

    ``attention`` is the backbone's attention implementation; ``bf16_base`` builds the
    frozen backbone of ``lora`` mode in bf16.
    """
    if config == TINY:
        model, tokenizer, device = setup(args)
        return model, tokenizer, device, WORDS
    qwen2 = Qwen2Config(**QWEN2_CONFIGS[config])
    tokenizer, words = id_word_tokenizer(qwen2.vocab_size)
    device = resolve_device(args.device)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    torch.manual_seed(args.seed)
    # A backbone that LoRA leaves frozen need not be float32: in bf16 a 7B one takes 15 GiB.
    dtype = torch.bfloat16 if args.mode == "lora" and bf16_base else torch.float32
    # Initialized where it will run: filling 7B random weights on the CPU takes minutes.
    with device:
        backbone = AutoModel.from_config(qwen2, dtype=dtype, attn_implementation=attention)
    if args.mode == "lora":
        backbone = add_lora(backbone, args.lora_rank)
    model = PRM(backbone)
    if args.gradient_checkpointing:
        enable_gradient_checkpointing(model)
    return model.to(device), tokenizer, device, words


def _text(rng: random.Random, words: Sequence[str], bounds: tuple[int, int]) -> str:
    return " ".join(rng.choices(words, k=rng.randint(*bounds)))


def synthetic_examples(words: Sequence[str], count: int, seed: int) -> list[Example]:
    """``count`` labeled solutions of PRM800K shape, each to its own problem."""
    rng = random.Random(seed)
    examples = []
    for index in range(count):
        steps = [_text(rng, words, STEP_WORDS) for _ in range(rng.randint(*STEPS_PER_SOLUTION))]
        labels: list[int | None] = [rng.choice(STEP_RATINGS) for _ in steps]
        if rng.random() < ENDS_IN_ERROR:
            labels[-1] = -1
        examples.append(Example(index, _text(rng, words, PROBLEM_WORDS), steps, labels))
    return examples


@dataclass(frozen=True)
class Measurement:
    phase: str
    count: int
    """Optimizer steps (training) or solutions (scoring)."""
    sequences: int
    """Solutions trained on or scored."""
    tokens: int
    seconds: float
    flops_per_token: float
    padding: float
    """Share of the batches' positions that were padding (computed, not measured)."""
    peak_memory_gib: float

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds

    @property
    def tflops(self) -> float:
        return self.flops_per_token * self.tokens_per_second / 1e12


def _reset_peak_memory(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def _peak_memory_gib(device: torch.device) -> float:
    """The GPU's peak allocation since the last reset; on CPU the process's peak RSS so far."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**30
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def padding_share(lengths: list[int], batches: list[list[int]]) -> float:
    """Share of padded positions when ``batches`` (index lists) are padded to their longest."""
    padded = sum(len(batch) * max(lengths[i] for i in batch) for batch in batches)
    return 1 - sum(lengths[i] for batch in batches for i in batch) / padded


def packed_padding_share(lengths: list[int], batches: list[list[int]], width: int) -> float:
    """Share of padded positions when each batch is packed into rows of ``width``."""
    rows = sum(len(pack_rows([lengths[i] for i in batch], width)) for batch in batches)
    return 1 - sum(lengths) / (rows * width)


def measure_training(
    model: PRM,
    tokenizer: PreTrainedTokenizerBase,
    args: TrainingArgs,
    words: Sequence[str],
    steps: int,
    warmup_steps: int,
    flops_per_token: float,
) -> Measurement:
    """Tokens/s of ``fit`` over ``steps`` optimizer steps, after ``warmup_steps`` untimed."""
    device = next(model.parameters()).device
    if warmup_steps:
        fit(model, tokenizer, synthetic_examples(words, warmup_steps * args.batch_size, 1), args)
    _reset_peak_memory(device)
    # One epoch of steps x batch_size examples is exactly `steps` full batches.
    examples = synthetic_examples(words, steps * args.batch_size, 2)
    stats = fit(model, tokenizer, examples, args)
    # Filled rows (``--pack-rows``) take as many steps as the rows the examples fill.
    if stats.optimizer_steps != steps and not (args.pack and args.pack_rows):
        raise AssertionError(f"fit took {stats.optimizer_steps} steps, not {steps}")
    # The private batch plan of fit's (only) epoch, to know how much of it was padding.
    lengths = [
        len(encode(tokenizer, e.problem, e.steps, e.labels, args.max_length).input_ids)
        for e in examples
    ]
    batches = _epoch_batches(lengths, args, 0, 0, 1)
    if args.pack:
        padding = packed_padding_share(lengths, batches, args.max_length)
    else:
        padding = padding_share(lengths, batches)
    return Measurement(
        "train",
        stats.optimizer_steps,
        len(examples),
        stats.tokens,
        stats.seconds,
        flops_per_token,
        padding,
        _peak_memory_gib(device),
    )


def profile_training(
    model: PRM,
    tokenizer: PreTrainedTokenizerBase,
    args: TrainingArgs,
    words: Sequence[str],
    steps: int,
    path: Path,
) -> None:
    """Write to ``path`` where ``steps`` more optimizer steps spend their time."""
    examples = synthetic_examples(words, steps * args.batch_size, 5)

    def run() -> tuple[str, float]:
        stats = fit(model, tokenizer, examples, args)
        return f"{stats.optimizer_steps} steps, {stats.tokens:,} tokens of fit", stats.seconds

    _write_profile(run, next(model.parameters()).device, path)


def profile_scoring(
    model: PRM,
    tokenizer: PreTrainedTokenizerBase,
    args: TrainingArgs,
    words: Sequence[str],
    batches: int,
    path: Path,
) -> None:
    """Write to ``path`` where scoring ``batches`` more batches of solutions spends its time."""
    device = next(model.parameters()).device
    count = batches * score_batch_size_on(args, device)
    items = [(e.problem, e.steps) for e in synthetic_examples(words, count, 6)]

    def run() -> tuple[str, float]:
        _, done = score_with_throughput(model, tokenizer, items, args)
        return f"{done.solutions} solutions, {done.tokens:,} tokens scored", done.seconds

    _write_profile(run, device, path)


def _write_profile(run: Callable[[], tuple[str, float]], device: torch.device, path: Path) -> None:
    """Profile ``run`` (which says what it did and in how many seconds) and write to ``path``
    the wall time, the device's busy time and the operators that took most of it."""
    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities) as profiled:
        done, seconds = run()
    averages = profiled.key_averages()
    summary = f"{done} in {seconds:.3f} s (profiled, so slower than unprofiled)"
    if device.type == "cuda":
        # Kernels alone, as the table's own total: a user annotation's time repeats theirs.
        busy = sum(
            e.self_device_time_total / 1e6
            for e in averages
            if e.device_type.name != "CPU" and not e.is_user_annotation
        )
        # Well under 100% means the host's launches, not the kernels, bound it.
        summary += f"; device busy {busy:.3f} s ({100 * busy / seconds:.0f}%)"
    sort = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"
    table = averages.table(sort_by=sort, row_limit=40, max_name_column_width=70)
    path.write_text(summary + "\n" + table)
    print(summary)


def measure_scoring(
    model: PRM,
    tokenizer: PreTrainedTokenizerBase,
    args: TrainingArgs,
    words: Sequence[str],
    solutions: int,
    flops_per_token: float,
) -> Measurement:
    """Solutions/s and tokens/s of scoring ``solutions`` solutions, after two warmup batches."""
    device = next(model.parameters()).device

    def items(count: int, seed: int) -> list[tuple[str, list[str]]]:
        return [(e.problem, e.steps) for e in synthetic_examples(words, count, seed)]

    per_batch = score_batch_size_on(args, device)
    # Two batches of different lengths: compiled layers recompile once for the second shape.
    score_with_throughput(model, tokenizer, items(2 * per_batch, 3), args)
    _reset_peak_memory(device)
    measured = items(solutions, 4)
    _, throughput = score_with_throughput(model, tokenizer, measured, args)
    # The windows and batches step_probabilities makes (private), for the padding share.
    lengths = [len(w.encoded.input_ids) for w in _windows(tokenizer, measured, args.max_length)]
    batches = length_batches(lengths, per_batch, args.max_tokens_per_batch)
    return Measurement(
        "score",
        throughput.solutions,
        throughput.solutions,
        throughput.tokens,
        throughput.seconds,
        flops_per_token,
        padding_share(lengths, batches),
        _peak_memory_gib(device),
    )


def training_flops_per_token(mode: str, multiplying: int) -> int:
    """Model FLOPs a trained token costs: 2N forward, 2N for the inputs' gradients, and in
    ``full`` mode 2N more for the weights' (a frozen LoRA backbone has none)."""
    return (6 if mode == "full" else 4) * multiplying


def _batch(args: TrainingArgs, m: Measurement, score_batch: int) -> str:
    """What a batch is: solutions a batch, or filled rows and the solutions they took."""
    if m.phase == "score":
        return str(score_batch)
    if args.pack and args.pack_rows:
        return f"{args.pack_rows} rows ({m.sequences / m.count:.1f})"
    return str(args.batch_size)


def describe_training(args: TrainingArgs, attention: str) -> str:
    """The training options that change speed, in a few words."""
    parts = [args.mode, attention]
    parts += [name for name, on in (("packed", args.pack), ("compiled", args.compile)) if on]
    if args.gradient_checkpointing:
        parts.append("checkpointing")
    return ", ".join(parts)


def peak_tflops(device: torch.device, given: float | None) -> float | None:
    """The peak bf16 TFLOP/s MFU divides by: ``given``, else looked up; None on CPU."""
    if device.type != "cuda":
        return None
    if given is not None:
        return given
    name = torch.cuda.get_device_name(device)
    for fragment, tflops in PEAK_BF16_TFLOPS:
        if fragment in name:
            return tflops
    raise SystemExit(f"no known bf16 peak for {name!r}: pass --peak-tflops")


def format_table(rows: list[dict[str, str]]) -> str:
    """A Markdown table; numbers right-aligned."""
    headers = list(rows[0])
    widths = {h: max(len(h), *(len(row[h]) for row in rows)) for h in headers}

    def line(cells: dict[str, str]) -> str:
        return "| " + " | ".join(cells[h].rjust(widths[h]) for h in headers) + " |"

    rule = "| " + " | ".join("-" * (widths[h] - 1) + ":" for h in headers) + " |"
    return "\n".join([line({h: h for h in headers}), rule, *(line(row) for row in rows)])


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.worker", description="Time PRM training and scoring."
    )
    parser.add_argument("--config", choices=CONFIGS, default=TINY)
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument("--steps", type=int, default=20, help="timed optimizer steps")
    parser.add_argument("--warmup-steps", type=int, default=3, help="untimed steps first")
    parser.add_argument("--batch-size", type=int, default=TrainingArgs.batch_size)
    parser.add_argument("--max-length", type=int, default=TrainingArgs.max_length)
    parser.add_argument("--solutions", type=int, default=256, help="solutions to score")
    parser.add_argument("--score-batch-size", type=int, help="default: one on a CPU, 32 on a GPU")
    parser.add_argument(
        "--bf16",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="bf16 autocast (CUDA only); default: on where the GPU supports it",
    )
    parser.add_argument("--gradient-checkpointing", action="store_true")
    parser.add_argument(
        "--mode", choices=("full", "lora"), default="full", help="what training updates"
    )
    parser.add_argument(
        "--bf16-base",
        action="store_true",
        help="lora: the frozen backbone in bf16 (needs bf16 autocast or --master-weights)",
    )
    parser.add_argument(
        "--master-weights", action="store_true", help="bf16 weights, float32 masters"
    )
    parser.add_argument(
        "--pack", action="store_true", help="training rows of several solutions, no padding"
    )
    parser.add_argument(
        "--pack-rows",
        type=int,
        default=0,
        help="with --pack: each batch as many solutions as fill this many rows (0: "
        "--batch-size solutions)",
    )
    parser.add_argument(
        "--compile", action="store_true", help="each decoder layer through torch.compile"
    )
    parser.add_argument(
        "--attention",
        choices=("sdpa", "eager", "flex_attention"),
        default="sdpa",
        help="the qwen2 configs' attention implementation",
    )
    parser.add_argument("--json", type=Path, help="also append the rows here (JSON lines)")
    parser.add_argument(
        "--phases", choices=("both", "train", "score"), default="both", help="what to time"
    )
    parser.add_argument("--peak-tflops", type=float, help="the GPU's peak bf16 TFLOP/s")
    parser.add_argument(
        "--profile",
        type=Path,
        help="after timing, profile 3 more training steps and write the operator table here "
        "(and 3 batches of scoring beside it, NAME.score.txt for NAME.txt)",
    )
    args = parser.parse_args(argv)
    given = [args.steps, args.batch_size, args.solutions, args.score_batch_size]
    if min(n for n in given if n is not None) < 1:
        parser.error("--steps, --batch-size, --solutions and --score-batch-size must be >= 1")
    if args.bf16_base and args.mode != "lora":
        parser.error("--bf16-base: only lora mode leaves the backbone frozen")
    if args.warmup_steps < 0:
        parser.error("--warmup-steps must be >= 0")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch sees no CUDA device")
    return args


def main(argv: list[str] | None = None) -> int:
    options = parse_args(argv)
    use_expandable_cuda_segments()  # as the worker does
    args = TrainingArgs(
        base_model=options.config,
        epochs=1,
        batch_size=options.batch_size,
        max_length=options.max_length,
        device=options.device,
        bf16=options.bf16,
        gradient_checkpointing=options.gradient_checkpointing,
        score_batch_size=options.score_batch_size,
        mode=options.mode,
        master_weights=options.master_weights,
        pack=options.pack,
        pack_rows=options.pack_rows,
        compile=options.compile,
    )
    model, tokenizer, device, words = build(
        options.config, args, options.attention, options.bf16_base
    )
    peak = peak_tflops(device, options.peak_tflops)
    parameters = sum(p.numel() for p in model.parameters())
    multiplying = parameters - input_embeddings(model.backbone).weight.numel()
    backbone_config = model.backbone.config
    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(
        f"torch {torch.__version__}, transformers {transformers.__version__}, "
        f"{torch.get_num_threads()} CPU threads, device {device_name}"
        + (f" (peak bf16 {peak:g} TFLOP/s)" if peak else "")
    )
    print(
        f"{options.config}: {backbone_config.model_type}, hidden {backbone_config.hidden_size}, "
        f"{backbone_config.num_hidden_layers} layers, vocab {backbone_config.vocab_size}, "
        f"attention {backbone_config._attn_implementation}"
        + (f", TINY_CONFIG {TINY_CONFIG}" if options.config == TINY else "")
    )

    measurements = []
    if options.phases in ("both", "train"):
        measurements.append(
            measure_training(
                model,
                tokenizer,
                args,
                words,
                options.steps,
                options.warmup_steps,
                training_flops_per_token(args.mode, multiplying),
            )
        )
        if options.profile:
            profile_training(model, tokenizer, args, words, 3, options.profile)
    if options.phases in ("both", "score"):
        measurements.append(
            measure_scoring(model, tokenizer, args, words, options.solutions, 2 * multiplying)
        )
        if options.profile:
            scoring_profile = options.profile.with_suffix(".score" + options.profile.suffix)
            profile_scoring(model, tokenizer, args, words, 3, scoring_profile)

    # On CUDA, training autocasts fp32 weights; scoring runs bf16 copies of them.
    precision = {"train": "bf16 autocast", "score": "bf16 weights"}
    if args.master_weights:
        precision["train"] = "bf16 weights, fp32 masters"
    elif not uses_bf16(args, device):
        precision = {"train": "fp32", "score": "fp32"}
    score_batch = score_batch_size_on(args, device)
    rows = []
    for m in measurements:
        rows.append(
            {
                "config": options.config,
                "training": describe_training(args, options.attention),
                "params": f"{parameters / 1e6:,.1f}M",
                "matmul params": f"{multiplying / 1e6:,.1f}M",
                "device": device.type,
                "precision": precision[m.phase],
                "phase": m.phase,
                "count": f"{m.count} {'steps' if m.phase == 'train' else 'solutions'}",
                "batch": _batch(args, m, score_batch),
                "tokens": f"{m.tokens:,}",
                "padding": f"{100 * m.padding:.1f}%",
                "seconds": f"{m.seconds:.2f}",
                "tokens/s": f"{m.tokens_per_second:,.1f}",
                "solutions/s": f"{m.sequences / m.seconds:,.2f}",
                "model TFLOP/s": f"{m.tflops:.4f}",
                "MFU": "n/a" if peak is None else f"{100 * m.tflops / peak:.1f}%",
                "peak memory GiB": f"{m.peak_memory_gib:.1f}",
            }
        )
    print()
    print(format_table(rows))
    if options.json:
        with options.json.open("a") as out:
            out.writelines(json.dumps(row) + "\n" for row in rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
