"""A training run's metrics (``TrainingRun.metrics``) read into typed figures for the pages.

The worker writes them as JSON (worker/cycle.py). Failed runs, runs skipped for too few
labels and runs of older workers lack parts of it, so every reader here takes what it
finds and gives None (or an empty collection) for anything missing or malformed; nothing
here raises on odd input.
"""

from dataclasses import dataclass, field
from typing import Any

BEST_OF_N_SETS = {
    "best_of_n": "independent samples",
    "best_of_n_imported": "imported samples",
}
"""The best-of-N sets an evaluation may have, in the order the pages prefer them."""


@dataclass(frozen=True)
class Estimate:
    """A figure and its 95% bootstrap interval over ``n`` units, or why there is none."""

    value: float | None
    low: float | None = None
    high: float | None = None
    n: int | None = None
    """Problems or solutions the figure (and its resamples) is computed over."""
    status: str | None = None
    """Why there is no value, as the worker put it ("not enough data: ..."); None when
    there is one."""


@dataclass(frozen=True)
class BestOfN:
    """Per problem, whether the solution the PRM scores highest is right, beside a
    majority vote and a random pick among the same samples."""

    samples: str
    """Which set: "independent samples" (the evaluation files) or "imported samples"."""
    status: str | None
    """Why there are no figures; None when there are."""
    problems: int | None
    mean_n: float | None
    """Samples per problem, on average."""
    prm: Estimate | None
    majority: Estimate | None
    random: Estimate | None


@dataclass(frozen=True)
class SubsetFigures:
    """ProcessBench figures on one subset (gsm8k, math, ...) of its test part."""

    name: str
    f1: Estimate | None
    accuracy_erroneous: float | None
    """Share of the solutions with an error whose first error the PRM puts at its step."""
    accuracy_correct: float | None
    """Share of the solutions without an error that the PRM finds no error in."""
    erroneous: int | None
    correct: int | None


@dataclass(frozen=True)
class ProcessBench:
    threshold: float | None
    """The step score below which a step counts as the first error, chosen on the
    calibration part, never on the test part judged here."""
    f1: Estimate | None
    """The mean F1 over the subsets."""
    subsets: list[SubsetFigures]


@dataclass(frozen=True)
class Evaluation:
    """One PRM's figures on one run's evaluation sets."""

    sets: dict[str, int]
    """Size of each set (held-out examples and problems, ProcessBench parts, ...)."""
    step_auroc: Estimate | None
    processbench: ProcessBench | None
    best_of_n: list[BestOfN]
    """One per best-of-N set evaluated, in the order of BEST_OF_N_SETS."""
    tokens_per_second: float | None
    sequences_computed: int | None


@dataclass(frozen=True)
class Judgement:
    """One metric the gate judged: both PRMs' figures, their difference, the verdict."""

    metric: str
    new: Estimate | None
    current: Estimate | None
    difference: Estimate | None
    passed: bool
    verdict: str


@dataclass(frozen=True)
class Gate:
    """Whether the run's PRM replaced the current one, and on which figures."""

    promote: bool
    reason: str
    metric: str | None
    """The metric that decided: the first that failed, else the primary one."""
    new: Estimate | None
    current: Estimate | None
    difference: Estimate | None
    """New minus current on the same units (a paired bootstrap)."""
    primary: str | None = None
    margin: float | None = None
    judged: list[Judgement] = field(default_factory=list)
    not_judged: dict[str, str] = field(default_factory=dict)
    """Metrics the gate could not compare, and why."""
    error: str | None = None
    """Why the gate could not compare at all (the current checkpoint is missing)."""


@dataclass(frozen=True)
class Split:
    """Which problems a run held out: its identity, seed and share."""

    identity: str
    seed: int | None
    held_out_fraction: float | None


@dataclass(frozen=True)
class LeftOut:
    """Items an evaluation set lost, and why (a problem trained on, say)."""

    set: str
    unit: str
    count: int
    reason: str


@dataclass(frozen=True)
class Pace:
    """Whether the labelers were far enough into the open generation for a new one."""

    due: bool | None
    reason: str | None
    open_generation: int | None
    share_done: float | None


@dataclass(frozen=True)
class Selection:
    """What the run's active-learning selection queued."""

    strategy: str | None
    queued: int | None
    wrong_share: float | None
    """Share of wrong final answers among the strategy's picks (graded ones)."""
    pool_wrong_share: float | None
    """The same share over the whole pool: what a uniform pick would have yielded."""
    reason: str | None
    control: int | None = None
    """Of the queued, the uniform control share."""
    control_wrong_share: float | None = None
    taken_meanwhile: int | None = None
    """Picks another worker or a labeler took before they could be queued."""


