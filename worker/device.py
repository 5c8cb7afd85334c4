"""Device and precision: which torch device, bf16 or float32, and scoring batch size."""

from __future__ import annotations

import os
from typing import Literal, Protocol

import torch

Device = Literal["auto", "cpu", "cuda"]


class PrecisionArgs(Protocol):
    """What the precision and batch choices read of worker/training_args.py's
    ``TrainingArgs`` (a protocol, since training_args imports this module)."""

    @property
    def bf16(self) -> bool | None: ...

    @property
    def score_batch_size(self) -> int | None: ...


def resolve_device(device: Device) -> torch.device:
    """The torch device for ``device``; under torchrun, this process's GPU."""
    if device == "cpu" or (device == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))


def uses_bf16(args: PrecisionArgs, device: torch.device) -> bool:
    if args.bf16 is not None:
        return args.bf16
    if device.type == "cuda":
        return bool(torch.cuda.is_bf16_supported())
    return cpu_has_amx()


def cpu_has_amx() -> bool:
    """Whether this CPU multiplies bf16 matrices in AMX tiles (Sapphire Rapids and later).

    There bf16 runs a 135M model about 2.3x faster than float32 (BENCHMARKS.md); without
    AMX, bf16 on a CPU is emulated and slower, so float32 stays the default.
    """
    check = getattr(torch.cpu, "_is_amx_tile_supported", None)
    if not callable(check):
        return False
    return check() is True


def use_expandable_cuda_segments() -> None:
    """Let the CUDA allocator grow segments in place, unless the environment says otherwise.

    Batches of varying length fragment the default allocator; near a full GPU it then frees
    its cache and retries (a device-wide sync). Must run before the first CUDA allocation.
    """
    os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")


def autocast(args: PrecisionArgs, device: torch.device, enabled: bool = True) -> torch.autocast:
    return torch.autocast(
        device.type, dtype=torch.bfloat16, enabled=enabled and uses_bf16(args, device)
    )


GPU_SCORE_BATCH_SIZE = 32


def score_batch_size_on(args: PrecisionArgs, device: torch.device) -> int:
    """Sequences per scoring forward pass: ``args.score_batch_size``, or one on a CPU and
    ``GPU_SCORE_BATCH_SIZE`` on a GPU.

    A GPU needs many sequences at once to be busy. A CPU is kept busy by one: batching there
    only adds padding and the slower masked attention (one sequence at a time read
    ProcessBench's math solutions 4x faster on 2 cores; BENCHMARKS.md, "PRM worker").
    """
    if args.score_batch_size is not None:
        return args.score_batch_size
    return 1 if device.type == "cpu" else GPU_SCORE_BATCH_SIZE
