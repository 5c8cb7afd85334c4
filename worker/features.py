"""A disk cache of step features: the frozen backbone's hidden state at every step end.

In ``head`` mode the backbone never changes, so the hidden state it gives a sequence never
changes either: the worker computes it once per sequence, ever, and every later run trains
its head, evaluates and scores the pool from the cache. A cache belongs to one backbone: its
file is named by a fingerprint of the backbone's weights and the precision it ran in, so a
different model (or the same one in bf16) can never read another's features.

Entries are keyed by the exact token ids of a sequence and its step-end positions, and hold
the features as float16 (half the disk of float32; a feature is a bf16 or float32 hidden
state, and ``round_features`` gives every feature, cached or fresh, the same rounding).
SQLite keeps them: one file, safe against a crash mid-write, read in batches.

A sequence cut after one of its step ends is found too, with no forward pass: a causal
model's state at a position never depends on later tokens, so the features of a labeled
path that stops at its first error are the first rows of its whole solution's. Each entry
also files the key of every such step prefix (``prefix_keys``).
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from worker.device import uses_bf16
from worker.model import PRM
from worker.training_args import TrainingArgs

FEATURE_DTYPE = np.float16
_LOOKUP_BATCH = 500
"""Keys per SELECT: SQLite caps the parameters of one statement."""


def round_features(features: np.ndarray) -> np.ndarray:
    """Features as stored: float16 values, handed out as float32."""
    return features.astype(FEATURE_DTYPE).astype(np.float32)


def backbone_fingerprint(backbone: nn.Module, precision: str) -> str:
    """A digest of every parameter and buffer of ``backbone`` and the precision it runs in."""
    digest = hashlib.sha256(precision.encode())
    for name, tensor in backbone.state_dict().items():
        digest.update(name.encode())
        digest.update(str(tuple(tensor.shape)).encode())
        digest.update(tensor.detach().to("cpu").contiguous().view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()[:32]


def sequence_key(input_ids: Sequence[int], positions: Sequence[int]) -> bytes:
    """The cache key of one sequence: its tokens and where its step features are read."""
    digest = hashlib.sha256(np.asarray(input_ids, dtype=np.int64).tobytes())
    digest.update(b"@")
    digest.update(np.asarray(positions, dtype=np.int64).tobytes())
    return digest.digest()


def prefix_keys(input_ids: Sequence[int], positions: Sequence[int]) -> list[bytes]:
    """The key of the sequence cut after each of its step ends (``sequence_key`` of the
    tokens up to that end token and the ends so far), in one pass over the tokens."""
    tokens = np.asarray(input_ids, dtype=np.int64)
    ends = np.asarray(positions, dtype=np.int64)
    digest = hashlib.sha256()
    keys = []
    done = 0
    for count, end in enumerate(ends, start=1):
        digest.update(tokens[done : end + 1].tobytes())
        done = int(end) + 1
        key = digest.copy()
        key.update(b"@")
        key.update(ends[:count].tobytes())
        keys.append(key.digest())
    return keys


class FeatureCache:
    """Step features of one backbone, in one SQLite file under ``directory``.

    With ``remember``, what was read once is kept in memory too, also by the solution's
    text: a bench that retrains on the same features hundreds of times reads the file and
    tokenizes each solution once.
    """

    def __init__(self, directory: str | Path, fingerprint: str, remember: bool = False) -> None:
        self.path = Path(directory) / f"{fingerprint}.sqlite3"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fingerprint = fingerprint
        self.hits = 0
        self.misses = 0
        self.memory: dict[bytes, np.ndarray] | None = {} if remember else None
        self.texts: dict[TextKey, np.ndarray] | None = {} if remember else None
        with self._connect() as connection:
            connection.execute(
                "CREATE TABLE IF NOT EXISTS features "
                "(key BLOB PRIMARY KEY, steps INTEGER NOT NULL, data BLOB NOT NULL)"
            )
            connection.execute(
                "CREATE TABLE IF NOT EXISTS prefixes "
                "(key BLOB PRIMARY KEY, whole BLOB NOT NULL, steps INTEGER NOT NULL)"
            )

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        """A connection that commits on success and is closed either way."""
        # A worker and a bench may share a cache: wait for the other's write, do not fail.
        connection = sqlite3.connect(self.path, timeout=60)
        try:
            with connection:
                yield connection
        finally:
            connection.close()

    def get_many(self, keys: Sequence[bytes], width: int) -> dict[bytes, np.ndarray]:
        """The cached features among ``keys``, each a (steps, width) float32 array: a
        sequence's own, or the first rows of a longer sequence it is a step prefix of."""
        memory = self.memory if self.memory is not None else {}
        found = {key: memory[key] for key in keys if key in memory}
        unread = [key for key in keys if key not in found]
        with self._connect() as connection:
            for key, steps, data in _select(connection, "key, steps, data", "features", unread):
                found[key] = _array(data, steps, width)
            missing = list(dict.fromkeys(k for k in unread if k not in found))
            # Several of the keys asked for can be step prefixes of one whole sequence.
            prefixes: dict[bytes, list[tuple[bytes, int]]] = {}
            for key, whole, steps in _select(connection, "key, whole, steps", "prefixes", missing):
                prefixes.setdefault(whole, []).append((key, steps))
            wholes = list(prefixes)
            for whole, total, data in _select(connection, "key, steps, data", "features", wholes):
                values = _array(data, total, width)
                for key, steps in prefixes[whole]:
                    found[key] = values[:steps]
        if self.memory is not None:
            self.memory.update(found)
        self.hits += len(found)
        self.misses += len(set(keys)) - len(found)
        return found

    def recall(self, items: Sequence[tuple[str, list[str]]], max_length: int) -> TextRecall:
        """The remembered features of each (problem, steps) item, None where there are none
        (always None without ``remember``)."""
        texts = self.texts if self.texts is not None else {}
        return [texts.get(text_key(p, s, max_length)) for p, s in items]

    def remember(
        self,
        items: Sequence[tuple[str, list[str]]],
        features: Sequence[np.ndarray],
        max_length: int,
    ) -> None:
        """Keep each item's whole (steps, width) features by its text, read-only (callers
        share them), where the cache remembers."""
        if self.texts is None:
            return
        for (problem, steps), values in zip(items, features, strict=True):
            values.flags.writeable = False
            self.texts[text_key(problem, steps, max_length)] = values

    def put_many(self, entries: Iterable[tuple[bytes, np.ndarray, list[bytes]]]) -> None:
        """Store (key, features, prefix keys) entries; what is stored already stays."""
        rows, prefixes = [], []
        for key, values, prefix in entries:
            rows.append((key, len(values), values.astype(FEATURE_DTYPE).tobytes()))
            prefixes += [(p, key, steps) for steps, p in enumerate(prefix, start=1) if p != key]
        with self._connect() as connection:
            connection.executemany(
                "INSERT OR IGNORE INTO features (key, steps, data) VALUES (?, ?, ?)", rows
            )
            connection.executemany(
                "INSERT OR IGNORE INTO prefixes (key, whole, steps) VALUES (?, ?, ?)", prefixes
            )

    def __len__(self) -> int:
        with self._connect() as connection:
            count: int = connection.execute("SELECT count(*) FROM features").fetchone()[0]
        return count