@dataclass(frozen=True)
class RunMetrics:
    examples: int | None = None
    labels: int | None = None
    labels_trained: int | None = None
    """Labels on training problems; the others are held out (or left out)."""
    split: Split | None = None
    left_out: list[LeftOut] | None = None
    """What the evaluation sets left out, and why; None for a run that did not say."""
    skipped: str | None = None
    """Why the run stopped before training (too few labels)."""
    missing: dict[str, str] = field(default_factory=dict)
    """Per evaluation set the run had no files for, why (naming the setting)."""
    training_args: dict[str, Any] = field(default_factory=dict)
    """Every training argument, as the run recorded it (plain values only)."""
    train: dict[str, Any] = field(default_factory=dict)
    """Training statistics (seconds, labeled steps, tokens, ...), plain values only."""
    epoch_losses: list[float] = field(default_factory=list)
    evaluation: Evaluation | None = None
    current_on_this_evaluation: Evaluation | None = None
    """The PRM that was current, judged on the same sets; None for the first model."""
    gate: Gate | None = None
    checkpoint_bytes: int | None = None
    """The checkpoint's size when it was saved (kept after it is pruned)."""
    pruned_checkpoints: list[int] = field(default_factory=list)
    """Runs whose checkpoints this run deleted."""
    pool: dict[str, int] = field(default_factory=dict)
    """The unlabeled pool when the run looked at it: pool, wrong-answer candidates, ungraded."""
    pace: Pace | None = None
    pool_scored: int | None = None
    pool_scored_with: int | None = None
    """The run whose PRM scored the pool (this one, or the current one it kept)."""
    selection: Selection | None = None
    generation: int | None = None
    """The generation the run queued."""

    @property
    def best_of_n(self) -> BestOfN | None:
        """The headline best-of-N: the first set with figures, else the first set."""
        sets = self.evaluation.best_of_n if self.evaluation else []
        return next((s for s in sets if s.status is None), sets[0] if sets else None)


def read_metrics(data: Any) -> RunMetrics:
    """A run's metrics JSON as typed figures."""
    if not isinstance(data, dict):
        return RunMetrics()
    train = _mapping(data.get("train"))
    pruned = data.get("pruned_checkpoints")
    return RunMetrics(
        examples=_whole(data.get("examples")),
        labels=_whole(data.get("labels")),
        labels_trained=_whole(data.get("labels_trained")),
        split=_split(data.get("split")),
        left_out=_left_out(data.get("evaluation_left_out")),
        skipped=_text(data.get("skipped")),
        missing={
            name: reason
            for name, reason in _mapping(data.get("evaluation_missing")).items()
            if isinstance(reason, str)
        },
        training_args=_plain_values(data.get("training_args")),
        train=_plain_values(train),
        epoch_losses=_numbers(train.get("epoch_losses")),
        evaluation=_evaluation(data.get("evaluation")),
        current_on_this_evaluation=_evaluation(data.get("current_on_this_evaluation")),
        gate=_gate(data.get("gate")),
        checkpoint_bytes=_whole(data.get("checkpoint_bytes")),
        pruned_checkpoints=[
            run
            for run in map(_whole, pruned if isinstance(pruned, list) else [])
            if run is not None
        ],
        pool={k: v for k, v in _plain_values(data.get("pool")).items() if isinstance(v, int)},
        pace=_pace(data.get("pace")),
        pool_scored=_whole(data.get("pool_scored")),
        pool_scored_with=_whole(data.get("pool_scored_with")),
        selection=_selection(data.get("selection")),
        generation=_whole(data.get("generation")),
    )


def estimate(data: Any) -> Estimate | None:
    """``{value, low, high, n}`` or ``{status: "not enough data: ..."}``; None for anything else."""
    if not isinstance(data, dict):
        return None
    value, status = _number(data.get("value")), _text(data.get("status"))
    if value is None:
        return Estimate(None, status=status) if status and status != "ok" else None
    low, high = _number(data.get("low")), _number(data.get("high"))
    return Estimate(value, low, high, _whole(data.get("n")))


def _evaluation(data: Any) -> Evaluation | None:
    if not isinstance(data, dict):
        return None
    sets = _mapping(data.get("sets"))
    return Evaluation(
        sets={k: v for k, v in sets.items() if _whole(v) is not None},
        step_auroc=estimate(data.get("step_auroc")),
        processbench=_processbench(data.get("processbench")),
        best_of_n=[
            figures
            for key, samples in BEST_OF_N_SETS.items()
            if (figures := _best_of_n(data.get(key), samples)) is not None
        ],
        tokens_per_second=_number(data.get("tokens_per_second")),
        sequences_computed=_whole(data.get("sequences_computed")),
    )


