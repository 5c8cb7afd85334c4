"""Checkpoints that describe themselves: write one atomically, load one, size and prune them.

A checkpoint directory holds the decoder as a Hugging Face model (config.json,
model.safetensors; in ``lora`` mode the adapters merged in), the head
(prm_head.safetensors), the tokenizer, training_args.json, metrics.json and meta.json.

In ``head`` mode on a base model directory the backbone is frozen: the same for every run,
so instead of a copy of it (340 MB for SmolLM2-135M, beside a 15 MB head) the checkpoint
holds backbone.json, which names the base model and the sha256 of the backbone's weights
as the run had them; loading rebuilds the backbone from the base model and checks them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import tokenizers
import torch
import torch.distributed as dist
import transformers
from safetensors.torch import load_file, save_model
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from transformers import AutoTokenizer, PreTrainedTokenizerBase

from worker.build import head_for, load_backbone, load_local, merge_lora, readings_for
from worker.device import Device, resolve_device
from worker.head import load_head_state
from worker.layout import LABELS, STEP_TOKEN
from worker.model import PRM
from worker.training_args import TINY, TrainingArgs

CHECKPOINT_FORMAT = "steplabel-prm/1"
HEAD_FILE = "prm_head.safetensors"
BACKBONE_REFERENCE = "backbone.json"


def _is_main_rank() -> bool:
    return not (dist.is_available() and dist.is_initialized()) or dist.get_rank() == 0


def _versions() -> dict[str, str]:
    return {
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__,
        "numpy": np.__version__,
    }


def _write_json(path: Path, value: Any) -> None:
    # Metrics may hold dataclasses (FitStats) and numpy scalars.
    def plain(item: Any) -> Any:
        if dataclasses.is_dataclass(item) and not isinstance(item, type):
            return dataclasses.asdict(item)
        if isinstance(item, np.generic):
            return item.item()
        raise TypeError(f"not JSON serializable: {type(item).__name__}")

    path.write_text(json.dumps(value, indent=2, sort_keys=True, default=plain) + "\n")


def save_checkpoint(
    directory: str | os.PathLike[str],
    model: nn.Module,
    tokenizer: PreTrainedTokenizerBase,
    args: TrainingArgs,
    metrics: dict[str, Any],
    label_count: int,
) -> None:
    """Write a checkpoint that describes itself; under torchrun only rank 0 writes.

    The directory is written beside the target and renamed into place, so a crash never
    leaves half a checkpoint; an existing checkpoint at the target is replaced. LoRA
    adapters are merged into the model's weights first (the model is changed in place).
    """
    if not _is_main_rank():
        return
    prm: PRM = model.module if isinstance(model, DistributedDataParallel) else model  # type: ignore[assignment]
    merge_lora(prm)
    target = Path(directory)
    if target.exists() and not (target / "meta.json").exists():
        raise FileExistsError(f"{target} exists and is not a checkpoint")
    staging = target.with_name(f".{target.name}.partial-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    if args.mode == "head" and args.base_model != TINY:
        _write_json(staging / BACKBONE_REFERENCE, _backbone_reference(prm, args))
    else:
        prm.backbone.save_pretrained(staging, safe_serialization=True)
    save_model(prm.head, str(staging / HEAD_FILE))
    tokenizer.save_pretrained(staging)
    _write_json(staging / "training_args.json", dataclasses.asdict(args))
    _write_json(staging / "metrics.json", metrics)
    _write_json(staging / "meta.json", _meta(prm, args, label_count))
    shutil.rmtree(target, ignore_errors=True)
    os.replace(staging, target)


def _meta(model: PRM, args: TrainingArgs, label_count: int) -> dict[str, Any]:
    return {
        "format": CHECKPOINT_FORMAT,
        "label_count": label_count,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "base_model": args.base_model,
        "mode": args.mode,
        "model_type": model.backbone.config.model_type,
        "layers": model.backbone.config.num_hidden_layers,
        "step_token": STEP_TOKEN,
        "classes": list(LABELS),
        "versions": _versions(),
    }


def _backbone_reference(model: PRM, args: TrainingArgs) -> dict[str, Any]:
    return {
        "base_model": str(Path(args.base_model).resolve()),
        "backbone_depth": args.backbone_depth,
        "sha256": weights_digest(model.backbone),
    }


def weights_digest(module: nn.Module) -> str:
    """The sha256 of a module's tensors: names, dtypes, shapes and values."""
    digest = hashlib.sha256()
    for name, tensor in sorted(module.state_dict().items()):
        digest.update(f"{name} {tensor.dtype} {tuple(tensor.shape)}\n".encode())
        raw = tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8)
        digest.update(raw.numpy().tobytes())
    return digest.hexdigest()


def _rebuilt_backbone(path: Path, args: TrainingArgs) -> PRM:
    """The frozen backbone a head-mode checkpoint names, rebuilt from its base model and
    checked against the weights the run had."""
    reference = json.loads((path / BACKBONE_REFERENCE).read_text())
    base = Path(reference["base_model"])
    if not base.is_dir():
        raise ValueError(
            f"{path}: its backbone is the base model at {base}, which is not there: "
            "prepare it again there (python -m worker prepare)"
        )
    model, _ = load_local(base, args.seed, reference["backbone_depth"])
    if weights_digest(model.backbone) != reference["sha256"]:
        raise ValueError(
            f"{path}: the base model at {base} no longer has the weights this checkpoint's "
            "head was trained on (another model, or another conversion of it)"
        )
    return model


def load_training_args(directory: str | os.PathLike[str]) -> TrainingArgs:
    """A checkpoint's training arguments (keys this version does not know are ignored)."""
    saved = json.loads((Path(directory) / "training_args.json").read_text())
    known = {f.name for f in dataclasses.fields(TrainingArgs)}
    return TrainingArgs(**{k: v for k, v in saved.items() if k in known})


def load_checkpoint(
    directory: str | os.PathLike[str], device: Device | None = None
) -> tuple[PRM, PreTrainedTokenizerBase, TrainingArgs, dict[str, Any]]:
    """A saved PRM in eval mode on ``device`` (default: the saved args' device), with its
    tokenizer, training arguments and meta.json."""
    path = Path(directory)
    meta = json.loads((path / "meta.json").read_text())
    if meta.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"{path}: not a {CHECKPOINT_FORMAT} checkpoint")
    args = load_training_args(path)
    if (path / BACKBONE_REFERENCE).exists():
        model = _rebuilt_backbone(path, args)
    else:
        model = PRM(load_backbone(path))
    head = load_file(str(path / HEAD_FILE))
    # A head saved before heads had readings is one linear layer on the last layer: the
    # PRM's default. Any other is the head its arguments describe.
    if set(head) != {"weight", "bias"}:
        model.readings = readings_for(args)
        model.head = head_for(args, model.width)
    load_head_state(model.head, head)
    if args.mode == "head":
        model.backbone.requires_grad_(False)
    tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    model.to(resolve_device(device or args.device)).eval()
    return model, tokenizer, args, meta


def directory_bytes(directory: str | os.PathLike[str]) -> int:
    """The size of the files under ``directory`` (0 when it is gone)."""
    path = Path(directory)
    if not path.is_dir():
        return 0
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def remove_checkpoint(directory: str | os.PathLike[str]) -> None:
    """Delete a checkpoint directory; refuse anything that is not one."""
    path = Path(directory)
    if not path.exists():
        return
    if not (path / "meta.json").exists():
        raise FileExistsError(f"{path} is not a checkpoint; not removed")
    shutil.rmtree(path)