TextKey = tuple[str, tuple[str, ...], int]
TextRecall = list[np.ndarray | None]


def text_key(problem: str, steps: list[str], max_length: int) -> TextKey:
    """A solution by its text and the truncation it is read with: the same tokenizer, as
    one cache's backbone has, makes the same sequences of it."""
    return (problem, tuple(steps), max_length)


def _select(
    connection: sqlite3.Connection, columns: str, table: str, keys: Sequence[bytes]
) -> Iterator[tuple[bytes, Any, Any]]:
    """Rows of ``table`` whose key is among ``keys``, a batch of keys per statement."""
    for start in range(0, len(keys), _LOOKUP_BATCH):
        chunk = keys[start : start + _LOOKUP_BATCH]
        marks = ",".join("?" * len(chunk))
        yield from connection.execute(
            f"SELECT {columns} FROM {table} WHERE key IN ({marks})", chunk
        )


def _array(data: bytes, steps: int, width: int) -> np.ndarray:
    return np.frombuffer(data, dtype=FEATURE_DTYPE).reshape(steps, width).astype(np.float32)


CACHE_LAYOUT = "steplabel-features/2"
"""Names what an entry holds (the readings, and prefixes filed); a new layout starts a new
file, so an older cache is never misread."""


def cache_for(
    model: PRM, args: TrainingArgs, directory: Path, remember: bool = False
) -> FeatureCache | None:
    """The model's feature cache under ``directory`` in ``head`` mode (its backbone is
    frozen); None in the other modes, where the backbone changes as it trains."""
    if args.mode != "head":
        return None
    precision = "bf16" if uses_bf16(args, next(model.parameters()).device) else "fp32"
    reading = ",".join([CACHE_LAYOUT, precision, *model.readings])
    return FeatureCache(directory, backbone_fingerprint(model.backbone, reading), remember)
