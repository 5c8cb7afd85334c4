"""Batching: sequences grouped by length, padded or packed into rows, and copied to the device."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import torch

from worker.layout import IGNORE_INDEX, Encoded


def length_batches(
    lengths: list[int], max_sequences: int, max_tokens: int | None = None
) -> list[list[int]]:
    """Indices grouped into batches of similar length, shortest first.

    A batch holds at most ``max_sequences`` sequences and, with ``max_tokens``, at most
    that many padded tokens (a longer single sequence gets a batch of its own).
    """
    batches: list[list[int]] = []
    current: list[int] = []
    for index in sorted(range(len(lengths)), key=lengths.__getitem__):
        # Sorted ascending, so the newcomer is the longest: it sets the padded width.
        padded = (len(current) + 1) * lengths[index]
        if current and (
            len(current) >= max_sequences or (max_tokens is not None and padded > max_tokens)
        ):
            batches.append(current)
            current = []
        current.append(index)
    if current:
        batches.append(current)
    return batches


@dataclass(frozen=True)
class Batch:
    input_ids: torch.Tensor
    attention_mask: torch.Tensor | None
    """None in a packed batch: there ``position_ids`` say where each sequence begins."""
    label_ids: torch.Tensor
    tokens: int
    """Tokens that are not padding, counted on the host: reading it never waits for the GPU."""
    position_ids: torch.Tensor | None = None
    """Each token's position in its own sequence (packed batches); None: 0, 1, ... per row."""


def collate(encoded: list[Encoded], pad_token_id: int, device: torch.device) -> Batch:
    """Right-pad a batch to its longest sequence; padding is masked and unlabeled."""
    lengths = [len(e.input_ids) for e in encoded]
    width = max(lengths)
    starts = [(row, 0) for row in range(len(encoded))]
    input_ids, label_ids = _laid_out(encoded, starts, (len(encoded), width), pad_token_id)
    attention_mask = (torch.arange(width) < torch.tensor(lengths)[:, None]).long()
    # Pinned memory and non-blocking copies on CUDA: the host prepares the next batch
    # while the GPU still runs this one, instead of waiting for the GPU at every copy.
    return Batch(
        _to_device(input_ids, device),
        _to_device(attention_mask, device),
        _to_device(label_ids, device),
        sum(lengths),
    )


def collate_packed(
    encoded: list[Encoded], pad_token_id: int, device: torch.device, width: int
) -> Batch:
    """Pack a batch's sequences, each whole, into rows of exactly ``width`` tokens.

    Rows are filled by ``pack_rows``; a row's unused tail is padding, unlabeled. There is
    no attention mask: ``position_ids`` restart at 0 at each sequence, and transformers,
    given position ids and no mask, builds a block-diagonal causal mask from where they
    restart, so a solution attends to itself alone, at the positions it has unpacked. The
    tail's positions restart too: it is a segment of its own, and no solution reads it.
    """
    lengths = [len(e.input_ids) for e in encoded]
    rows = pack_rows(lengths, width)
    starts: list[tuple[int, int]] = [(0, 0)] * len(encoded)
    position_ids = torch.empty((len(rows), width), dtype=torch.long)
    for row, members in enumerate(rows):
        filled = 0
        for index in members:
            starts[index] = (row, filled)
            filled += lengths[index]
        segments = [lengths[index] for index in members] + [width - filled]
        position_ids[row] = torch.cat([torch.arange(n) for n in segments])
    input_ids, label_ids = _laid_out(encoded, starts, (len(rows), width), pad_token_id)
    return Batch(
        _to_device(input_ids, device),
        None,
        _to_device(label_ids, device),
        sum(lengths),
        _to_device(position_ids, device),
    )


def pack_rows(lengths: list[int], width: int) -> list[list[int]]:
    """The indices of ``lengths`` in rows of at most ``width`` tokens, first-fit decreasing.

    Longest first, each into the first row with room for it: close to the fewest rows
    (at most 11/9 of them, plus one), and the same rows for the same lengths.
    """
    if any(n > width for n in lengths):
        raise ValueError(f"a sequence of {max(lengths)} tokens does not fit a row of {width}")
    rows: list[list[int]] = []
    room: list[int] = []
    for index in sorted(range(len(lengths)), key=lengths.__getitem__, reverse=True):
        row = next((r for r, free in enumerate(room) if free >= lengths[index]), len(rows))
        if row == len(rows):
            rows.append([])
            room.append(width)
        rows[row].append(index)
        room[row] -= lengths[index]
    return rows


FILL_LOOKAHEAD = 32
"""Solutions ``fill_rows`` sets aside, at most, while it looks for ones that fit a gap."""


def fill_rows(order: list[int], lengths: list[int], rows: int, width: int) -> list[list[int]]:
    """The indices of ``order`` in batches that each fill ``rows`` rows of ``width`` tokens.

    In order, each joins the batch if the batch still packs into ``rows`` rows as
    ``collate_packed`` will pack it (``pack_rows``); one that does not is set aside for the
    next batch, and the batch ends once ``FILL_LOOKAHEAD`` are set aside or none is left.
    Every index lands in one batch, in about the order given.
    """
    if any(lengths[i] > width for i in order):
        raise ValueError(f"a sequence of {max(lengths)} tokens does not fit a row of {width}")
    batches: list[list[int]] = []
    waiting = deque(order)
    while waiting:
        batch: list[int] = []
        aside: list[int] = []
        while waiting and len(aside) < FILL_LOOKAHEAD:
            index = waiting.popleft()
            wanted = [lengths[i] for i in (*batch, index)]
            # The sum rules most out at once; packing decides the rest.
            if sum(wanted) <= rows * width and len(pack_rows(wanted, width)) <= rows:
                batch.append(index)
            else:
                aside.append(index)
        waiting.extendleft(reversed(aside))
        batches.append(batch)  # never empty: its first index met an empty batch
    return batches


def _laid_out(
    encoded: list[Encoded],
    starts: list[tuple[int, int]],
    shape: tuple[int, int],
    pad_token_id: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(input_ids, label_ids) of ``shape``: each sequence from its (row, column) in
    ``starts``, padding and IGNORE_INDEX everywhere else."""
    input_ids = torch.full(shape, pad_token_id, dtype=torch.long)
    label_ids = torch.full(shape, IGNORE_INDEX, dtype=torch.long)
    for item, (row, start) in zip(encoded, starts, strict=True):
        end = start + len(item.input_ids)
        input_ids[row, start:end] = torch.tensor(item.input_ids)
        label_ids[row, start:end] = torch.tensor(item.label_ids)
    return input_ids, label_ids


def device_tensor(values: list[int], device: torch.device) -> torch.Tensor:
    """``values`` as a tensor on ``device``, copied without waiting for the GPU."""
    return _to_device(torch.tensor(values, dtype=torch.long), device)


def _to_device(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    if device.type != "cuda":
        return tensor
    return tensor.pin_memory().to(device, non_blocking=True)
