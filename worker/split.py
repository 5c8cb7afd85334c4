"""The held-out split as data: which labels a PRM trains on, which judge it, and what a
checkpoint records of both.

A problem is held out when a hash of (the split seed, its ``split_key``) falls below the
held-out fraction (``worker.train.split_by_problem``); the key comes from the problem's
normalized text, so two typesettings of one problem fall on one side. The seed
is a setting of its own (``STEPLABEL_TRAIN_SPLIT_SEED``): a new training seed leaves the
held-out problems where they are. Held-out figures come only from labels on solutions no PRM
chose (the uniform control share, imports, hand-queued and pre-PRM generations): a PRM's
convincing wrong answers would drag its own figures down by construction.

Every checkpoint records its split's identity and the problems it trained on (hashes of
their normalized text, in its metrics.json), so that two PRMs are compared on held-out
problems only under one identity, and every evaluation set leaves out what either trained on.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.content_keys import normalized_problem
from app.core.config import Settings
from worker.train import Example, split_by_problem

SCHEME = "problem-hash/1"
"""How problems are put on a side; a new way of doing it gets a new name."""


@dataclass(frozen=True)
class Split:
    seed: int
    held_out_fraction: float

    @classmethod
    def of(cls, settings: Settings) -> Split:
        """The configured split: the training seed (``train_seed``) takes no part."""
        return cls(settings.train_split_seed, settings.train_held_out_fraction)

    @property
    def identity(self) -> str:
        """Equal for two runs exactly when they put every problem on the same side."""
        return f"{SCHEME} seed={self.seed} held_out={self.held_out_fraction:g}"

    def describe(self) -> dict[str, Any]:
        return {
            "identity": self.identity,
            "seed": self.seed,
            "held_out_fraction": self.held_out_fraction,
        }


# A problem is one problem by its normalized text (app/content_keys.py
# ``normalized_problem``), and the split and the leak checks both read it through the two
# functions below. They are two because each is stored: the split's assignment (every
# figure in BENCHMARKS.md, every held-out set) hashes ``split_key``'s crc32 with the
# split seed, and every checkpoint's metrics.json lists ``problem_hash``es of the problems
# it trained on. One function for both would move problems between the sides, or let the
# current checkpoint's problems leak into evaluation unseen.
# (app/content_keys.py ``problem_key`` is another thing: an imported row's content key.)


def split_key(text: str) -> int:
    """The split's unit (``Example.problem_id``): a crc32 of the problem's normalized text."""
    return zlib.crc32(normalized_problem(text).encode())


def problem_hash(text: str) -> str:
    """What checkpoints record of the problems they trained on, and what evaluation sets
    are checked against: a sha256 of the problem's normalized text, 16 hex digits."""
    return hashlib.sha256(normalized_problem(text).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class LabelExamples:
    """One label's training examples, and whether a PRM chose the solution it labels."""

    problem_id: int
    problem: str
    examples: list[Example]
    chosen_by_prm: bool


@dataclass(frozen=True)
class SplitLabels:
    train: list[Example]
    held_out: list[Example]
    """Examples of held-out problems from labels on solutions no PRM chose."""
    trained_labels: int
    held_out_labels: int
    chosen_left_out: int
    """Labels on held-out problems whose solution a PRM chose: neither trained on nor used
    to judge."""
    trained_problems: frozenset[str]
    """``problem_hash`` of every problem trained on."""


def split_labels(labels: list[LabelExamples], split: Split) -> SplitLabels:
    """Labels on training problems to train on; held-out ones no PRM chose to judge with."""
    everything = [e for label in labels for e in label.examples]
    _, held_out = split_by_problem(everything, split.held_out_fraction, split.seed)
    held = {e.problem_id for e in held_out}
    trained = [label for label in labels if label.problem_id not in held]
    judging = [label for label in labels if label.problem_id in held and not label.chosen_by_prm]
    return SplitLabels(
        train=[e for label in trained for e in label.examples],
        held_out=[e for label in judging for e in label.examples],
        trained_labels=len(trained),
        held_out_labels=len(judging),
        chosen_left_out=len(labels) - len(trained) - len(judging),
        trained_problems=frozenset(problem_hash(label.problem) for label in trained),
    )


def with_extra_training(parts: SplitLabels, extra: list[Example], split: Split) -> SplitLabels:
    """``parts`` with ``extra`` examples (labels from outside the team, e.g. PRM800K phase 1)
    trained on too, except those of a problem held out: a held-out problem (by the split's
    hash, or among the held-out examples) is never trained on, whoever labeled it."""
    _, held_out = split_by_problem(extra, split.held_out_fraction, split.seed)
    held = {e.problem_id for e in held_out} | {e.problem_id for e in parts.held_out}
    kept = [e for e in extra if e.problem_id not in held]
    return dataclasses.replace(
        parts,
        train=[*parts.train, *kept],
        trained_problems=parts.trained_problems | {problem_hash(e.problem) for e in kept},
    )


@dataclass(frozen=True)
class TrainedOn:
    """What a checkpoint records of its split: the identity and the problems trained on."""

    identity: str
    problems: frozenset[str]

    def record(self) -> dict[str, Any]:
        return {"identity": self.identity, "trained_problems": sorted(self.problems)}


def load_trained_on(checkpoint: Path) -> TrainedOn | None:
    """The split a checkpoint recorded in its metrics.json; None for a checkpoint made
    before splits were recorded (or an unreadable one): its split is unknown."""
    try:
        recorded = json.loads((checkpoint / "metrics.json").read_text())["trained_on"]
        return TrainedOn(str(recorded["identity"]), frozenset(recorded["trained_problems"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
