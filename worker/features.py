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
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch
from torch import nn

from worker.model import PRM, TrainingArgs, uses_bf16

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


class FeatureCache:
    """Step features of one backbone, in one SQLite file under ``directory``."""

    def __init__(self, directory: str | Path, fingerprint: str) -> None:
        self.path = Path(directory) / f"{fingerprint}.sqlite3"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fingerprint = fingerprint
        self.hits = 0
        self.misses = 0
        with self._connect() as connection:
            connection.execute(
                "CREATE TABLE IF NOT EXISTS features "
                "(key BLOB PRIMARY KEY, steps INTEGER NOT NULL, data BLOB NOT NULL)"
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
        """The cached features among ``keys``, each a (steps, width) float32 array."""
        found: dict[bytes, np.ndarray] = {}
        with self._connect() as connection:
            for start in range(0, len(keys), _LOOKUP_BATCH):
                chunk = keys[start : start + _LOOKUP_BATCH]
                marks = ",".join("?" * len(chunk))
                rows = connection.execute(
                    f"SELECT key, steps, data FROM features WHERE key IN ({marks})", chunk
                )
                for key, steps, data in rows:
                    values = np.frombuffer(data, dtype=FEATURE_DTYPE).reshape(steps, width)
                    found[key] = values.astype(np.float32)
        self.hits += len(found)
        self.misses += len(set(keys)) - len(found)
        return found

    def put_many(self, entries: Iterable[tuple[bytes, np.ndarray]]) -> None:
        rows = [
            (key, len(values), values.astype(FEATURE_DTYPE).tobytes()) for key, values in entries
        ]
        with self._connect() as connection:
            connection.executemany(
                "INSERT OR IGNORE INTO features (key, steps, data) VALUES (?, ?, ?)", rows
            )

    def __len__(self) -> int:
        with self._connect() as connection:
            count: int = connection.execute("SELECT count(*) FROM features").fetchone()[0]
        return count


def cache_for(model: PRM, args: TrainingArgs, directory: Path) -> FeatureCache | None:
    """The model's feature cache under ``directory`` in ``head`` mode (its backbone is
    frozen); None in the other modes, where the backbone changes as it trains."""
    if args.mode != "head":
        return None
    precision = "bf16" if uses_bf16(args, next(model.parameters()).device) else "fp32"
    return FeatureCache(directory, backbone_fingerprint(model.backbone, precision))