def _processbench(data: Any) -> ProcessBench | None:
    if not isinstance(data, dict):
        return None
    subsets = _mapping(data.get("subsets"))
    return ProcessBench(
        threshold=_number(data.get("threshold")),
        f1=estimate(data.get("f1")),
        subsets=[
            SubsetFigures(
                name=str(name),
                f1=estimate(figures.get("f1")),
                accuracy_erroneous=_number(figures.get("accuracy_erroneous")),
                accuracy_correct=_number(figures.get("accuracy_correct")),
                erroneous=_whole(figures.get("erroneous")),
                correct=_whole(figures.get("correct")),
            )
            for name, figures in subsets.items()
            if isinstance(figures, dict)
        ],
    )


def _best_of_n(data: Any, samples: str) -> BestOfN | None:
    if not isinstance(data, dict):
        return None
    status = _text(data.get("status"))
    return BestOfN(
        samples=samples,
        status=None if status in (None, "ok") else status,
        problems=_whole(data.get("problems")),
        mean_n=_number(data.get("mean_n")),
        prm=estimate(data.get("prm")),
        majority=estimate(data.get("majority")),
        random=estimate(data.get("random")),
    )


def _gate(data: Any) -> Gate | None:
    if not isinstance(data, dict) or not isinstance(data.get("promote"), bool):
        return None
    judged = data.get("judged")
    return Gate(
        promote=data["promote"],
        reason=_text(data.get("reason")) or "",
        metric=_text(data.get("metric")),
        new=estimate(data.get("new")),
        current=estimate(data.get("current")),
        difference=estimate(data.get("difference")),
        primary=_text(data.get("primary")),
        margin=_number(data.get("margin")),
        judged=[
            Judgement(
                metric=str(item.get("metric")),
                new=estimate(item.get("new")),
                current=estimate(item.get("current")),
                difference=estimate(item.get("difference")),
                passed=item.get("passed") is True,
                verdict=_text(item.get("verdict")) or "",
            )
            for item in (judged if isinstance(judged, list) else [])
            if isinstance(item, dict)
        ],
        not_judged={
            k: v for k, v in _plain_values(data.get("not_judged")).items() if isinstance(v, str)
        },
        error=_text(data.get("error")),
    )


def _split(data: Any) -> Split | None:
    if not isinstance(data, dict) or not isinstance(data.get("identity"), str):
        return None
    return Split(
        identity=data["identity"],
        seed=_whole(data.get("seed")),
        held_out_fraction=_number(data.get("held_out_fraction")),
    )


def _left_out(data: Any) -> list[LeftOut] | None:
    if not isinstance(data, list):
        return None
    return [
        LeftOut(str(item["set"]), str(item.get("unit") or ""), item["count"], str(item["reason"]))
        for item in data
        if isinstance(item, dict)
        and _whole(item.get("count")) is not None
        and isinstance(item.get("set"), str)
        and isinstance(item.get("reason"), str)
    ]


def _pace(data: Any) -> Pace | None:
    if not isinstance(data, dict):
        return None
    due = data.get("due")
    return Pace(
        due=due if isinstance(due, bool) else None,
        reason=_text(data.get("reason")),
        open_generation=_whole(data.get("open_generation")),
        share_done=_number(data.get("share_done")),
    )


def _selection(data: Any) -> Selection | None:
    if not isinstance(data, dict):
        return None
    return Selection(
        strategy=_text(data.get("strategy")),
        queued=_whole(data.get("queued")),
        wrong_share=_number(data.get("yield")),
        pool_wrong_share=_number(data.get("pool_wrong_share")),
        reason=_text(data.get("reason")),
        control=_whole(data.get("control")),
        control_wrong_share=_number(data.get("control_yield")),
        taken_meanwhile=_whole(data.get("taken_meanwhile")),
    )


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _plain_values(value: Any) -> dict[str, Any]:
    """The entries of a JSON object whose values are numbers, text, booleans or null."""
    plain = (str, int, float, type(None))
    return {str(k): v for k, v in _mapping(value).items() if isinstance(v, plain)}


def _number(value: Any) -> float | None:
    is_number = isinstance(value, int | float) and not isinstance(value, bool)
    return float(value) if is_number else None


def _whole(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _numbers(value: Any) -> list[float]:
    items = value if isinstance(value, list) else []
    return [number for number in map(_number, items) if number is not None]
